#!/usr/bin/env bash
# Builds keel and runs one agent task in a fresh scratch workspace, on the
# model you have configured (see "Configuration" in README.md). With no model
# configured, keel says in one line what to set.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cargo build --release --locked -p keel-cli --manifest-path "$root/Cargo.toml"
ws="$(mktemp -d -t keel-quickstart.XXXXXX)"
echo "scratch workspace: $ws" >&2
cd "$ws"
task="${*:-Create fib.py that prints the first 10 Fibonacci numbers, run it with python3, and tell me what it printed.}"
exec "$root/target/release/keel" exec "$task"
