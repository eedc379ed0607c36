// OpenAI's TypeScript SDK for `codex exec` (@openai/codex-sdk), unmodified,
// with keel as its Codex binary (codexPathOverride). Every public method
// that needs no OpenAI server: run, runStreamed, resumeThread in a new
// Codex (a new process), structured output, images, an abort, a failed
// turn; and (opt-in) the thread options keel maps onto its sandbox,
// approvals and thinking. The mock model's answers are queued by the Rust test
// (suite/clients/codex_ts_sdk.rs), in step order. Prints one JSON object:
// what the SDK gave back at each step.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { Codex } from "@openai/codex-sdk";

const ws = process.env.KEEL_TEST_WS;
const baseUrl = process.env.KEEL_BASE_URL;
// The SDK's own way to name the model server: keel must not need its own.
delete process.env.KEEL_BASE_URL;
// CODEX_SDK_REAL=1: the Codex binary the SDK ships with, for comparison.
const options = () => ({
  ...(process.env.CODEX_SDK_REAL === "1" ? {} : { codexPathOverride: process.env.KEEL_BIN }),
  baseUrl,
  apiKey: "sk-test-codex-sdk",
});
const threadOptions = { workingDirectory: ws, skipGitRepoCheck: true, model: "mock-model" };
const out = { errors: {} };

// CODEX_SDK_STEPS=a,b: only those steps.
const only = process.env.CODEX_SDK_STEPS?.split(",");

// An opt-in step runs only when CODEX_SDK_STEPS names it.
async function step(name, f, { optIn = false } = {}) {
  if ((only || optIn) && !only?.includes(name)) return;
  try {
    out[name] = await f();
  } catch (e) {
    out.errors[name] = String(e?.message ?? e);
  }
}

const codex = new Codex(options());
const thread = codex.startThread(threadOptions);

await step("run", async () => {
  const turn = await thread.run("say hi");
  return { id: thread.id, finalResponse: turn.finalResponse, items: turn.items, usage: turn.usage };
});

await step("streamed", async () => {
  const { events } = await thread.runStreamed("run a command");
  const seen = [];
  for await (const event of events) seen.push(event);
  return seen;
});

await step("fileChange", async () => {
  const turn = await thread.run("write a file");
  return turn.items;
});

await step("structured", async () => {
  const schema = {
    type: "object",
    properties: { ok: { type: "boolean" } },
    required: ["ok"],
    additionalProperties: false,
  };
  const turn = await thread.run("answer in JSON", { outputSchema: schema });
  return JSON.parse(turn.finalResponse);
});

await step("image", async () => {
  const path = join(ws, "dot.png");
  // A 1×1 PNG.
  writeFileSync(
    path,
    Buffer.from(
      "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=",
      "base64",
    ),
  );
  const turn = await thread.run([
    { type: "text", text: "what is in the image" },
    { type: "local_image", path },
  ]);
  return turn.finalResponse;
});

await step("resumed", async () => {
  // A new Codex: a new process that knows the thread by its id only.
  const again = new Codex(options()).resumeThread(out.run?.id, threadOptions);
  const turn = await again.run("and again");
  return { id: again.id, finalResponse: turn.finalResponse };
});

await step("aborted", async () => {
  const controller = new AbortController();
  const { events } = await thread.runStreamed("take your time", { signal: controller.signal });
  const seen = [];
  try {
    for await (const event of events) {
      seen.push(event.type);
      // Mid-command: the model has answered, the command runs.
      if (event.type === "item.started") controller.abort();
    }
  } catch (e) {
    return { seen, error: e.name };
  }
  return { seen, error: null };
});

await step("afterAbort", async () => {
  const turn = await new Codex(options()).resumeThread(out.run?.id, threadOptions).run("still there?");
  return turn.finalResponse;
});

await step("failed", async () => {
  try {
    await thread.run("this fails");
    return null;
  } catch (e) {
    return String(e.message);
  }
});

await step(
  "options",
  async () => {
    const confined = codex.startThread({
      ...threadOptions,
      // A model keel knows reasons (an unknown one is taken not to).
      model: "gpt-5",
      sandboxMode: "read-only",
      approvalPolicy: "never",
      modelReasoningEffort: "high",
      networkAccessEnabled: false,
      webSearchMode: "disabled",
    });
    const turn = await confined.run("try to write");
    return { finalResponse: turn.finalResponse, items: turn.items };
  },
  { optIn: true },
);

console.log(JSON.stringify(out));
