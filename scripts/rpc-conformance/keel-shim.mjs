#!/usr/bin/env node
// pi's RpcClient always runs `node <cliPath> --mode rpc …`. This shim is that
// cliPath: it runs $KEEL_BIN with the same arguments plus --rpc-flat-events
// (pi's client understands flat events only), wiring stdio straight through.
import { spawn } from "node:child_process";

const bin = process.env.KEEL_BIN;
if (!bin) {
  console.error("keel-shim: set KEEL_BIN to the keel binary");
  process.exit(2);
}
const child = spawn(bin, [...process.argv.slice(2), "--rpc-flat-events"], { stdio: "inherit" });
for (const sig of ["SIGTERM", "SIGINT", "SIGHUP"]) process.on(sig, () => child.kill(sig));
child.on("exit", (code, signal) => process.exit(code ?? (signal ? 128 : 1)));
child.on("error", (e) => {
  console.error(`keel-shim: ${e.message}`);
  process.exit(127);
});
