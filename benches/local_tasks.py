#!/usr/bin/env python3
"""local_tasks.py - how well the local model does keel's job: ten small coding tasks
whose outcome a script can check, and the time to the first token with a warm
prompt cache.

Usage:
  python3 benches/local_tasks.py [--keel PATH] [--model-path FILE] [--model ID]
                                 [--threads N] [--config TOML_LINE ...]
                                 [--toml TEXT] [--only NAME ...] [--repeat N] [--json OUT]

Every task runs `keel exec --json --no-session --approval-mode money_only TASK` in a
scratch workspace of its own (set up with the files the task needs), under one
KEEL_HOME for the whole run, as a user's runs share theirs (so the prompt cache
built by the first run serves the rest). A task passes when its check holds: the
files it should leave, the output of the program it wrote, or the number or name
its answer must contain. Each row says why a failure failed. The summary gives the
pass rate, the median wall time, and whether any final answer showed escaped
code (a literal backslash-n) instead of text.

Before the tasks: time to first token. `keel exec "Reply with one word: ready"` runs
twice in a fresh KEEL_HOME; for each, the time from spawning keel to its first
text delta on stdout. The first run evaluates the whole prompt and saves it, the
second starts from the prompt cache. They run with `grammar = "auto"` (a text
answer streams token by token; a tool call is sent once whole).

Defaults: the release build (target/release/keel, built with --features local),
the default model (qwen2.5-coder-1.5b-instruct, from ~/.keel/models or
--model-path), 2 threads. `--config 'grammar = "call-first"'` adds a line to
[providers.local] and `--toml TEXT` appends TEXT to config.toml (for comparing
settings, e.g. a [[models]] entry with compact_tools). Nothing is reached over the network.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TIMEOUT = 900


# --------------------------------------------------------------------------- tasks
def files(ws, tree):
    for rel, text in tree.items():
        p = os.path.join(ws, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write(text)


def read(ws, rel):
    try:
        with open(os.path.join(ws, rel)) as f:
            return f.read()
    except OSError:
        return None


def run(ws, *argv):
    try:
        p = subprocess.run(argv, cwd=ws, capture_output=True, text=True, timeout=30)
        return p.returncode, p.stdout + p.stderr
    except (OSError, subprocess.TimeoutExpired) as e:
        return -1, str(e)


def check_hello(ws, answer):
    text = read(ws, "hello.txt")
    if text is None:
        return "hello.txt was not written"
    return None if text.strip() == "hello world" else f"hello.txt holds {text!r}"


def check_fib(ws, answer):
    if read(ws, "fib.py") is None:
        return "fib.py was not written"
    code, out = run(ws, "python3", "fib.py")
    numbers = [int(n) for n in re.findall(r"-?\d+", out)]
    want = [0, 1, 1, 2, 3, 5, 8, 13, 21, 34]
    if code != 0:
        return f"fib.py failed: {out.strip()[:120]}"
    return None if numbers == want else f"fib.py printed {out.strip()[:120]!r}"


CALC = "def add(a, b):\n    return a - b\n"
TEST_CALC = (
    "from calc import add\n\nassert add(2, 3) == 5, add(2, 3)\nassert add(-1, 1) == 0\nprint('ok')\n"
)


def check_calc(ws, answer):
    code, out = run(ws, "python3", "test_calc.py")
    if read(ws, "test_calc.py") != TEST_CALC:
        return "the test was changed"
    return None if code == 0 else f"the test still fails: {out.strip()[-120:]}"


def check_rename(ws, answer):
    code, out = run(ws, "python3", "-c", "from util import welcome; print(welcome('Ada'))")
    if code != 0:
        return f"no welcome(): {out.strip()[-120:]}"
    if "def greet" in (read(ws, "util.py") or ""):
        return "greet is still there"
    return None if "Hello, Ada" in out else f"welcome('Ada') printed {out.strip()!r}"


def check_count(ws, answer):
    return None if re.search(r"\b7\b", answer) else f"answer without 7: {answer[:120]!r}"


def check_main(ws, answer):
    if read(ws, "src/main.py") is None:
        return "src/main.py was not written"
    code, out = run(ws, "python3", "src/main.py")
    return None if code == 0 and out.strip() == "ok" else f"src/main.py printed {out.strip()[:80]!r}"


def check_append(ws, answer):
    text = read(ws, "notes.txt") or ""
    lines = [l.strip() for l in text.strip().splitlines()]
    return None if lines == ["a", "b", "c"] else f"notes.txt holds {text!r}"


def check_json(ws, answer):
    text = read(ws, "config.json")
    if text is None:
        return "config.json was not written"
    try:
        v = json.loads(text)
    except ValueError as e:
        return f"config.json is not JSON: {e}"
    return None if v == {"name": "keel", "version": 1} else f"config.json holds {v!r}"


def check_needle(ws, answer):
    return None if "haystack3" in answer else f"answer does not name haystack3.txt: {answer[:120]!r}"


def check_shell(ws, answer):
    return None if re.search(r"\b42\b", answer) else f"answer without 42: {answer[:120]!r}"


def check_ini(ws, answer):
    text = read(ws, "settings.ini") or ""
    if re.search(r"^debug\s*=\s*true\s*$", text, re.M) and "name = demo" in text:
        return None
    return f"settings.ini holds {text!r}"


TASKS = [
    ("write", {}, "Create the file hello.txt containing exactly: hello world", check_hello),
    (
        "fib",
        {},
        "Write fib.py, a Python program that prints the first 10 Fibonacci numbers "
        "(starting 0, 1), one per line. Run it with python3 and tell me what it printed.",
        check_fib,
    ),
    (
        "fix-test",
        {"calc.py": CALC, "test_calc.py": TEST_CALC},
        "Run `python3 test_calc.py`. It fails: fix the bug in calc.py (not the test) so it passes.",
        check_calc,
    ),
    (
        "rename",
        {"util.py": "def greet(name):\n    return f'Hello, {name}!'\n"},
        "In util.py, rename the function greet to welcome.",
        check_rename,
    ),
    (
        "count",
        {"data.txt": "".join(f"row {i}\n" for i in range(1, 8))},
        "How many lines does data.txt have? Find out with a tool, then answer with the number.",
        check_count,
    ),
    ("mkdir", {}, "Create src/main.py, a Python program that prints ok.", check_main),
    ("append", {"notes.txt": "a\nb\n"}, "Add a line containing c at the end of notes.txt.", check_append),
    (
        "json",
        {},
        'Write config.json containing the JSON object {"name": "keel", "version": 1}.',
        check_json,
    ),
    (
        "find",
        {
            "haystack1.txt": "hay hay hay\n",
            "haystack2.txt": "more hay\n",
            "haystack3.txt": "hay and a needle\n",
            "haystack4.txt": "just hay\n",
        },
        "Which file in this folder contains the word needle? Answer with its name.",
        check_needle,
    ),
    ("shell", {}, "Run `echo $((6*7))` with bash and tell me what it printed.", check_shell),
    (
        "edit",
        {"settings.ini": "[app]\nname = demo\ndebug = false\n"},
        "In settings.ini, change debug to true. Leave the other settings as they are.",
        check_ini,
    ),
]


# --------------------------------------------------------------------------- running keel
def keel_env(home, threads):
    env = {k: v for k, v in os.environ.items() if not k.startswith("KEEL_")}
    env.update({"KEEL_HOME": home, "KEEL_THREADS": str(threads), "RUST_LOG": "keel_llm=info"})
    return env


def exec_keel(keel, home, ws, threads, prompt, extra=()):
    """Runs one `keel exec --json`; returns (events, stderr, wall seconds, seconds to the
    first text delta or None)."""
    argv = [keel, "exec", "--json", "--no-session", "--approval-mode", "money_only", *extra, prompt]
    started = time.monotonic()
    p = subprocess.Popen(argv, cwd=ws, env=keel_env(home, threads), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    events, first = [], None
    err = []
    t = threading.Thread(target=lambda: err.append(p.stderr.read()), daemon=True)
    t.start()
    deadline = started + TIMEOUT
    for line in p.stdout:
        try:
            v = json.loads(line)
        except ValueError:
            continue
        events.append(v)
        ev = v.get("assistantMessageEvent") or {}
        if first is None and v.get("type") == "message_update" and ev.get("type") in (
            "text_delta", "toolcall_start", "toolcall_delta"
        ):
            first = time.monotonic() - started
        if time.monotonic() > deadline:
            p.kill()
            break
    try:
        p.wait(timeout=max(1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
    t.join(timeout=5)
    return events, "".join(err), time.monotonic() - started, first


def final_text(events):
    for v in reversed(events):
        if v.get("type") == "agent_end":
            for m in reversed(v.get("messages", [])):
                if m.get("role") == "assistant":
                    return "".join(b.get("text", "") for b in m.get("content", []) if b.get("type") == "text")
    return ""


def model_calls(events):
    return sum(1 for v in events if v.get("type") == "message_end" and v["message"].get("role") == "assistant")


def home_with(model_path, model_id, config_lines, context, toml=""):
    home = tempfile.mkdtemp(prefix="keel-tasks-home-")
    os.makedirs(os.path.join(home, "models"))
    name = os.path.basename(model_path)
    os.symlink(os.path.abspath(model_path), os.path.join(home, "models", name))
    lines = [f'[model]\nprovider = "local"\nid = "{model_id}"\n', "[providers.local]"]
    lines.append(f'model_path = "{os.path.abspath(model_path)}"')
    lines.append(f"context_size = {context}")
    lines += config_lines
    lines.append(toml)
    with open(os.path.join(home, "config.toml"), "w") as f:
        f.write("\n".join(lines) + "\n")
    return home


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keel", default=os.path.join(ROOT, "target/release/keel"))
    ap.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    ap.add_argument("--model-path")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--context", type=int, default=8192)
    ap.add_argument("--config", action="append", default=[])
    ap.add_argument("--toml", default="", help="text appended to config.toml (e.g. a [[models]] entry)")
    ap.add_argument("--only", action="append", default=[])
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--no-ttft", action="store_true")
    ap.add_argument("--json")
    a = ap.parse_args()
    a.keel = os.path.abspath(a.keel)
    model_path = a.model_path or os.path.join(
        os.environ.get("KEEL_HOME", os.path.expanduser("~/.keel")), "models", f"{a.model}-q4_k_m.gguf"
    )
    if not os.path.isfile(model_path):
        sys.exit(f"local_tasks: no model file {model_path}: run `keel models pull` or pass --model-path")
    if not os.access(a.keel, os.X_OK):
        sys.exit(f"local_tasks: no keel at {a.keel}: cargo build --release -p keel-cli --features local")
    report = {"model": a.model, "config": a.config, "toml": a.toml, "threads": a.threads, "tasks": [], "ttft": {}}
    load = os.getloadavg()[0]

    if not a.no_ttft:
        # A text answer streams token by token (a call is sent once it is
        # whole), so the first token is measured with `grammar = "auto"`.
        home = home_with(model_path, a.model, a.config + ['grammar = "auto"'], a.context, a.toml)
        ws = tempfile.mkdtemp(prefix="keel-ttft-")
        for label in ("cold", "warm"):
            _, err, wall, first = exec_keel(a.keel, home, ws, a.threads, "Reply with one word: ready")
            report["ttft"][label] = {"first_token_s": first, "wall_s": wall}
            print(f"ttft {label}: first token {first and round(first, 2)} s, wall {wall:.1f} s", file=sys.stderr)
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(ws, ignore_errors=True)

    home = home_with(model_path, a.model, a.config, a.context, a.toml)
    for rnd in range(a.repeat):
        for name, tree, prompt, check in TASKS:
            if a.only and name not in a.only:
                continue
            ws = tempfile.mkdtemp(prefix=f"keel-task-{name}-")
            files(ws, tree)
            events, err, wall, first = exec_keel(a.keel, home, ws, a.threads, prompt)
            answer = final_text(events)
            why = check(ws, answer) if events else f"no output: {err.strip()[-200:]}"
            row = {
                "task": name,
                "pass": why is None,
                "why": why,
                "wall_s": round(wall, 1),
                "first_token_s": first and round(first, 2),
                "model_calls": model_calls(events),
                "escaped": "\\n" in answer,
                "answer": answer[:300],
            }
            report["tasks"].append(row)
            mark = "pass" if why is None else f"FAIL ({why})"
            print(f"{name:9} {wall:6.1f} s  {row['model_calls']} calls  {mark}", file=sys.stderr)
            shutil.rmtree(ws, ignore_errors=True)
    shutil.rmtree(home, ignore_errors=True)

    rows = report["tasks"]
    passed = sum(r["pass"] for r in rows)
    report["pass_rate"] = passed / len(rows) if rows else 0
    report["median_wall_s"] = statistics.median(r["wall_s"] for r in rows) if rows else None
    report["escaped_answers"] = sum(r["escaped"] for r in rows)
    report["load_before"] = load
    report["load_after"] = os.getloadavg()[0]
    print(f"\n| task | result | wall | model calls |\n| --- | --- | --- | --- |")
    for r in rows:
        res = "pass" if r["pass"] else f"fail: {r['why']}"
        print(f"| {r['task']} | {res} | {r['wall_s']} s | {r['model_calls']} |")
    print(
        f"\n{a.model} {' '.join(a.config)}: {passed}/{len(rows)} passed, median {report['median_wall_s']} s, "
        f"{report['escaped_answers']} answers with escaped code; "
        f"first token cold {report['ttft'].get('cold', {}).get('first_token_s')} s, "
        f"warm {report['ttft'].get('warm', {}).get('first_token_s')} s; "
        f"load {load:.1f} -> {report['load_after']:.1f}"
    )
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
