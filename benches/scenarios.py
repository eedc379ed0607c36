"""scenarios.py - the side-by-side scenarios that measure.py does not cover.

Every scenario drives one contestant (a `measure.Contestant` whose home, environment and argv
were prepared by `measure.setup_home`) against the shared mock model (delay 0) and returns a
dict of numbers (milliseconds, KiB, bytes) or {"error": "..."}. Contestants speak either
"rpc" (keel --mode rpc, pi, omp) or "appserver" (keel app-server, codex app-server).

Scenarios
  tool_turn      prompt -> tool call -> tool result -> final text, end to end (warm process)
  stream         an answer of N text deltas: frames/s, bytes per delta frame and its envelope
  turns_rss      VmHWM / VmRSS after 100 text turns in one process
  threads        app-server: N thread/start in one process; RSS per idle thread, ms per start
  sessions       rpc: N new_session in sequence; ms per session, RSS growth per session
  approval_rpc   keel rpc: approval_response written -> tool_execution_start (in-process)
  approval_xproc keel exec waits; `keel approvals approve` from another process -> tool starts
                 (SQLite in the home, or PostgreSQL with peers.py --database)
  big_session    a 100,000-entry session file: switch_session, resume at spawn, sessions list
"""
import json
import os
import random
import statistics
import subprocess
import threading
import time

import peerlib  # noqa: E402  (the caller puts shared/peers on sys.path)

PROMPT = "Say hello please"


# --------------------------------------------------------------------------- clients
class Counting:
    """Mixin for peerlib clients: also keeps the raw byte length of every stdout line, in the
    order of .frames (sizes[i] belongs to frames[i])."""

    def _read_stdout(self):
        self.sizes = []
        buf = b""
        while True:
            try:
                chunk = os.read(self.proc.stdout.fileno(), 1 << 16)
            except (OSError, ValueError):
                chunk = b""
            if not chunk:
                break
            buf += chunk
            lines = buf.split(b"\n")
            buf = lines.pop()
            for raw in lines:
                if not raw.strip():
                    continue
                try:
                    obj = json.loads(raw)
                except ValueError:
                    obj = None
                if not isinstance(obj, dict):
                    obj = {"_raw": raw.decode("utf-8", "replace")}
                with self.cv:
                    rec = {"t_ms": self.now_ms()}
                    if self.first_frame_ms is None:
                        self.first_frame_ms = rec["t_ms"]
                    self.frames.append((rec, obj))
                    self.sizes.append(len(raw) + 1)
                    self.cv.notify_all()
        with self.cv:
            self.frames.append(({"t_ms": self.now_ms()}, None))
            self.sizes.append(0)
            self.cv.notify_all()


    def wait_at(self, pred, timeout, start):
        """Like wait_for, also returning the index after the frame found: (rec, frame, next)."""
        deadline = time.monotonic() + timeout
        i = start
        with self.cv:
            while True:
                while i < len(self.frames):
                    rec, f = self.frames[i]
                    i += 1
                    if f is None:
                        return None, None, i
                    try:
                        ok = pred(f)
                    except Exception:
                        ok = False
                    if ok:
                        return rec, f, i
                rem = deadline - time.monotonic()
                if rem <= 0:
                    return None, None, i
                self.cv.wait(rem)


class RpcC(Counting, peerlib.RpcClient):
    pass


class AppC(Counting, peerlib.AppServerClient):
    pass


def spawn(c):
    cls = AppC if c.proto == "appserver" else RpcC
    p = cls(c.argv, env=c.envmap, cwd=c.cwd)
    if c.proto == "appserver":
        r = p.initialize(name="keel-bench", title="keel bench", version="0")
        if not r or "result" not in r:
            p.close(timeout=5)
            raise RuntimeError("initialize failed: %s" % json.dumps(r)[:200])
    else:
        r = p.request({"type": "get_state"}, timeout=60)
        if not r or not r.get("success"):
            p.close(timeout=5)
            raise RuntimeError("get_state failed: %s" % json.dumps(r)[:200])
    return p


def start_thread(p, c, policy="never"):
    r = p.request("thread/start", {"cwd": c.cwd, "approvalPolicy": policy,
                                   "sandbox": "danger-full-access"}, timeout=60)
    if not r or "result" not in r:
        raise RuntimeError("thread/start failed: %s" % json.dumps(r)[:200])
    return r["result"]["thread"]["id"]


def is_text(c, f):
    if c.proto == "appserver":
        return f.get("method") == "item/agentMessage/delta"
    return peerlib.rpc_is_text_delta(f)


def is_end(c, f):
    if c.proto == "appserver":
        return f.get("method") == "turn/completed"
    return peerlib.rpc_is_final_agent_end(f)


