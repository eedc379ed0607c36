// The Claude Agent SDK's onElicitation against keel: an MCP server's
// question while its tool runs reaches the callback, and what the
// callback answers reaches the server. The mock's answers are queued by
// the Rust test (suite/mcp/guarded.rs). Prints one JSON object.
import { query } from "@anthropic-ai/claude-agent-sdk";

const out = { errors: {}, asked: [], results: [] };
const answers = [{ action: "accept", content: { proceed: true } }, { action: "decline" }];
try {
  const q = query({
    prompt: "deploy",
    options: {
      pathToClaudeCodeExecutable: process.env.KEEL_BIN,
      cwd: process.env.KEEL_TEST_WS,
      model: "claude-sonnet-4-5",
      env: { ...process.env },
      stderr: (line) => process.stderr.write(line),
      permissionMode: "bypassPermissions",
      allowDangerouslySkipPermissions: true,
      onElicitation: async (request) => {
        out.asked.push(request);
        return answers.shift() ?? { action: "cancel" };
      },
    },
  });
  for await (const m of q) {
    if (m.type === "result") out.results.push(m.result ?? m.subtype);
  }
} catch (e) {
  out.errors.query = String(e?.stack ?? e);
}
console.log(JSON.stringify(out));
