// The ACP bridge editors use to drive Codex (@agentclientprotocol/codex-acp),
// unmodified, with keel as its Codex binary (CODEX_PATH). The mock model's
// answers are queued by the Rust test (suite/clients), in step order.
import { createRequire } from "node:module";
import { Editor, closingSteps, openingSteps, prompt, run } from "./acp_editor.mjs";

const require = createRequire(import.meta.url);
const bridge = require.resolve("@agentclientprotocol/codex-acp/dist/index.js");
const ws = process.env.KEEL_TEST_WS;
const editor = new Editor(process.execPath, [bridge], { CODEX_PATH: process.env.KEEL_BIN });
const session = {};

await run(editor, [
  ...openingSteps(editor, ws, session),
  ["allowed", () => ((editor.permissionAnswer = "allow_once"), prompt(editor, session, "fetch it"))],
  ["rejected", () => ((editor.permissionAnswer = "reject_once"), prompt(editor, session, "fetch again"))],
  ...closingSteps(editor, ws, session),
]);