def turn(p, c, tid, prompt, timeout=120):
    """Runs one turn; approves any approval request on the way. Returns (t0_ms, start_index,
    end_record) with end_record None on failure."""
    t0 = p.now_ms()
    if c.proto == "appserver":
        _, start = p.request_async("turn/start", {"threadId": tid, "input": [
            {"type": "text", "text": prompt, "text_elements": []}]})
    else:
        _, start = p.send_command({"type": "prompt", "message": prompt})
    i = start
    deadline = time.monotonic() + timeout
    while True:
        rec, f, i = p.wait_at(lambda f: is_end(c, f) or peerlib.is_server_request(f)
                              or f.get("type") == "approval_request", max(0.1, deadline - time.monotonic()), i)
        if rec is None:
            return t0, start, None
        if is_end(c, f):
            return t0, start, rec
        if f.get("type") == "approval_request":
            p.send_command({"type": "approval_response", "requestId": f["requestId"], "decision": "approve"})
        elif "Approval" in f.get("method", ""):
            p.respond(f["id"], {"decision": "accept"})


def rss(p):
    return peerlib.proc_status(p.pid)


def settle_rss(p, wait=0.3):
    time.sleep(wait)
    return rss(p).get("VmRSS")


def med(xs):
    xs = [x for x in xs if isinstance(x, (int, float))]
    return statistics.median(xs) if xs else None


# --------------------------------------------------------------------------- scenarios
def tool_turn(c, runs):
    """Median prompt -> turn end of a turn with one shell tool call, in a warm process."""
    p = spawn(c)
    try:
        tid = start_thread(p, c) if c.proto == "appserver" else None
        turn(p, c, tid, "RUN: echo warm")
        times = []
        for _ in range(runs):
            t0, _, rec = turn(p, c, tid, "RUN: echo hello from the tool")
            if rec is None:
                return {"error": "tool turn did not finish"}
            times.append(rec["t_ms"] - t0)
        return {"tool_turn_ms": med(times)}
    finally:
        p.close(timeout=15)


def stream(c, deltas):
    """One answer of `deltas` text deltas: frames per second between the first and last delta,
    bytes per delta frame, and the envelope (frame bytes minus the delta text itself)."""
    p = spawn(c)
    try:
        tid = start_thread(p, c) if c.proto == "appserver" else None
        turn(p, c, tid, PROMPT)
        t0, start, rec = turn(p, c, tid, "LONG:%d %s" % (deltas, PROMPT), timeout=600)
        if rec is None:
            return {"error": "streaming turn did not finish"}
        with p.cv:
            window = list(zip(p.frames[start:], p.sizes[start:]))
        n, total, text, first, last = 0, 0, 0, None, None
        for (r, f), size in window:
            if f is not None and is_text(c, f):
                ev = f.get("params") if c.proto == "appserver" else peerlib.rpc_event(f)
                d = (ev or {}).get("delta")
                if d is None:
                    d = ((ev or {}).get("assistantMessageEvent") or {}).get("delta", "")
                n += 1
                total += size
                text += len(json.dumps(d, ensure_ascii=False).encode()) - 2
                first = r["t_ms"] if first is None else first
                last = r["t_ms"]
        if n == 0:
            return {"error": "no text deltas"}
        secs = max((last - first) / 1000.0, 1e-6)
        return {"deltas": n, "frames_per_s": n / secs, "bytes_per_delta": total / n,
                "envelope_bytes": (total - text) / n, "stream_ms": rec["t_ms"] - t0,
                "vmhwm_kb": rss(p).get("VmHWM")}
    finally:
        p.close(timeout=30)


def turns_rss(c, turns):
    """VmHWM and VmRSS after `turns` text turns in one process."""
    p = spawn(c)
    try:
        tid = start_thread(p, c) if c.proto == "appserver" else None
        times = []
        for _ in range(turns):
            t0, _, rec = turn(p, c, tid, PROMPT)
            if rec is None:
                return {"error": "a turn did not finish"}
            times.append(rec["t_ms"] - t0)
        st = rss(p)
        return {"turns": turns, "vmhwm_kb": st.get("VmHWM"), "vmrss_kb": st.get("VmRSS"),
                "turn_ms": med(times)}
    finally:
        p.close(timeout=30)


def threads(c, n, budget_s=120.0):
    """app-server: `n` thread/start in one process. RSS per idle loaded thread is
    (RSS after n - RSS after 10) / (n - 10); the first 10 pay one-time costs."""
    p = spawn(c)
    try:
        rss0 = settle_rss(p)
        times, rss10, t_start = [], None, time.monotonic()
        for i in range(n):
            t = time.monotonic()
            start_thread(p, c)
            times.append((time.monotonic() - t) * 1000.0)
            if i + 1 == 10:
                rss10 = settle_rss(p)
            if time.monotonic() - t_start > budget_s and i + 1 > 10:
                break
        done = len(times)
        rssn = settle_rss(p, 1.0)
        out = {"threads": done, "thread_start_ms": med(times), "rss0_kb": rss0, "rssn_kb": rssn}
        if rss10 is not None and done > 10:
            out["rss_per_thread_kb"] = (rssn - rss10) / (done - 10)
        return out
    finally:
        p.close(timeout=60)


