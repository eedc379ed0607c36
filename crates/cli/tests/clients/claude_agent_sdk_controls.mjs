// The Claude Agent SDK's Query methods beyond a turn, against keel:
// rewindFiles() with enableFileCheckpointing and replayed user messages,
// getContextUsage(), readFile(), an --mcp-config server toggled,
// reconnected and read from (toggleMcpServer, reconnectMcpServer,
// readMcpResource), applyFlagSettings(), seedReadState(), reloadSkills(),
// reloadOutputStyles(), reloadPlugins(), supportedAgents(), stopTask(),
// reinitialize().
// The mock's answers are queued by the Rust test
// (suite/clients/claude_agent_sdk.rs). Prints one JSON object.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { query } from "@anthropic-ai/claude-agent-sdk";

const ws = process.env.KEEL_TEST_WS;
const out = { errors: {} };

async function step(name, f) {
  try {
    out[name] = await f();
  } catch (e) {
    out.errors[name] = String(e?.stack ?? e);
  }
}

const read = (name) => (existsSync(join(ws, name)) ? readFileSync(join(ws, name), "utf8") : null);

// Messages sent one by one, each after the previous one's result.
let next;
const results = [];
async function* turns(...texts) {
  for (const text of texts) {
    yield { type: "user", message: { role: "user", content: text }, parent_tool_use_id: null, session_id: "" };
    await new Promise((r) => (next = r));
  }
}

const q = query({
  prompt: turns("write a", "change them"),
  options: {
    pathToClaudeCodeExecutable: process.env.KEEL_BIN,
    cwd: ws,
    model: "claude-sonnet-4-5",
    env: { ...process.env },
    stderr: (line) => process.stderr.write(line),
    permissionMode: "acceptEdits",
    enableFileCheckpointing: true,
    extraArgs: { "replay-user-messages": null },
    mcpServers: { everything: { type: "stdio", command: process.env.MCP_EVERYTHING, args: [] } },
  },
});

const replayed = [];
const states = [];
try {
for await (const m of q) {
  if (m.type === "user" && m.isReplay) replayed.push({ uuid: m.uuid, content: m.message.content });
  if (m.type !== "result") continue;
  results.push(m.result);
  states.push({ a: read("a.txt"), b: read("b.txt") });
  if (results.length < 2) {
    next();
    continue;
  }
  // Both turns are done: the controls, while the session is open.
  const second = replayed[1]?.uuid;
  await step("rewindDry", () => q.rewindFiles(second, { dryRun: true }));
  out.afterDry = { a: read("a.txt"), b: read("b.txt") };
  await step("rewind", () => q.rewindFiles(second));
  out.afterRewind = { a: read("a.txt"), b: read("b.txt") };
  await step("rewindUnknown", () => q.rewindFiles("no-such-message"));
  await step("context", () => q.getContextUsage());
  await step("readFile", () => q.readFile("a.txt"));
  await step("readOutside", () => q.readFile("../../../../etc/hostname"));
  await step("mcp", async () => {
    const status = async () => (await q.mcpServerStatus()).map((s) => `${s.name}:${s.status}`);
    const first = await status();
    await q.toggleMcpServer("everything", false);
    const off = await status();
    let offRead = null;
    try {
      await q.readMcpResource("everything", "demo://resource/static/document/architecture.md");
    } catch (e) {
      offRead = String(e.message);
    }
    await q.toggleMcpServer("everything", true);
    const on = await status();
    await q.reconnectMcpServer("everything");
    const again = await status();
    const resource = await q.readMcpResource("everything", "demo://resource/static/document/architecture.md");
    let unknown = null;
    try {
      await q.reconnectMcpServer("nowhere");
    } catch (e) {
      unknown = String(e.message);
    }
    return { first, off, offRead, on, again, resource: resource.contents[0], unknown };
  });
  await step("others", async () => {
    await q.applyFlagSettings({ permissions: { defaultMode: "plan" } });
    await q.seedReadState(join(ws, "a.txt"), Date.now());
    let stop = null;
    try {
      await q.stopTask("t1");
    } catch (e) {
      stop = String(e.message);
    }
    const again = await q.reinitialize();
    return {
      reinitialized: { models: again.models.map((m) => m.value), mcpApplied: again.mcp_servers_applied ?? null },
      skills: await q.reloadSkills(),
      styles: await q.reloadOutputStyles(),
      plugins: await q.reloadPlugins(),
      agents: await q.supportedAgents(),
      stop,
    };
  });
  next();
}
} catch (e) {
  out.errors.query = String(e?.stack ?? e).slice(0, 2000);
}
out.replayed = replayed;
out.results = results;
out.states = states;
console.log(JSON.stringify(out));
