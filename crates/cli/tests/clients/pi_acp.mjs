// pi's ACP bridge (pi-acp), unmodified, with keel as its pi command
// (PI_ACP_PI_COMMAND; flat events from KEEL_RPC_FLAT_EVENTS). The mock model's
// answers are queued by the Rust test (suite/clients), in step order.
import { createRequire } from "node:module";
import { Editor, closingSteps, openingSteps, prompt, run } from "./acp_editor.mjs";

const require = createRequire(import.meta.url);
const bridge = require.resolve("pi-acp/dist/index.js");
const ws = process.env.KEEL_TEST_WS;
// pi-acp lists sessions from pi's agent folder: keel's home is that folder.
const editor = new Editor(process.execPath, [bridge], {
  PI_ACP_PI_COMMAND: process.env.KEEL_BIN,
  KEEL_RPC_FLAT_EVENTS: "1",
  PI_CODING_AGENT_DIR: process.env.KEEL_HOME,
});
const session = {};

await run(editor, [
  ...openingSteps(editor, ws, session),
  // pi has no approvals: a read-only command, which keel runs unasked.
  ["tool", () => prompt(editor, session, "run it")],
  ...closingSteps(editor, ws, session),
]);
