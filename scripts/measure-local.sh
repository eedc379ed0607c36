#!/usr/bin/env bash
# Measures the local models on this machine and prints a Markdown table for
# the README: model load time, prompt evaluation and generation speed, peak
# RSS of `keel exec`, and the wall time of the quickstart task (the same
# task scripts/quickstart.sh runs), for the default 1.5B model and the 0.5B
# one.
#
# Usage: ./scripts/measure-local.sh [--dir MODELS_DIR] [--runs N] [--threads N]
#
#   --dir      where the .gguf files are (default: $KEEL_HOME/models, else
#              ~/.keel/models); missing ones are fetched with `keel models pull`
#   --runs     runs per model (default 1); every run is a row
#   --threads  llama.cpp threads (default: keel's own choice, in the table)
#
# Uses the release build with the `local` feature (built first if needed:
# 10–15 minutes on 2 idle cores the first time; KEEL_MEASURE_BIN=path runs
# another binary instead, only to check this script). The numbers come from
# keel's own log (RUST_LOG=keel_llm=info): `local model loaded` (load
# time), `local model call` (tokens evaluated and generated per model call,
# with their durations; the rates are totals over the run's calls), and
# `local model threads`. Peak RSS is the process's high-water mark. Each
# run uses a fresh KEEL_HOME and a fresh scratch workspace; nothing else is
# configured, so keel picks the local model by itself. Measure on an idle
# machine: the load average before and after is printed with the table.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"

dir=""
runs=1
threads=""
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) dir="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "measure-local: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ -n "$dir" ] || dir="${KEEL_HOME:-$HOME/.keel}/models"

# The quickstart's task, from the script itself, so the two never differ.
task="$(sed -n "s/^default_task='\(.*\)'$/\1/p" "$root/scripts/quickstart.sh")"
[ -n "$task" ] || { echo "measure-local: cannot find default_task in scripts/quickstart.sh" >&2; exit 2; }

if [ -n "${KEEL_MEASURE_BIN:-}" ]; then
  # Only to check this script quickly: numbers of another build are not
  # the README's.
  keel="$KEEL_MEASURE_BIN"
  echo "==> using $keel (not the release build: do not publish these numbers)" >&2
else
  echo "==> building keel (release, --features local)" >&2
  (cd "$root" && cargo build --release --locked -p keel-cli --features local)
  keel="$root/target/release/keel"
fi

models=(
  "qwen2.5-coder-1.5b-instruct qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
  "qwen2.5-coder-0.5b-instruct qwen2.5-coder-0.5b-instruct-q4_k_m.gguf --small"
)
for m in "${models[@]}"; do
  read -r _ file small <<<"$m"
  if [ ! -f "$dir/$file" ]; then
    echo "==> $dir/$file is missing: fetching it" >&2
    "$keel" models pull ${small:-} --dir "$dir" >/dev/null
  fi
done

# The value of `key=` in a log line (keel's log file has no colours).
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p"; }

# Peak RSS (KiB) of PID, polled until it exits.
watch_rss() {
  local pid=$1 peak=0 hwm
  while kill -0 "$pid" 2>/dev/null; do
    hwm="$(awk '/^VmHWM:/{print $2}' "/proc/$pid/status" 2>/dev/null || true)"
    [ -n "$hwm" ] && [ "$hwm" -gt "$peak" ] && peak=$hwm
    sleep 0.1
  done
  echo "$peak"
}

loadavg() { cut -d' ' -f1-3 /proc/loadavg; }
load_before="$(loadavg)"
rows=()
for m in "${models[@]}"; do
  read -r id file _ <<<"$m"
  for run in $(seq 1 "$runs"); do
    home="$(mktemp -d -t keel-measure-home.XXXXXX)"
    ws="$(mktemp -d -t keel-measure-ws.XXXXXX)"
    mkdir -p "$home/models"
    ln -s "$(cd "$dir" && pwd)/$file" "$home/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
    log="$home/keel.log"
    echo "==> $id, run $run: the quickstart task in $ws (load average $(loadavg))" >&2
    started=$(date +%s.%N)
    # `env` execs keel: $pid is keel's.
    cd "$ws"
    env -u KEEL_PROVIDER -u KEEL_MODEL -u KEEL_MODEL_PATH -u KEEL_BASE_URL -u KEEL_PROFILE \
      ${threads:+KEEL_THREADS=$threads} KEEL_HOME="$home" KEEL_LOG_FILE="$log" \
      RUST_LOG=keel_llm=info \
      "$keel" exec --no-session --approval-mode money_only "$task" \
      >"$home/stdout" 2>"$home/stderr" &
    pid=$!
    cd "$root"
    peak_kib="$(watch_rss "$pid")"
    status=0
    wait "$pid" || status=$?
    ended=$(date +%s.%N)

    load_s="$(grep 'local model loaded' "$log" | field secs | awk 'NR == 1 { printf "%.1f", $1 }')"
    used_threads="$(grep 'local model threads' "$log" | field threads | head -n 1)"
    [ -n "$used_threads" ] || used_threads="${threads:-?}"
    calls="$(grep -c 'local model call' "$log" || true)"
    read -r evaluated prefill generated gen < <(
      grep 'local model call' "$log" | awk '{
        for (i = 1; i <= NF; i++) {
          split($i, kv, "=")
          if (kv[1] == "evaluated") e += kv[2]
          if (kv[1] == "prefill_secs") p += kv[2]
          if (kv[1] == "generated") g += kv[2]
          if (kv[1] == "gen_secs") s += kv[2]
        }
      } END { printf "%d %f %d %f\n", e, p, g, s }'
    )
    first_prompt="$(grep 'local model call' "$log" | field evaluated | head -n 1)"
    rate() { awk -v n="$1" -v s="$2" 'BEGIN { if (s > 0) printf "%.1f", n / s; else print "-" }'; }
    wall="$(awk -v a="$started" -v b="$ended" 'BEGIN { printf "%.0f", b - a }')"
    result="exit $status"
    if [ -f "$ws/fib.py" ] && (cd "$ws" && python3 fib.py >/dev/null 2>&1); then
      result="$result, fib.py runs"
    else
      result="$result, no working fib.py"
    fi
    rows+=("| ${id} | ${used_threads} | ${load_s:-?} s | $(rate "$evaluated" "$prefill") tok/s (${evaluated} tokens; first prompt ${first_prompt:-?}) | $(rate "$generated" "$gen") tok/s (${generated} tokens) | $(awk -v k="$peak_kib" 'BEGIN { printf "%.2f", k / 1048576 }') GiB | ${wall} s, ${calls} model calls (${result}) |")
    echo "    done in ${wall} s (${result}); log: $log" >&2
    rm -rf "$ws"
  done
done
load_after="$(loadavg)"

cores="$(nproc)"
mem="$(awk '/^MemTotal:/{printf "%.0f", $2 / 1048576}' /proc/meminfo)"
echo
echo "Measured $(date -u +%Y-%m-%d) with \`scripts/measure-local.sh\` on $cores cores, $mem GiB RAM (load average before: $load_before; after: $load_after)."
echo
echo "| model (Q4_K_M) | threads | model load | prompt evaluation | generation (tool grammar on) | peak RSS of \`keel exec\` | quickstart task |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
printf '%s\n' "${rows[@]}"
