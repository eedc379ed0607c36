// Anthropic's Claude Agent SDK (@anthropic-ai/claude-agent-sdk), unmodified,
// with keel as its Claude Code executable (pathToClaudeCodeExecutable):
// query() with a string prompt and with streaming input, partial messages,
// canUseTool (allow with updatedInput, deny, deny with interrupt), a
// PreToolUse hook, interrupt(), setPermissionMode(), setModel(),
// supportedModels(), mcpServerStatus(), structured output and resume in a
// new process. The model is the SDK's own: ANTHROPIC_BASE_URL at the mock.
// The mock's answers are queued by the Rust test
// (suite/clients/claude_agent_sdk.rs), in step order. Prints one JSON
// object: what the SDK gave back at each step.
// CLAUDE_SDK_REAL=1 runs Claude Code as the SDK ships it, for comparison;
// CLAUDE_SDK_STEPS=a,b runs only those steps.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { createSdkMcpServer, query, tool } from "@anthropic-ai/claude-agent-sdk";
import { z } from "zod";

const ws = process.env.KEEL_TEST_WS;
const real = process.env.CLAUDE_SDK_REAL === "1";
const only = process.env.CLAUDE_SDK_STEPS?.split(",");
const out = { errors: {} };

const base = (extra = {}) => ({
  ...(real ? {} : { pathToClaudeCodeExecutable: process.env.KEEL_BIN }),
  cwd: ws,
  model: "claude-sonnet-4-5",
  env: { ...process.env },
  stderr: (line) => process.stderr.write(line),
  ...extra,
});

async function step(name, f) {
  if (only && !only.includes(name)) return;
  try {
    out[name] = await f();
  } catch (e) {
    out.errors[name] = String(e?.stack ?? e);
  }
}

async function collect(q) {
  const seen = [];
  for await (const m of q) seen.push(m);
  return seen;
}

const brief = (seen) =>
  seen.map((m) => (m.type === "system" || m.type === "result" ? `${m.type}/${m.subtype}` : m.type));

async function* messages(...texts) {
  for (const text of texts) {
    yield { type: "user", message: { role: "user", content: text }, parent_tool_use_id: null, session_id: "" };
  }
}

await step("query", async () => {
  const seen = await collect(query({ prompt: "say hi", options: base() }));
  const init = seen.find((m) => m.type === "system" && m.subtype === "init");
  const result = seen.find((m) => m.type === "result");
  const texts = seen
    .filter((m) => m.type === "assistant")
    .flatMap((m) => m.message.content.filter((b) => b.type === "text").map((b) => b.text));
  const assistant = seen.find((m) => m.type === "assistant");
  return { kinds: brief(seen), init, texts, assistant, result };
});

await step("partial", async () => {
  const seen = await collect(query({ prompt: "stream it", options: base({ includePartialMessages: true }) }));
  return seen.filter((m) => m.type === "stream_event").map((m) => m.event.type);
});

await step("allowUpdated", async () => {
  const asked = [];
  const canUseTool = async (toolName, input, { signal }) => {
    asked.push({ toolName, input, signal: signal instanceof AbortSignal });
    return { behavior: "allow", updatedInput: { ...input, content: "two\n" } };
  };
  const seen = await collect(query({ prompt: "write a file", options: base({ canUseTool }) }));
  const results = seen.filter((m) => m.type === "user").map((m) => m.message.content[0]);
  return { asked, results, file: readFileSync(join(ws, "a.txt"), "utf8"), result: seen.at(-1) };
});

await step("deny", async () => {
  const canUseTool = async () => ({ behavior: "deny", message: "not that file" });
  const seen = await collect(query({ prompt: "write another", options: base({ canUseTool }) }));
  const results = seen.filter((m) => m.type === "user").map((m) => m.message.content[0]);
  return { results, exists: existsSync(join(ws, "b.txt")), result: seen.at(-1) };
});

await step("denyInterrupt", async () => {
  const canUseTool = async () => ({ behavior: "deny", message: "stop here", interrupt: true });
  const seen = await collect(query({ prompt: "write a third", options: base({ canUseTool }) }));
  return { kinds: brief(seen), exists: existsSync(join(ws, "c.txt")), result: seen.at(-1) };
});

await step("hook", async () => {
  const inputs = [];
  const hooks = {
    PreToolUse: [
      {
        matcher: "Bash",
        hooks: [
          async (input) => {
            inputs.push({ event: input.hook_event_name, tool: input.tool_name, command: input.tool_input.command });
            return {
              hookSpecificOutput: {
                hookEventName: "PreToolUse",
                permissionDecision: "deny",
                permissionDecisionReason: "no deleting here",
              },
            };
          },
        ],
      },
    ],
  };
  const seen = await collect(query({ prompt: "clean up", options: base({ hooks }) }));
  const results = seen.filter((m) => m.type === "user").map((m) => m.message.content[0]);
  return { inputs, results, kept: existsSync(join(ws, "keep.txt")), result: seen.at(-1) };
});

