// The ACP bridge editors use to drive Codex (@agentclientprotocol/codex-acp),
// unmodified, with keel as its Codex binary (CODEX_PATH). The mock model's
// answers are queued by the Rust test (suite/clients), in step order.
import { createRequire } from "node:module";
import { Editor, run } from "./acp_editor.mjs";

const require = createRequire(import.meta.url);
const bridge = require.resolve("@agentclientprotocol/codex-acp/dist/index.js");
const ws = process.env.KEEL_TEST_WS;
const editor = new Editor(process.execPath, [bridge], { CODEX_PATH: process.env.KEEL_BIN });
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
  ["allowed", async () => {
    editor.permissionAnswer = "allow_once";
    const from = editor.updates.length;
    const r = await editor.request("session/prompt", { sessionId: session, prompt: [{ type: "text", text: "fetch it" }] });
    return { stopReason: r.stopReason, text: editor.text(from), asked: editor.permissions.length };
  }],
  ["rejected", async () => {
    editor.permissionAnswer = "reject_once";
    const from = editor.updates.length;
    const r = await editor.request("session/prompt", { sessionId: session, prompt: [{ type: "text", text: "fetch again" }] });
    return { stopReason: r.stopReason, text: editor.text(from), asked: editor.permissions.length };
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
