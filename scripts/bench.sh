#!/usr/bin/env bash
# scripts/bench.sh — keel side by side with Codex and pi, one command.
#
#   ./scripts/bench.sh                 # build keel (release), install missing peers, run, write the table
#   ./scripts/bench.sh --quick         # 3 runs and smaller scales (a few minutes)
#   ./scripts/bench.sh --readme        # also put the table into README.md's Performance section
#   ./scripts/bench.sh -- --only measure,stream   # anything after -- goes to benches/peers.py
#
# Environment:
#   KEEL_PEERS_LIB   folder with measure.py, peerlib.py, mock_llm.py, install.sh
#                    (default: ../shared/peers next to the repository)
#   PEERS_DIR        where the peers are (or get) installed (default: ~/.cache/keel-bench/peers);
#                    never inside the repository
#   KEEL_BIN         a keel binary to measure instead of building one
#   BENCH_INSTALL=0  do not try to install missing peers (they are skipped with a message)
#   RUN_OFFLINE      1 (the default): run in a network namespace of its own, with loopback
#                    only; 0 when --database is given (its server is on this loopback)
#
# Writes target/bench/results.md (the table) and target/bench/results.json (every number).
# The micro-benchmarks are separate: cargo bench -p keel-llm -p keel-jsonl -p keel-rpc
# -p keel-approvals -p keel-session-store.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

runs=7
extra=()
readme=0
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) runs=3; extra+=(--deltas 5000 --threads 200 --turns 30 --entries 100000) ;;
        --readme) readme=1 ;;
        --runs) runs="$2"; shift ;;
        --) shift; extra+=("$@"); break ;;
        -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
        *) echo "bench.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done

lib="${KEEL_PEERS_LIB:-$root/../shared/peers}"
if [ ! -f "$lib/measure.py" ]; then
    echo "bench.sh: no measure.py in $lib; set KEEL_PEERS_LIB to the shared/peers folder" >&2
    exit 2
fi
lib="$(cd "$lib" && pwd)"
export PEERS_DIR="${PEERS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/keel-bench/peers}"
case "$PEERS_DIR" in
    "$root"|"$root"/*) echo "bench.sh: PEERS_DIR must be outside the repository" >&2; exit 2 ;;
esac

if [ -n "${KEEL_BIN:-}" ]; then
    keel="$KEEL_BIN"
else
    echo "[bench] building keel (release, without the local-model feature)" >&2
    cargo build --release -p keel-cli >&2
    keel="$root/target/release/keel"
fi

# Install the peers that are missing; skip the ones that cannot be installed.
if [ "${BENCH_INSTALL:-1}" != 0 ]; then
    for peer in codex pi; do
        if ! PEERS_DIR="$PEERS_DIR" python3 - "$lib" "$peer" <<'EOF'
import sys
sys.path.insert(0, sys.argv[1])
import peerlib
sys.exit(0 if peerlib.resolve_peer({"codex": "codex", "pi": "pi_cli"}[sys.argv[2]]) else 1)
EOF
        then
            echo "[bench] installing $peer into $PEERS_DIR" >&2
            bash "$lib/install.sh" "$peer" >&2 || echo "[bench] could not install $peer: it is skipped" >&2
        fi
    done
fi

args=(--keel "$keel" --peers-lib "$lib" --runs "$runs" --out "$root/target/bench" "${extra[@]}")
if [ "$readme" = 1 ]; then
    args+=(--update-readme "$root/README.md")
fi
# Only loopback is needed; run without a network when namespaces are allowed.
# A --database server listens on this machine's loopback, which a new
# network namespace does not have: with one, the run stays in this one.
offline="${RUN_OFFLINE:-1}"
for a in "${extra[@]}"; do
    case "$a" in
        --database|--database=*)
            if [ -z "${RUN_OFFLINE:-}" ]; then
                offline=0
                echo "[bench] --database: running in this network namespace (the server is on its loopback)" >&2
            fi ;;
    esac
done
RUN_OFFLINE="$offline" bash "$lib/run_offline.sh" python3 "$root/benches/peers.py" "${args[@]}"
