// The Claude Agent SDK's runtime MCP and settings methods against keel:
// setMcpServers() adding a stdio server, an in-process SDK server and one
// that cannot start, then removing them all; setMcpPermissionModeOverride()
// making a server's calls ask under bypassPermissions; updateSettings().
// The mock's answers are queued by the Rust test
// (suite/clients/claude_sdk_mcp_set.rs). Prints one JSON object.
import { join } from "node:path";
import { createSdkMcpServer, query, tool } from "@anthropic-ai/claude-agent-sdk";
import { z } from "zod";

const ws = process.env.KEEL_TEST_WS;
const out = { errors: {} };

async function step(name, f) {
  try {
    out[name] = await f();
  } catch (e) {
    out.errors[name] = String(e?.stack ?? e);
  }
}

async function refused(f) {
  try {
    await f();
    return null;
  } catch (e) {
    return String(e?.message ?? e);
  }
}

// Each message waits until it is let go.
const gates = [];
const release = () => gates.shift()?.();
async function* turns(...texts) {
  for (const text of texts) {
    await new Promise((r) => gates.push(r));
    yield { type: "user", message: { role: "user", content: text }, parent_tool_use_id: null, session_id: "" };
  }
}

const calcCalls = [];
const calc = createSdkMcpServer({
  name: "calc",
  version: "1.0.0",
  tools: [
    tool("add", "Adds two numbers", { a: z.number(), b: z.number() }, async ({ a, b }) => {
      calcCalls.push([a, b]);
      return { content: [{ type: "text", text: String(a + b) }] };
    }),
  ],
});

const asked = [];
const q = query({
  prompt: turns("one", "two", "three"),
  options: {
    pathToClaudeCodeExecutable: process.env.KEEL_BIN,
    cwd: ws,
    model: "claude-sonnet-4-5",
    env: { ...process.env },
    stderr: (line) => process.stderr.write(line),
    permissionMode: "bypassPermissions",
    allowDangerouslySkipPermissions: true,
    canUseTool: async (toolName) => {
      asked.push(toolName);
      return { behavior: "allow" };
    },
  },
});

const status = async () => (await q.mcpServerStatus()).map((s) => `${s.name}:${s.status}`).sort();
const results = [];
const askedByTurn = [];

await step("setup", async () => {
  const added = await q.setMcpServers({
    everything: { type: "stdio", command: process.env.MCP_EVERYTHING, args: [] },
    calc,
    broken: { type: "stdio", command: join(ws, "no-such-server") },
  });
  const unchanged = await q.setMcpServers({
    everything: { type: "stdio", command: process.env.MCP_EVERYTHING, args: [] },
    calc,
    broken: { type: "stdio", command: join(ws, "no-such-server") },
  });
  return { added, unchanged, status: await status() };
});
release();

try {
  for await (const m of q) {
    if (m.type !== "result") continue;
    results.push(m.result);
    askedByTurn.push([...asked]);
    asked.length = 0;
    if (results.length === 1) {
      await step("override", async () => ({
        calc: await q.setMcpPermissionModeOverride("calc", "default"),
        unknown: await q.setMcpPermissionModeOverride("nowhere", "default"),
        auto: await q.setMcpPermissionModeOverride("everything", "auto"),
      }));
    } else if (results.length === 2) {
      await step("removed", async () => ({ set: await q.setMcpServers({}), status: await status() }));
      await step("settings", async () => ({
        effort: await refused(() => q.updateSettings("userSettings", { effortLevel: "high" })),
        style: await refused(() => q.updateSettings("localSettings", { outputStyle: "default" })),
        badStyle: await refused(() => q.updateSettings("localSettings", { outputStyle: "fancy" })),
        badKey: await refused(() => q.updateSettings("userSettings", { theme: "dark" })),
        badEffort: await refused(() => q.updateSettings("userSettings", { effortLevel: "loud" })),
      }));
    } else {
      break;
    }
    release();
  }
} catch (e) {
  out.errors.query = String(e?.stack ?? e).slice(0, 2000);
}
out.results = results;
out.asked = askedByTurn;
out.calcCalls = calcCalls;
console.log(JSON.stringify(out));
