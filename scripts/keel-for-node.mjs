#!/usr/bin/env node
// Runs keel for a Node.js host whose client library starts its agent as
// `node <cliPath> …args` (pi's RpcClient does): keel gets the arguments,
// stdin, stdout and stderr as they are, signals are passed on, and this
// process exits with keel's exit code. KEEL_BIN names the binary (default:
// `keel` on PATH).
import { spawn } from "node:child_process";

const bin = process.env.KEEL_BIN || "keel";
const child = spawn(bin, process.argv.slice(2), { stdio: "inherit" });
for (const signal of ["SIGTERM", "SIGINT", "SIGHUP"]) {
  process.on(signal, () => child.kill(signal));
}
child.on("error", (err) => {
  process.stderr.write(`keel-for-node: cannot start ${bin}: ${err.message}\n`);
  process.exit(127);
});
child.on("exit", (code, signal) => {
  process.exit(code ?? (signal ? 128 : 1));
});