await step("streaming", async () => {
  const q = query({ prompt: messages("first", "second"), options: base() });
  const seen = await collect(q);
  return seen.filter((m) => m.type === "result").map((m) => ({ subtype: m.subtype, result: m.result }));
});

await step("interrupt", async () => {
  let release;
  const done = new Promise((r) => (release = r));
  async function* held() {
    yield { type: "user", message: { role: "user", content: "take your time" }, parent_tool_use_id: null, session_id: "" };
    await done;
  }
  const q = query({ prompt: held(), options: base() });
  const kinds = [];
  let result;
  for await (const m of q) {
    kinds.push(m.type);
    if (m.type === "assistant" && m.message.content.some((b) => b.type === "tool_use")) {
      // The command runs: interrupt it.
      setTimeout(() => q.interrupt().catch(() => {}), 300);
    }
    if (m.type === "result") {
      result = m;
      release();
    }
  }
  return { kinds, result };
});

await step("controls", async () => {
  let release;
  const done = new Promise((r) => (release = r));
  const asked = [];
  const canUseTool = async (toolName) => {
    asked.push(toolName);
    return { behavior: "allow" };
  };
  async function* later() {
    await done;
    yield { type: "user", message: { role: "user", content: "write it now" }, parent_tool_use_id: null, session_id: "" };
  }
  const q = query({ prompt: later(), options: base({ canUseTool }) });
  const models = await q.supportedModels();
  const mcp = await q.mcpServerStatus();
  const mode = await q.setPermissionMode("acceptEdits");
  await q.setModel("claude-opus-4-1");
  let bad = null;
  try {
    await q.setPermissionMode("nonsense");
  } catch (e) {
    bad = String(e.message);
  }
  release();
  const seen = await collect(q);
  return { models, mcp, mode, bad, asked, file: existsSync(join(ws, "d.txt")), result: seen.at(-1) };
});

await step("structured", async () => {
  const schema = {
    type: "object",
    properties: { ok: { type: "boolean" } },
    required: ["ok"],
    additionalProperties: false,
  };
  const seen = await collect(
    query({ prompt: "answer in JSON", options: base({ outputFormat: { type: "json_schema", schema } }) }),
  );
  const result = seen.at(-1);
  return { subtype: result.subtype, structured: result.structured_output };
});

await step("resumed", async () => {
  const id = out.query?.result?.session_id;
  const seen = await collect(query({ prompt: "and again", options: base({ resume: id }) }));
  const result = seen.at(-1);
  return { asked: id, session_id: result.session_id, result: result.result };
});

await step("alwaysAllow", async () => {
  // The first write is allowed with a rule for the session: the second
  // one is not asked.
  const asked = [];
  const canUseTool = async (toolName, input, { suggestions }) => {
    asked.push({ toolName, suggestions: suggestions?.length ?? 0 });
    return {
      behavior: "allow",
      updatedPermissions: [
        { type: "addRules", rules: [{ toolName: "Write" }], behavior: "allow", destination: "session" },
      ],
    };
  };
  const q = query({ prompt: messages("write e1", "write e2"), options: base({ canUseTool }) });
  const seen = await collect(q);
  return {
    asked,
    written: [existsSync(join(ws, "e1.txt")), existsSync(join(ws, "e2.txt"))],
    results: seen.filter((m) => m.type === "result").map((m) => m.result),
  };
});

await step("sdkMcp", async () => {
  const calls = [];
  const calc = createSdkMcpServer({
    name: "calc",
    version: "1.0.0",
    tools: [
      tool("add", "Adds two numbers", { a: z.number(), b: z.number() }, async ({ a, b }) => {
        calls.push([a, b]);
        return { content: [{ type: "text", text: String(a + b) }] };
      }),
    ],
  });
  const asked = [];
  const canUseTool = async (toolName) => {
    asked.push(toolName);
    return { behavior: "allow" };
  };
  const seen = await collect(
    query({ prompt: "add two and three", options: base({ mcpServers: { calc }, canUseTool }) }),
  );
  const init = seen.find((m) => m.type === "system" && m.subtype === "init");
  const results = seen.filter((m) => m.type === "user").map((m) => m.message.content[0]);
  return { calls, asked, results, servers: init?.mcp_servers, tools: init?.tools, result: seen.at(-1)?.result };
});

console.log(JSON.stringify(out));
