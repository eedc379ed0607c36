// pi's own RpcClient (@mariozechner/pi-coding-agent), unmodified, driving
// keel through scripts/keel-for-node.mjs. The mock model's answers are
// queued by the Rust test that runs this script (suite/clients.rs), in the
// order of the prompts below. Prints one JSON object with what the client
// saw; every wait is bounded by the client's own timeouts.
import { RpcClient } from "@mariozechner/pi-coding-agent";

// keel through its launcher, or (PI_CLI set) pi itself, for comparison.
const cliPath = process.env.PI_CLI || process.env.KEEL_NODE_LAUNCHER;
const out = {};
const client = new RpcClient({
  cliPath,
  cwd: process.env.KEEL_TEST_WS,
  provider: process.env.PI_PROVIDER,
  model: process.env.PI_MODEL,
});

const types = (events) => events.map((e) => e.type);
const texts = (messages) =>
  messages.map((m) =>
    typeof m.content === "string"
      ? m.content
      : m.content.filter((c) => c.type === "text").map((c) => c.text).join(""),
  );

try {
  await client.start();
  const state = await client.getState();
  out.startState = { hasSessionId: typeof state.sessionId === "string", model: state.model?.id };

  const first = await client.promptAndWait("hello", undefined, 20000);
  out.firstTurn = types(first);

  const second = await client.promptAndWait("run it", undefined, 20000);
  out.secondTurn = types(second);
  out.toolResult = second
    .filter((e) => e.type === "tool_execution_end")
    .map((e) => ({ name: e.toolName, isError: e.isError }));

  out.lastAssistantText = await client.getLastAssistantText();
  const forkable = await client.getForkMessages();
  out.forkMessages = forkable.map((m) => m.text);
  const before = (await client.getState()).sessionFile;

  const forked = await client.fork(forkable[1].entryId);
  out.fork = forked;
  const afterFork = await client.getState();
  out.forkNewFile = afterFork.sessionFile !== before;
  out.forkMessagesAfter = texts(await client.getMessages());

  const cloned = await client.clone();
  out.clone = cloned;
  const afterClone = await client.getState();
  out.cloneNewFile = afterClone.sessionFile !== afterFork.sessionFile;
  out.cloneMessages = texts(await client.getMessages());

  // Steer a slow answer, then abort a stalled one.
  const steering = client.collectEvents(20000);
  await client.prompt("slow");
  await new Promise((r) => setTimeout(r, 100));
  await client.steer("and also this");
  out.steered = types(await steering).filter((t) => t === "agent_end").length;
  const following = client.collectEvents(20000);
  await client.prompt("slow again");
  await new Promise((r) => setTimeout(r, 100));
  await client.followUp("then this");
  out.followedUp = types(await following).filter((t) => t === "agent_end").length;
  const aborting = client.collectEvents(20000);
  await client.prompt("stall");
  await new Promise((r) => setTimeout(r, 200));
  await client.abort();
  const aborted = await aborting;
  const last = aborted.filter((e) => e.type === "message_end").pop();
  out.abortedStop = last?.message?.stopReason;
  const compacted = await client.compact();
  out.compactSummary = compacted.summary;
  out.commands = await client.getCommands();
  // Every other method of the client, each answered (none may hang).
  const models = await client.getAvailableModels();
  out.setModel = (await client.setModel(models[0].provider, models[0].id)).id;
  out.cycleModel = (await client.cycleModel())?.model?.id ?? null;
  await client.setThinkingLevel("off");
  out.cycleThinkingLevel = await client.cycleThinkingLevel();
  await client.setSteeringMode("all");
  await client.setFollowUpMode("one-at-a-time");
  await client.setAutoCompaction(false);
  await client.setAutoRetry(false);
  await client.abortRetry();
  out.bash = (await client.bash("echo from-bash")).output.trim();
  await client.abortBash();
  out.exported = (await client.exportHtml(`${process.env.KEEL_TEST_WS}/export.html`)).path.endsWith("export.html");
  out.models = (await client.getAvailableModels()).map((m) => m.id);
  out.stats = (await client.getSessionStats()).userMessages;
  await client.setSessionName("from pi's client");
  const cloneFile = (await client.getState()).sessionFile;
  out.newSession = await client.newSession();
  out.afterNewSession = (await client.getMessages()).length;
  // Back to the clone: its messages are read again from its file.
  out.switched = await client.switchSession(cloneFile);
  out.afterSwitch = (await client.getMessages()).length;
  // A new process resumes that file (the client's own `args`).
  await client.stop();
  const again = new RpcClient({
    cliPath,
    cwd: process.env.KEEL_TEST_WS,
    provider: process.env.PI_PROVIDER,
    model: process.env.PI_MODEL,
    args: ["--session", cloneFile],
  });
  try {
    await again.start();
    out.resumedFile = (await again.getState()).sessionFile === cloneFile;
    out.resumedMessages = (await again.getMessages()).length;
  } finally {
    await again.stop();
  }
} catch (e) {
  out.error = String(e?.message ?? e);
} finally {
  await client.stop();
}
process.stdout.write(JSON.stringify(out) + "\n");