def sessions(c, n, budget_s=120.0):
    """rpc: `n` new_session commands in sequence."""
    p = spawn(c)
    try:
        rss0 = settle_rss(p)
        times, t_start = [], time.monotonic()
        for i in range(n):
            t = time.monotonic()
            r = p.request({"type": "new_session"}, timeout=60)
            if not r or not r.get("success"):
                return {"error": "new_session failed: %s" % json.dumps(r)[:200]}
            times.append((time.monotonic() - t) * 1000.0)
            if time.monotonic() - t_start > budget_s:
                break
        rssn = settle_rss(p, 1.0)
        return {"sessions": len(times), "new_session_ms": med(times),
                "rss_per_session_kb": (rssn - rss0) / len(times)}
    finally:
        p.close(timeout=60)


def approval_rpc(c, runs):
    """keel rpc with --approval-mode everything: `touch` is held; the time from writing
    approval_response to reading the call's tool_execution_start."""
    p = spawn(c)
    try:
        out = []
        for i in range(runs + 1):
            _, start = p.send_command({"type": "prompt", "message": "RUN: touch approved-%d.txt" % i})
            rec, f = p.wait_for(lambda f: f.get("type") == "approval_request", 60, start)
            if rec is None:
                return {"error": "no approval_request"}
            t0 = p.now_ms()
            _, s2 = p.send_command({"type": "approval_response", "requestId": f["requestId"],
                                    "decision": "approve"})
            rec, _ = p.wait_for(lambda f: peerlib.rpc_event_type(f) == "tool_execution_start", 60, s2)
            if rec is None:
                return {"error": "no tool_execution_start after the decision"}
            if i:
                out.append(rec["t_ms"] - t0)
            p.wait_for(lambda f: is_end(c, f), 60, s2)
        return {"decision_to_tool_ms": med(out), "max_ms": max(out)}
    finally:
        p.close(timeout=15)


