// pi's ACP bridge (pi-acp), unmodified, with keel as its pi command
// (PI_ACP_PI_COMMAND; flat events from KEEL_RPC_FLAT_EVENTS). The mock model's
// answers are queued by the Rust test (suite/clients), in step order.
import { createRequire } from "node:module";
import { Editor, run } from "./acp_editor.mjs";

const require = createRequire(import.meta.url);
const bridge = require.resolve("pi-acp/dist/index.js");
const ws = process.env.KEEL_TEST_WS;
// pi-acp lists sessions from pi's agent folder: keel's home is that folder.
const editor = new Editor(process.execPath, [bridge], {
  PI_ACP_PI_COMMAND: process.env.KEEL_BIN,
  KEEL_RPC_FLAT_EVENTS: "1",
  PI_CODING_AGENT_DIR: process.env.KEEL_HOME,
});
let session;

await run(editor, [
  ["initialize", async () => (await editor.request("initialize", {
    protocolVersion: 1,
    clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
  })).protocolVersion],
  ["newSession", async () => {
    const r = await editor.request("session/new", { cwd: ws, mcpServers: [] });
    session = r.sessionId;
    return typeof session === "string";
  }],
  ["text", async () => {
    const from = editor.updates.length;
    const r = await editor.request("session/prompt", { sessionId: session, prompt: [{ type: "text", text: "hello" }] });
    return { stopReason: r.stopReason, text: editor.text(from) };
  }],
  ["tool", async () => {
    const from = editor.updates.length;
    const r = await editor.request("session/prompt", { sessionId: session, prompt: [{ type: "text", text: "run it" }] });
    const calls = editor.updates.slice(from).filter((u) => u.sessionUpdate === "tool_call").length;
    return { stopReason: r.stopReason, text: editor.text(from), calls };
  }],
  ["cancelled", async () => {
    const from = editor.updates.length;
    const prompt = editor.request("session/prompt", { sessionId: session, prompt: [{ type: "text", text: "stall" }] });
    for (let i = 0; i < 200 && editor.text(from) === ""; i++) await new Promise((r) => setTimeout(r, 25));
    editor.notify("session/cancel", { sessionId: session });
    return (await prompt).stopReason;
  }],
  ["listed", async () => {
    const r = await editor.request("session/list", { cwd: ws });
    return r.sessions.some((s) => s.sessionId === session);
  }],
]);
