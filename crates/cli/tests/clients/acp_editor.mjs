// A minimal ACP editor (the side Zed plays): JSON-RPC 2.0 over
// newline-delimited JSON on an agent process's stdin/stdout. It answers
// permission requests with a chosen option kind and records session
// updates. Used by the ACP bridge scripts; every wait is bounded.
// ACP_EDITOR_TRACE=1 writes every message the bridge sends, and every
// permission answer, to stderr (for debugging a bridge).
import { spawn } from "node:child_process";
import readline from "node:readline";

const WAIT_MS = 30000;

export class Editor {
  constructor(command, args, env) {
    this.child = spawn(command, args, { env: { ...process.env, ...env }, stdio: ["pipe", "pipe", "pipe"] });
    this.stderr = "";
    this.child.stderr.on("data", (d) => (this.stderr += d.toString()));
    this.nextId = 1;
    this.pending = new Map();
    this.updates = [];
    this.permissions = [];
    this.permissionAnswer = "allow_once";
    readline.createInterface({ input: this.child.stdout }).on("line", (line) => this.onLine(line));
  }

  onLine(line) {
    let msg;
    try {
      msg = JSON.parse(line);
    } catch {
      return;
    }
    if (msg.id !== undefined && msg.method === undefined) {
      const waiter = this.pending.get(msg.id);
      if (waiter) {
        this.pending.delete(msg.id);
        msg.error ? waiter.reject(new Error(`${waiter.method}: ${JSON.stringify(msg.error)}`)) : waiter.resolve(msg.result);
      }
      return;
    }
    if (process.env.ACP_EDITOR_TRACE && msg.method) process.stderr.write(`editor <- ${msg.method} ${JSON.stringify(msg.params).slice(0, 200)}\n`);
    if (msg.method === "session/update") {
      this.updates.push(msg.params.update);
      return;
    }
    if (msg.method === "session/request_permission") {
      this.permissions.push(msg.params);
      if (process.env.ACP_EDITOR_TRACE) process.stderr.write(`editor answers ${this.permissionAnswer} (${this.permissions.length})\n`);
      const option = msg.params.options.find((o) => o.kind === this.permissionAnswer) ?? msg.params.options[0];
      this.send({ jsonrpc: "2.0", id: msg.id, result: { outcome: { outcome: "selected", optionId: option.optionId } } });
      return;
    }
    if (msg.id !== undefined) {
      // Anything else the agent asks (file system, terminals): not offered.
      this.send({ jsonrpc: "2.0", id: msg.id, error: { code: -32601, message: "not supported by this editor" } });
    }
  }

  send(msg) {
    this.child.stdin.write(JSON.stringify(msg) + "\n");
  }

  request(method, params, waitMs = WAIT_MS) {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`${method}: no answer in ${waitMs} ms`));
      }, waitMs);
      this.pending.set(id, {
        method,
        resolve: (v) => (clearTimeout(timer), resolve(v)),
        reject: (e) => (clearTimeout(timer), reject(e)),
      });
      this.send({ jsonrpc: "2.0", id, method, params });
    });
  }

  notify(method, params) {
    this.send({ jsonrpc: "2.0", method, params });
  }

  /** The agent's text since `from` (an index into the updates). */
  text(from = 0) {
    return this.updates
      .slice(from)
      .filter((u) => u.sessionUpdate === "agent_message_chunk" && u.content?.type === "text")
      .map((u) => u.content.text)
      .join("");
  }

  async close() {
    this.child.stdin.end();
    await new Promise((resolve) => {
      const timer = setTimeout(() => (this.child.kill("SIGKILL"), resolve()), 3000);
      this.child.on("exit", () => (clearTimeout(timer), resolve()));
    });
  }
}

/** Runs `steps` (name → async fn), recording results and errors; prints one JSON line. */
export async function run(editor, steps) {
  const out = {};
  const errors = {};
  for (const [name, fn] of steps) {
    try {
      out[name] = await fn();
    } catch (e) {
      errors[name] = String(e?.message ?? e);
    }
  }
  out.errors = errors;
  await editor.close();
  if (Object.keys(errors).length) out.stderr = editor.stderr.slice(-4000);
  process.stdout.write(JSON.stringify(out) + "\n");
}

/** A prompt in `session`: its stop reason, the agent's text, the tool calls started. */
export async function prompt(editor, session, text) {
  const from = editor.updates.length;
  const r = await editor.request("session/prompt", { sessionId: session.id, prompt: [{ type: "text", text }] });
  const calls = editor.updates.slice(from).filter((u) => u.sessionUpdate === "tool_call").length;
  return { stopReason: r.stopReason, text: editor.text(from), calls, asked: editor.permissions.length };
}

/** The steps every bridge runs first: initialize, a session in `ws`, a text prompt. */
export function openingSteps(editor, ws, session) {
  return [
    ["initialize", async () => (await editor.request("initialize", {
      protocolVersion: 1,
      clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
    })).protocolVersion],
    ["newSession", async () => {
      const r = await editor.request("session/new", { cwd: ws, mcpServers: [] });
      session.id = r.sessionId;
      return typeof session.id === "string";
    }],
    ["text", () => prompt(editor, session, "hello")],
  ];
}

/** The steps every bridge runs last: a stalled prompt cancelled, the session list. */
export function closingSteps(editor, ws, session) {
  return [
    ["cancelled", async () => {
      const from = editor.updates.length;
      const pending = editor.request("session/prompt", { sessionId: session.id, prompt: [{ type: "text", text: "stall" }] });
      for (let i = 0; i < 200 && editor.text(from) === ""; i++) await new Promise((r) => setTimeout(r, 25));
      editor.notify("session/cancel", { sessionId: session.id });
      return (await pending).stopReason;
    }],
    ["listed", async () => {
      const r = await editor.request("session/list", { cwd: ws });
      return r.sessions.some((s) => s.sessionId === session.id);
    }],
  ];
}