def approval_xproc(keel, c, runs, database=None):
    """`keel exec --json --wait-approvals` waits on a held call (without a terminal exec would
    otherwise make a draft and go on); `keel approvals approve <id>` runs as another
    process; time from that process's exit (the decision is committed) to the
    tool_execution_start line of the waiting exec. With `database` (a postgres:// URL) both
    processes keep their approvals and sessions there (KEEL_DATABASE_URL)."""
    env, out = dict(c.envmap), []
    if database:
        env["KEEL_DATABASE_URL"] = database
    if c.argv[1:3] != ["--mode", "rpc"]:
        return {"error": "expected a keel --mode rpc contestant"}
    base = c.argv[3:]
    for i in range(runs):
        argv = [keel, "exec", "--json", "--wait-approvals", "--approval-mode", "everything", *base,
                "RUN: touch xproc-%d.txt" % i]
        proc = subprocess.Popen(argv, cwd=c.cwd, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        seen = {"id": None, "tool": None}
        ev = threading.Event()
        said = []  # exec's stderr, said back when no held call shows up

        def err_reader():
            for line in proc.stderr:
                said.append(line.rstrip("\n"))
                if "apr_" in line and seen["id"] is None:
                    seen["id"] = "apr_" + line.split("apr_", 1)[1].split()[0].strip(".,;:)")
                    ev.set()

        def out_reader():
            for line in proc.stdout:
                if '"tool_execution_start"' in line and seen["tool"] is None:
                    seen["tool"] = time.monotonic()

        ts = [threading.Thread(target=err_reader, daemon=True), threading.Thread(target=out_reader, daemon=True)]
        for t in ts:
            t.start()
        deadline = time.monotonic() + 60
        while not ev.wait(0.1):
            if proc.poll() is not None or time.monotonic() > deadline:
                ts[0].join(2)  # what it said before it ended
                break
        if not ev.is_set():
            ended = proc.poll()
            proc.kill()
            return {"error": "keel exec did not report a held call (%s); its stderr ended with: %s"
                    % ("it exited with %s" % ended if ended is not None else "still running",
                       " | ".join(said[-5:])[-600:] or "nothing")}
        time.sleep(random.uniform(0.0, 1.0))  # decide at a random phase of the waiter's re-check
        r = subprocess.run([keel, "approvals", "approve", seen["id"]], cwd=c.cwd, env=env,
                           capture_output=True, text=True, timeout=60)
        t0 = time.monotonic()
        if r.returncode != 0:
            proc.kill()
            return {"error": "keel approvals approve failed: %s" % r.stderr.strip()[:200]}
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
        for t in ts:
            t.join(5)
        if seen["tool"] is None:
            return {"error": "no tool_execution_start from keel exec"}
        out.append((seen["tool"] - t0) * 1000.0)
    return {"decision_to_tool_ms": med(out), "max_ms": max(out)}


# --------------------------------------------------------------------------- big sessions
def _new_id(used):
    while True:
        i = "%08x" % random.getrandbits(32)
        if i not in used:
            used.add(i)
            return i


def write_big_session(template_path, out_path, entries):
    """Writes a session file of `entries` message entries, modelled on the message entries of
    `template_path` (a real session file the contestant wrote), chained by id/parentId."""
    with open(template_path, encoding="utf-8") as f:
        lines = [json.loads(x) for x in f if x.strip()]
    header = lines[0]
    msgs = [e for e in lines[1:] if e.get("type") == "message"]
    if not msgs:
        raise RuntimeError("no message entries in %s" % template_path)
    header = dict(header, id=header.get("id", "x")[:-12] + "%012x" % random.getrandbits(48))
    used, parent = set(), None
    with open(out_path, "w", encoding="utf-8") as f:
        f.write(json.dumps(header, separators=(",", ":")) + "\n")
        for i in range(entries):
            e = dict(msgs[i % len(msgs)])
            e["id"] = _new_id(used)
            e["parentId"] = parent
            parent = e["id"]
            f.write(json.dumps(e, separators=(",", ":"), ensure_ascii=False) + "\n")
    return header.get("id")


def newest_file(root, suffix=".jsonl"):
    best = None
    for d, _, files in os.walk(root):
        for n in files:
            if n.endswith(suffix):
                path = os.path.join(d, n)
                if best is None or os.path.getmtime(path) > os.path.getmtime(best):
                    best = path
    return best


def big_session(c, entries, runs, keel=None):
    """A session file of `entries` entries: time of switch_session to it (rpc), of spawn ->
    get_state answered when resuming it at start (keel: --session), and of `keel sessions
    list` in its workspace."""
    argv = [a for a in c.argv if a != "--no-session"]
    home = c.envmap["HOME"]
    p = RpcC(argv, env=c.envmap, cwd=c.cwd)
    try:
        if not p.request({"type": "get_state"}, timeout=60):
            return {"error": "no get_state"}
        _, _, rec = turn(p, c, None, PROMPT)
        if rec is None:
            return {"error": "the template turn did not finish"}
    finally:
        p.close(timeout=15)
    sess_root = os.path.join(home, ".keel", "sessions") if c.name.startswith("keel") else \
        c.envmap.get("PI_CODING_AGENT_DIR", os.path.join(home, ".pi", "agent"))
    template = newest_file(sess_root)
    if template is None:
        return {"error": "no session file written under %s" % sess_root}
    big = os.path.join(os.path.dirname(template), "big-%d.jsonl" % entries)
    write_big_session(template, big, entries)
    out = {"entries": entries, "file_mib": os.path.getsize(big) / 1048576.0}
    sw, spawn_ms = [], []
    for _ in range(runs):
        p = RpcC(argv, env=c.envmap, cwd=c.cwd)
        try:
            p.request({"type": "get_state"}, timeout=60)
            t = p.now_ms()
            r = p.request({"type": "switch_session", "sessionPath": big}, timeout=120)
            if not r or not r.get("success"):
                return {"error": "switch_session failed: %s" % json.dumps(r)[:300]}
            sw.append(p.now_ms() - t)
            st = p.request({"type": "get_state"}, timeout=60)
            out["message_count"] = ((st or {}).get("data") or {}).get("messageCount")
        finally:
            p.close(timeout=60)
        if keel:
            p = RpcC(argv + ["--session", big], env=c.envmap, cwd=c.cwd)
            try:
                _, start = p.send_command({"id": "s1", "type": "get_state"})
                rec, f = p.wait_for(lambda f: f.get("id") == "s1" and f.get("type") == "response", 120, start)
                if rec is not None and f.get("success"):
                    spawn_ms.append(rec["t_ms"])
            finally:
                p.close(timeout=60)
    out["switch_session_ms"] = med(sw)
    if spawn_ms:
        out["resume_at_spawn_ms"] = med(spawn_ms)
    if keel:
        ls = []
        for _ in range(runs):
            t = time.monotonic()
            r = subprocess.run([keel, "sessions", "list"], cwd=c.cwd, env=c.envmap, capture_output=True,
                               timeout=120)
            if r.returncode == 0:
                ls.append((time.monotonic() - t) * 1000.0)
        out["sessions_list_ms"] = med(ls)
    os.remove(big)
    return out
