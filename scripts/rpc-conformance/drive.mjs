#!/usr/bin/env node
// Drives `keel --mode rpc --rpc-flat-events` with pi's own RpcClient
// (@mariozechner/pi-coding-agent 0.73.1): state, a text prompt, a tool run,
// an abort. The model is whatever keel is pointed at; the expected answers
// come from the environment (the cli test scripts a mock model to match).
//
//   PI_RPC_CLIENT  path of pi's dist/modes/rpc/rpc-client.js
//   KEEL_BIN       the keel binary
//   KEEL_ARGS      JSON array of extra keel arguments (model flags)
//
// Exit status 0 when every step passed; otherwise the failing step on stderr.
import { fileURLToPath, pathToFileURL } from "node:url";
import path from "node:path";

const here = path.dirname(fileURLToPath(import.meta.url));
const clientPath = process.env.PI_RPC_CLIENT;
if (!clientPath) {
  console.error("drive: set PI_RPC_CLIENT to pi's dist/modes/rpc/rpc-client.js");
  process.exit(2);
}
const { RpcClient } = await import(pathToFileURL(clientPath).href);
const args = JSON.parse(process.env.KEEL_ARGS ?? "[]");

function check(cond, what, detail) {
  if (!cond) {
    console.error(`FAIL ${what}${detail === undefined ? "" : `: ${JSON.stringify(detail)}`}`);
    process.exit(1);
  }
  console.log(`ok ${what}`);
}

const client = new RpcClient({ cliPath: path.join(here, "keel-shim.mjs"), args });
await client.start();
try {
  const state = await client.getState();
  check(state.isStreaming === false && typeof state.sessionId === "string", "get_state", state);

  const events = await client.promptAndWait("Say hello", undefined, 30000);
  const deltas = events
    .filter((e) => e.type === "message_update" && e.assistantMessageEvent?.type === "text_delta")
    .map((e) => e.assistantMessageEvent.delta)
    .join("");
  check(deltas === "Hello from keel!", "text prompt streams deltas", deltas);
  check(events.at(-1)?.type === "agent_end", "the run ends with agent_end", events.at(-1));
  check((await client.getLastAssistantText()) === "Hello from keel!", "get_last_assistant_text");

  const toolEvents = await client.promptAndWait("Run a tool", undefined, 30000);
  const end = toolEvents.find((e) => e.type === "tool_execution_end");
  check(end?.toolName === "bash" && end.isError === false, "tool run", end);
  check(JSON.stringify(end.result).includes("hello-from-tool"), "tool output", end.result);

  const idle = client.waitForIdle(30000);
  await client.prompt("Take your time");
  await new Promise((resolve) => {
    const off = client.onEvent((e) => {
      if (e.type === "message_update") {
        off();
        resolve();
      }
    });
  });
  await client.abort();
  await idle;
  const messages = await client.getMessages();
  const last = messages.at(-1);
  check(last?.role === "assistant" && last.stopReason === "aborted", "abort", last);

  const stats = await client.getSessionStats();
  check(stats.userMessages === 3 && stats.toolCalls === 1, "get_session_stats", stats);
  await client.setSessionName("conformance");
  check((await client.getState()).sessionName === "conformance", "set_session_name");
} finally {
  await client.stop();
}
console.log("conformance: all steps passed");
