#!/usr/bin/env python3
"""peers.py - keel side by side with Codex and pi (and oh-my-pi when installed), one mock model.

usage: peers.py --keel PATH --peers-lib DIR [--runs 7] [--out DIR] [--only a,b] [--update-readme FILE]
                [--compare LABEL=PATH ...]

  --keel PATH        the keel binary under test (a release build)
  --peers-lib DIR    the folder holding measure.py, peerlib.py and mock_llm.py (shared/peers);
                     peers are found through PEERS_DIR / CODEX_BIN / PI_CLI / OMP_CLI as there
  --out DIR          where results.md and results.json go (default target/bench)
  --only LIST        scenarios to run: measure,tool,stream,turns,threads,sessions,approvals,big
  --update-readme F  replace the text between <!-- bench:start --> and <!-- bench:end --> in F
  --database URL     a postgres:// URL: the cross-process approval is measured there too
  --compare L=PATH   another keel build (an older commit, the `local` or `temporal` build) in the
                     same interleaved measure.py run as LABEL-rpc and LABEL-app; a second table
                     puts its startup, first delta and peak RSS beside this build's

Contestants: keel --mode rpc (canonical frames; flat frames too for the streaming scenario) and
keel app-server, beside pi and oh-my-pi (RPC mode) and Codex (app-server), each one only when it
is installed (a missing peer is skipped with a message). measure.py (spawn -> first response,
prompt -> first text delta, peak RSS of one text turn) runs first, interleaved A B A B; then the
scenarios in scenarios.py, one contestant after another. Everything runs against mock_llm.py with
no delay, so the numbers are the runtime's own overhead (plus the mock's, the same for all).
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
ALL = ["measure", "tool", "stream", "turns", "threads", "sessions", "approvals", "big"]
MODEL_ARGS = "--base-url {base_url} --model mock-model"


def log(msg):
    print("[bench] %s" % msg, file=sys.stderr, flush=True)


def machine():
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "?")
        with open("/proc/meminfo") as f:
            mem_kb = int(next(ln.split()[1] for ln in f if ln.startswith("MemTotal")))
    except (OSError, StopIteration, ValueError):
        mem_kb = 0
    return {"cpu": cpu, "cores": os.cpu_count(), "mem_gib": round(mem_kb / 1048576.0),
            "kernel": platform.release(), "load": os.getloadavg()}


def fsync_ms(n=20):
    """Median time of fsync after a small append, in a temporary file: the floor of every synced
    commit (session flushes, approval claims)."""
    import statistics
    fd, path = tempfile.mkstemp(prefix="keel-bench-fsync-")
    try:
        times = []
        for _ in range(n):
            os.write(fd, b"x" * 100 + b"\n")
            t = time.perf_counter()
            os.fsync(fd)
            times.append((time.perf_counter() - t) * 1000.0)
        return statistics.median(times)
    finally:
        os.close(fd)
        os.remove(path)


def mock_floor_ms(mock, n=20):
    """Median time from a new connection and a streaming Chat Completions request to the first
    byte of its SSE body, straight from Python: the mock's own share of "prompt -> first text
    delta" (every contestant pays it)."""
    import socket
    import statistics
    body = json.dumps({"model": "mock-model", "stream": True,
                       "messages": [{"role": "user", "content": "Say hello please"}]}).encode()
    head = ("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            "Content-Length: %d\r\n\r\n" % len(body)).encode()
    times = []
    for _ in range(n):
        t = time.perf_counter()
        with socket.create_connection(("127.0.0.1", mock.port), timeout=10) as s:
            s.sendall(head + body)
            got = b""
            while b"data:" not in got:
                chunk = s.recv(65536)
                if not chunk:
                    break
                got += chunk
        times.append((time.perf_counter() - t) * 1000.0)
    return statistics.median(times)


def keel_specs(label, keel):
    return [(label + "-rpc", "rpc:%s --mode rpc %s" % (keel, MODEL_ARGS)),
            (label + "-app", "appserver:%s app-server %s" % (keel, MODEL_ARGS))]


def contestants(keel, peerlib):
    out = keel_specs("keel", keel)
    found = {"pi": peerlib.resolve_peer("pi_cli"), "codex": peerlib.resolve_peer("codex"),
             "omp": peerlib.resolve_peer("omp_cli") and peerlib.resolve_peer("bun")}
    for name in ("codex", "pi", "omp"):
        if found[name]:
            out.append((name, None))
        else:
            log("%s is not installed: skipped (install it with shared/peers/install.sh %s, PEERS_DIR=%s)"
                % (name, name, peerlib.peers_dir()))
    return out


def compared(args):
    """(label, path) of each --compare build."""
    out = []
    for item in args.compare:
        label, sep, path = item.partition("=")
        if not sep or not label or not os.path.exists(path):
            raise SystemExit("--compare takes LABEL=PATH of a keel binary, not %r" % item)
        out.append((label, os.path.abspath(path)))
    return out


def compare_table(med, labels):
    """This build's measure.py figures beside each --compare build's."""
    rows = [("spawn → first response", "first_response_ms", " ms", 1.0),
            ("prompt → first text delta", "first_text_ms", " ms", 1.0),
            ("prompt → turn end", "turn_end_ms", " ms", 1.0),
            ("peak RSS (VmHWM), one text turn", "vmhwm_kb", " MiB", 1.0)]
    builds = ["keel"] + labels
    head = "| build | %s |" % " | ".join("%s, %s" % (label, proto) for label, _, _, _ in rows
                                          for proto in ("RPC", "app-server"))
    out = [head, "|" + " --- |" * (1 + 2 * len(rows))]
    for b in builds:
        cells = []
        for _, key, unit, scale in rows:
            for proto in ("rpc", "app"):
                v = med.get("%s-%s" % (b, proto), {}).get(key)
                cells.append("—" if v is None else num(v * scale, unit))
        out.append("| %s | %s |" % ("this tree" if b == "keel" else b, " | ".join(cells)))
    return "\n".join(out) + "\n"


def run_measure(peers_lib, specs, runs, path):
    argv = [sys.executable, os.path.join(peers_lib, "measure.py"), "--runs", str(runs), "--json", path]
    argv += [name if spec is None else "%s=%s" % (name, spec) for name, spec in specs]
    log("measure.py: %d runs each, interleaved" % runs)
    r = subprocess.run(argv, stdout=sys.stderr)
    if not os.path.exists(path):
        return {"error": "measure.py failed (exit %d)" % r.returncode}
    with open(path) as f:
        return json.load(f)["medians"]


def guarded(name, fn, *a):
    t = time.monotonic()
    try:
        r = fn(*a)
    except Exception as e:  # a scenario failing must not stop the others
        r = {"error": "%s: %s" % (type(e).__name__, e)}
    log("%-26s %6.1fs  %s" % (name, time.monotonic() - t, json.dumps(r)[:240]))
    return r


def scenarios_for(args, keel, specs, measure, peerlib, scenarios, res):
    root = tempfile.mkdtemp(prefix="keel-bench-")
    mock = peerlib.MockLLM(log_path=None, delay_ms=0)
    made = {}
    try:
        res.setdefault("_mock", {})["first_byte_ms"] = mock_floor_ms(mock)
        def contestant(name, spec):
            if name not in made:
                c = measure.Contestant(name if spec is None else "%s=%s" % (name, spec))
                measure.setup_home(c, root, mock)
                made[name] = c
            return made[name]

        all_specs = specs + [("keel-rpc-flat", "rpc:%s --mode rpc --rpc-flat-events %s" % (keel, MODEL_ARGS))]
        by = {n: contestant(n, s) for n, s in all_specs}
        want = set(args.only)
        for name, c in by.items():
            r = res.setdefault(name, {})
            keel_c = name.startswith("keel")
            if "tool" in want and name != "keel-rpc-flat":
                r["tool"] = guarded(name + " tool turn", scenarios.tool_turn, c, args.runs)
            if "stream" in want:
                n = args.deltas if keel_c else min(args.deltas, args.peer_deltas)
                r["stream"] = guarded(name + " stream", scenarios.stream, c, n)
                if keel_c and n != args.peer_deltas:
                    r["stream_small"] = guarded(name + " stream (small)", scenarios.stream, c, args.peer_deltas)
            if "turns" in want and name != "keel-rpc-flat":
                r["turns"] = guarded(name + " 100 turns", scenarios.turns_rss, c, args.turns)
            if "threads" in want and c.proto == "appserver":
                r["threads"] = guarded(name + " threads", scenarios.threads, c, args.threads)
            if "sessions" in want and c.proto == "rpc" and name != "keel-rpc-flat":
                r["sessions"] = guarded(name + " sessions", scenarios.sessions, c, args.threads)
            if "approvals" in want and name == "keel-rpc":
                ac = contestant("keel-approve", "rpc:%s --mode rpc --approval-mode everything %s"
                                % (keel, MODEL_ARGS))
                r["approval_rpc"] = guarded("keel approval in-process", scenarios.approval_rpc, ac, args.runs)
                r["approval_xproc"] = guarded("keel approval cross-process", scenarios.approval_xproc,
                                              keel, c, max(3, args.runs // 2))
                if args.database:
                    r["approval_xproc_pg"] = guarded("keel approval cross-process (PostgreSQL)",
                                                     scenarios.approval_xproc, keel, c,
                                                     max(3, args.runs // 2), args.database)
            if "big" in want and c.proto == "rpc" and name in ("keel-rpc", "pi", "omp"):
                r["big"] = guarded(name + " 100k session", scenarios.big_session, c, args.entries,
                                   max(3, args.runs // 2), keel if keel_c else None)
    finally:
        mock.stop()
        shutil.rmtree(root, ignore_errors=True)


# --------------------------------------------------------------------------- the table
def num(v, unit="", digits=None):
    if v is None:
        return "—"
    if digits is None:
        digits = 0 if abs(v) >= 100 else (1 if abs(v) >= 1 else 2)
    return ("%%.%df" % digits) % v + unit


def get(res, name, *path):
    v = res.get(name, {})
    for k in path:
        if not isinstance(v, dict):
            return None
        v = v.get(k)
    return v if isinstance(v, (int, float)) else None


def ratio(v, base):
    if v is None or not base:
        return ""
    return " (%.0f×)" % (v / base) if v / base >= 10 else " (%.1f×)" % (v / base)


def table(res, names, when, mach, args):
    cols = [n for n in ["keel-rpc", "keel-app", "pi", "omp", "codex"] if n in names]
    title = {"keel-rpc": "keel RPC", "keel-app": "keel app-server", "pi": "pi 0.73", "omp": "oh-my-pi",
             "codex": "Codex 0.169"}
    rows = []

    def row(label, target, vals, ok, fmt, judge=None):
        base = next((vals.get(k) for k in ("keel-rpc", "keel-app") if vals.get(k) is not None), None)
        cells = []
        for n in cols:
            v = vals.get(n)
            cells.append("—" if v is None else fmt(v) + ("" if n.startswith("keel") else ratio(v, base)))
        judged = judge if judge is not None else vals
        keel_vals = [judged[k] for k in ("keel-rpc", "keel-app") if judged.get(k) is not None]
        met = "—" if not keel_vals else ("yes" if all(ok(v) for v in keel_vals) else "**no**")
        rows.append("| %s | %s | %s | %s |" % (label, " | ".join(cells), target, met))

    ms = lambda v: num(v, " ms")  # noqa: E731
    mib = lambda v: num(v / 1024.0, " MiB")  # noqa: E731
    kib = lambda v: num(v, " KiB")  # noqa: E731
    m = {n: res.get(n, {}).get("measure", {}) for n in cols}
    row("cold start: spawn → first response", "≤ 3 ms",
        {n: m[n].get("first_response_ms") for n in cols}, lambda v: v <= 3, ms)
    # Judged without the mock's own time from a request to its first byte.
    floor = get(res, "_mock", "first_byte_ms") or 0.0
    row("prompt → first text delta", "≤ 0.5 ms + the mock's %s ms" % num(floor),
        {n: m[n].get("first_text_ms") for n in cols}, lambda v: v - floor <= 0.5, ms)
    # measure.py reports its medians of VmHWM already in MiB.
    row("peak RSS (VmHWM), one text turn", "≤ 10 MiB",
        {n: m[n].get("vmhwm_kb") for n in cols}, lambda v: v <= 10, lambda v: num(v, " MiB"))
    sv = {n: get(res, n, "stream_small" if n.startswith("keel") and "stream_small" in res.get(n, {})
                 else "stream", "bytes_per_delta") for n in cols}
    env = {n: get(res, n, "stream_small" if n.startswith("keel") and "stream_small" in res.get(n, {})
                  else "stream", "envelope_bytes") for n in cols}
    row("bytes per text delta frame (%d-delta answer)" % args.peer_deltas,
        "O(delta), envelope ≤ 300 B",
        sv, lambda v: v <= 300, lambda v: "%s B" % num(v, digits=0), judge=env)
    rows.append("| … envelope (frame − delta text) | %s | | |" % " | ".join(
        "—" if env.get(n) is None else "%s B" % num(env[n], digits=0) for n in cols))
    flat = get(res, "keel-rpc-flat", "stream_small", "bytes_per_delta") or get(res, "keel-rpc-flat", "stream", "bytes_per_delta")
    flat_env = get(res, "keel-rpc-flat", "stream_small", "envelope_bytes") or get(res, "keel-rpc-flat", "stream", "envelope_bytes")
    rows.append("| … keel RPC with `--rpc-flat-events` | %s | | |" % " | ".join(
        ("%s B (envelope %s B)" % (num(flat, digits=0), num(flat_env, digits=0)) if n == "keel-rpc" else "")
        for n in cols))
    row("RSS per idle loaded thread (app-server)", "≤ 64 KiB",
        {n: get(res, n, "threads", "rss_per_thread_kb") for n in cols}, lambda v: v <= 64, kib)
    row("approval decision → tool start, in-process", "≤ 5 ms",
        {"keel-rpc": get(res, "keel-rpc", "approval_rpc", "decision_to_tool_ms")}, lambda v: v <= 5, ms)
    row("approval decision → tool start, across processes", "≤ 50 ms",
        {"keel-rpc": get(res, "keel-rpc", "approval_xproc", "decision_to_tool_ms")}, lambda v: v <= 50, ms)
    if get(res, "keel-rpc", "approval_xproc_pg", "decision_to_tool_ms") is not None:
        row("approval decision → tool start, across processes, PostgreSQL", "≤ 10 ms",
            {"keel-rpc": get(res, "keel-rpc", "approval_xproc_pg", "decision_to_tool_ms")},
            lambda v: v <= 10, ms)
    row("open a %d-entry session (`switch_session`)" % args.entries, "≤ 300 ms",
        {n: get(res, n, "big", "switch_session_ms") for n in cols}, lambda v: v <= 300, ms)

    head = "| target | %s | keel target | met |" % " | ".join(title[n] for n in cols)
    out = ["Measured %s on %s (%d cores, %d GiB, Linux %s); load average %.1f at the start, %.1f at the "
           "end; fsync of a small file took %s ms (median) on the disk used%s. Medians of %d runs; ratios "
           "are to keel (RPC, else app-server)." % (
               when, mach["cpu"], mach["cores"], mach["mem_gib"], mach["kernel"], mach["load"][0],
               mach["load_end"][0], num(mach.get("fsync_ms")),
               "" if get(res, "_mock", "first_byte_ms") is None else
               "; the mock model's own time from a request to its first SSE byte was %s ms"
               % num(get(res, "_mock", "first_byte_ms")),
               args.runs),
           "", head, "|" + " --- |" * (len(cols) + 3)] + rows

    extra = []

    def xrow(label, key, path, fmt):
        vals = [get(res, n, *path) for n in cols]
        if any(v is not None for v in vals):
            extra.append("| %s | %s |" % (label, " | ".join("—" if v is None else fmt(v) for v in vals)))

    xrow("tool turn: prompt → tool → result → final text", "", ("tool", "tool_turn_ms"), ms)
    xrow("prompt → turn end (text)", "", ("measure", "turn_end_ms"), ms)
    xrow("stdin close → exit", "", ("measure", "exit_ms"), ms)
    big = "keel %d deltas, peers %d" % (args.deltas, min(args.deltas, args.peer_deltas))
    xrow("streaming (%s): frames/s" % big, "", ("stream", "frames_per_s"), lambda v: num(v, digits=0))
    xrow("streaming (%s): bytes per delta frame" % big, "", ("stream", "bytes_per_delta"),
         lambda v: "%s B" % num(v, digits=0))
    xrow("streaming (%s): peak RSS" % big, "", ("stream", "vmhwm_kb"), mib)
    xrow("peak RSS after %d text turns" % args.turns, "", ("turns", "vmhwm_kb"), mib)
    xrow("RSS after %d text turns" % args.turns, "", ("turns", "vmrss_kb"), mib)
    xrow("threads loaded (app-server)", "", ("threads", "threads"), lambda v: "%d" % v)
    xrow("thread/start (app-server)", "", ("threads", "thread_start_ms"), ms)
    xrow("sessions created in sequence (RPC)", "", ("sessions", "sessions"), lambda v: "%d" % v)
    xrow("new_session (RPC)", "", ("sessions", "new_session_ms"), ms)
    xrow("RSS growth per session created (RPC)", "", ("sessions", "rss_per_session_kb"), kib)
    xrow("%d-entry session: resume at spawn → get_state" % args.entries, "", ("big", "resume_at_spawn_ms"), ms)
    xrow("%d-entry session: `keel sessions list`" % args.entries, "", ("big", "sessions_list_ms"), ms)
    xrow("approval across processes: slowest run", "", ("approval_xproc", "max_ms"), ms)
    if extra:
        out += ["", "| more scenarios | %s |" % " | ".join(title[n] for n in cols),
                "|" + " --- |" * (len(cols) + 1)] + extra
    errors = ["%s/%s: %s" % (n, k, v["error"]) for n in names for k, v in res.get(n, {}).items()
              if isinstance(v, dict) and v.get("error")]
    if errors:
        out += ["", "Failed: " + "; ".join(errors)]
    return "\n".join(out) + "\n"


def update_readme(path, text):
    with open(path, encoding="utf-8") as f:
        s = f.read()
    a, b = "<!-- bench:start -->", "<!-- bench:end -->"
    if a not in s or b not in s:
        log("%s has no %s … %s markers: not updated" % (path, a, b))
        return
    head, rest = s.split(a, 1)
    _, tail = rest.split(b, 1)
    with open(path, "w", encoding="utf-8") as f:
        f.write(head + a + "\n" + text + b + tail)
    log("updated %s" % path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keel", required=True)
    ap.add_argument("--peers-lib", required=True)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--out", default="target/bench")
    ap.add_argument("--only", default=",".join(ALL))
    ap.add_argument("--deltas", type=int, default=20000)
    ap.add_argument("--peer-deltas", type=int, default=2000,
                    help="deltas for peers that resend the whole message with every delta")
    ap.add_argument("--turns", type=int, default=100)
    ap.add_argument("--threads", type=int, default=1000)
    ap.add_argument("--entries", type=int, default=100000)
    ap.add_argument("--update-readme", default="")
    ap.add_argument("--database", default="",
                    help="a postgres:// URL: also measure the cross-process approval on PostgreSQL")
    ap.add_argument("--render", default="", help="only rewrite the table from a results.json")
    ap.add_argument("--compare", action="append", default=[], metavar="LABEL=PATH",
                    help="another keel build measured in the same measure.py run")
    args = ap.parse_args()
    args.only = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = set(args.only) - set(ALL)
    if unknown:
        raise SystemExit("unknown scenarios: %s (known: %s)" % (", ".join(sorted(unknown)), ", ".join(ALL)))
    keel = os.path.abspath(args.keel)
    sys.path.insert(0, os.path.abspath(args.peers_lib))
    sys.path.insert(0, HERE)
    import measure  # noqa: E402
    import peerlib  # noqa: E402
    import scenarios  # noqa: E402

    os.makedirs(args.out, exist_ok=True)
    if args.render:
        with open(args.render) as f:
            saved = json.load(f)
        res = saved["results"]
        names = [n for n in ("keel-rpc", "keel-app", "codex", "pi", "omp") if n in res]
        text = table(res, names, saved["when"], saved["machine"], args)
        if res.get("_compare"):
            labels = sorted({n.rsplit("-", 1)[0] for n in res["_compare"]} - {"keel"})
            text += ("\nThe same measure.py run, other builds beside this one (interleaved with it "
                     "and the peers):\n\n" + compare_table(res["_compare"], labels))
        with open(os.path.join(args.out, "results.md"), "w") as f:
            f.write(text)
        print(text)
        if args.update_readme:
            update_readme(args.update_readme, text)
        return 0
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    mach = machine()
    specs = contestants(keel, peerlib)
    names = [n for n, _ in specs]
    res = {n: {} for n in names}
    others = compared(args)
    compare_text = ""
    if "measure" in args.only:
        extra = [spec for label, path in others for spec in keel_specs(label, path)]
        # The other builds go between this build and the peers, interleaved with both.
        med = run_measure(args.peers_lib, specs[:2] + extra + specs[2:], args.runs,
                          os.path.join(args.out, "measure.json"))
        for n in names:
            res[n]["measure"] = med.get(n, {}) if "error" not in med else med
        if others and "error" not in med:
            res["_compare"] = {n: med.get(n, {}) for n, _ in specs[:2] + extra}
            compare_text = compare_table(med, [label for label, _ in others])
    scenarios_for(args, keel, specs, measure, peerlib, scenarios, res)
    mach["load_end"] = os.getloadavg()
    mach["fsync_ms"] = fsync_ms()
    text = table(res, names, when, mach, args)
    if compare_text:
        text += ("\nThe same measure.py run, other builds beside this one (interleaved with it and "
                 "the peers):\n\n" + compare_text)
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump({"when": when, "machine": mach, "results": res}, f, indent=1)
    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write(text)
    print(text)
    log("wrote %s" % os.path.join(args.out, "results.md"))
    if args.update_readme:
        update_readme(args.update_readme, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
