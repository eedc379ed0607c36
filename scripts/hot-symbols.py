#!/usr/bin/env python3
"""hot-symbols.py - writes crates/cli/hot-symbols.txt, the functions a keel turn runs.

usage: scripts/hot-symbols.py [--keel PATH] [--build NAME] [--add] [--peers-lib DIR]
       scripts/hot-symbols.py --check

The release build links these functions first and next to each other (lld's
--symbol-ordering-file, see crates/cli/build.rs). The kernel maps a binary's
code 64 KiB at a time around each page a process touches, so code that runs
scattered over the whole .text makes most of it resident; packed together it
is a few MiB. Run this after a change of dependencies, of the toolchain or
of the code a turn runs (a name that no longer exists is skipped by the
linker, so a stale list only costs memory):

  cargo build --release -p keel-cli
  scripts/hot-symbols.py                 # needs valgrind (apt install valgrind)
  cargo build --release -p keel-cli      # links with the new list

Builds with other features name many functions differently (a feature of
one crate changes the names of every crate above it), so their names are
added to the same list, after the default build's: the linker skips what a
build does not have, and each build finds its own names in order.

  cargo build --release -p keel-cli --features local
  scripts/hot-symbols.py --add --build local   # keeps the list, appends what is new
  (the same for --features temporal; then the default build again)

Making the default build's names again (without --add) keeps the names of
the other builds (those the default binary does not have) after them, with
their stamps: after a change of keel's own code (a new generic, a renamed
function: the stamp does not see those) only the default build needs
running again.

A name carries a hash of its crate's build: the crate's version and
features and those of everything below it, the toolchain and the release
profile. Any change there renames nearly every function, the linker skips
the whole list without a word, and the memory of a turn doubles. So the list
has a stamp beside it (hot-symbols.stamp): for each build whose names it
holds, a fingerprint of that build's dependency graph (`cargo tree` of
keel-cli: every package with its version and features), the toolchain and
the release profile. `--check` (run by CI, half a second, no build needed)
fails when a build's fingerprint no longer matches: regenerate the list.

Each scenario runs the release binary under callgrind against mock_llm.py
(from shared/peers, or --peers-lib / KEEL_PEERS_LIB): RPC mode (get_state, a
text turn, a tool turn, a text turn), the app-server (initialize, two
threads with the same turns) and `keel exec` (a text turn), each twice in
one home (a new home, then one that has sessions already). Every function
of the binary that ran in any of them is listed, those every scenario ran
first, then the ones only some ran; names as the linker knows them
(mangled), sorted within each group so that the file's diffs stay readable.
"""
import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import tomllib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
LIST = os.path.join(ROOT, "crates", "cli", "hot-symbols.txt")
STAMP = os.path.join(ROOT, "crates", "cli", "hot-symbols.stamp")
# The builds whose names the list holds, in the order they are added.
BUILDS = {"default": [], "local": ["--features", "local"], "temporal": ["--features", "temporal"]}
PROMPTS = ["Say hello please", "RUN: echo hi", "Say hello please"]
TIMEOUT_S = 120


def mock(lib):
    p = subprocess.Popen([sys.executable, os.path.join(lib, "mock_llm.py"), "--port", "0",
                          "--delay-ms", "0"], stdout=subprocess.PIPE, text=True)
    first = p.stdout.readline().split()
    if len(first) != 2 or first[0] != "PORT":
        p.kill()
        raise SystemExit("mock_llm.py did not say its port")
    return p, int(first[1])


class Session:
    """One keel process under callgrind, spoken to over stdio."""

    def __init__(self, argv, cwd, env, err):
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=err, text=True, cwd=cwd, env=env)

    def send(self, frame):
        self.p.stdin.write(json.dumps(frame) + "\n")
        self.p.stdin.flush()

    def until(self, pred):
        while True:
            line = self.p.stdout.readline()
            if not line:
                raise SystemExit("keel ended before the scenario did")
            try:
                frame = json.loads(line)
            except ValueError:
                continue
            if pred(frame):
                return frame

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=TIMEOUT_S)


def is_agent_end(f):
    if f.get("type") == "agent_end":
        return True
    return f.get("type") == "event" and f.get("payload", {}).get("event_type") == "agent_end"


def rpc(s, _ws):
    s.send({"id": "s", "type": "get_state"})
    s.until(lambda f: f.get("id") == "s")
    for i, text in enumerate(PROMPTS):
        s.send({"id": "p%d" % i, "type": "prompt", "message": text})
        s.until(is_agent_end)


def app_server(s, ws):
    s.send({"id": 1, "method": "initialize",
            "params": {"clientInfo": {"name": "hot-symbols", "version": "1"},
                       "capabilities": {"experimentalApi": False}}})
    s.until(lambda f: f.get("id") == 1)
    s.send({"method": "initialized"})
    # A thread with the defaults, and one as Codex's clients start them.
    threads = [{"cwd": ws},
               {"cwd": ws, "approvalPolicy": "never", "sandbox": "danger-full-access"}]
    for n, params in enumerate(threads):
        s.send({"id": 2 + n, "method": "thread/start", "params": params})
        thread = s.until(lambda f, n=n: f.get("id") == 2 + n)["result"]["thread"]["id"]
        for i, text in enumerate(PROMPTS):
            s.send({"id": 10 * (n + 1) + i, "method": "turn/start",
                    "params": {"threadId": thread,
                               "input": [{"type": "text", "text": text, "text_elements": []}]}})
            s.until(lambda f: f.get("method") == "turn/completed")


SCENARIOS = {
    "rpc": (["--mode", "rpc"], rpc),
    "app-server": (["app-server"], app_server),
    "exec": (["exec", PROMPTS[0]], None),
}


def functions_run(path, binary):
    """The functions of `binary` a callgrind profile saw run."""
    objects, names, seen = {}, {}, set()
    current, callee_object = None, None
    line_re = re.compile(r"^(c?ob|c?fn)=\((\d+)\)(?: (.*))?$")
    with open(path) as f:
        for line in f:
            m = line_re.match(line.rstrip("\n"))
            if not m:
                continue
            kind, key, name = m.groups()
            if kind in ("ob", "cob"):
                if name:
                    objects[key] = name
                if kind == "ob":
                    current = objects[key]
                else:
                    callee_object = objects[key]
                continue
            if name:
                names[key] = name
            obj = current if kind == "fn" else (callee_object or current)
            if kind == "cfn":
                callee_object = None
            if obj and os.path.realpath(obj) == binary:
                # A recursion level is written as name'2.
                seen.add(re.sub(r"'\d+$", "", names[key]))
    return seen


def defined_symbols(binary):
    out = subprocess.run(["nm", "--defined-only", binary], capture_output=True, text=True,
                         check=True).stdout
    return {parts[2] for parts in (ln.split() for ln in out.splitlines()) if len(parts) == 3}


def fingerprint(build):
    """What the mangled names of `build` follow from, hashed (see the module doc)."""
    h = hashlib.sha256()
    h.update(subprocess.run(["rustc", "-vV"], cwd=ROOT, capture_output=True, text=True,
                            check=True).stdout.encode())
    tree = subprocess.run(["cargo", "tree", "--locked", "-q", "-p", "keel-cli", "-e", "normal,build",
                           "--prefix", "none", "-f", "{p} {f}", *BUILDS[build]],
                          cwd=ROOT, capture_output=True, text=True)
    if tree.returncode != 0:
        raise SystemExit("hot-symbols: cannot read the %s build's dependencies (`cargo tree` "
                         "failed): %s" % (build, tree.stderr.strip()[-500:]))
    out = tree.stdout
    # A workspace crate is shown with its directory, which is not part of its name.
    packages = {re.sub(r" \((?:/|[A-Za-z]:\\)[^)]*\)", "", ln).replace(" (*)", "").rstrip()
                for ln in out.splitlines() if ln.strip()}
    h.update("\n".join(sorted(packages)).encode())
    with open(os.path.join(ROOT, "Cargo.toml"), "rb") as f:
        profile = tomllib.load(f).get("profile", {}).get("release", {})
    h.update(json.dumps(profile, sort_keys=True).encode())
    return h.hexdigest()[:32]


def read_stamp():
    stamp = {}
    if os.path.exists(STAMP):
        with open(STAMP) as f:
            for ln in f:
                parts = ln.split()
                if len(parts) == 2 and not ln.startswith("#"):
                    stamp[parts[0]] = parts[1]
    return stamp


def write_stamp(stamp):
    with open(STAMP, "w") as f:
        f.write("# The builds whose functions hot-symbols.txt lists, each with a fingerprint of\n"
                "# its dependency graph, toolchain and release profile. Written by\n"
                "# scripts/hot-symbols.py; `scripts/hot-symbols.py --check` compares.\n")
        for build in BUILDS:
            if build in stamp:
                f.write("%s %s\n" % (build, stamp[build]))


def check():
    """Exit 1 when a build the list should hold has changed since the list was made."""
    stamp, stale = read_stamp(), []
    for build in BUILDS:
        now = fingerprint(build)
        if stamp.get(build) != now:
            stale.append(build)
            print("hot-symbols: the %s build %s" % (build, "is not in the list" if build not in stamp
                  else "has changed since the list was made (dependencies, features, toolchain "
                       "or release profile)"), file=sys.stderr)
    if stale:
        print("hot-symbols: crates/cli/hot-symbols.txt is stale, so a release build links its "
              "functions scattered and a turn takes twice the memory. Regenerate it as "
              "scripts/hot-symbols.py says at its top (the default build, then --add --build "
              "local, --add --build temporal).", file=sys.stderr)
        sys.exit(1)
    print("hot-symbols: the list is fresh for %s" % ", ".join(BUILDS), file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--keel", default=os.path.join(ROOT, "target", "release", "keel"))
    ap.add_argument("--build", choices=list(BUILDS), default="default",
                    help="which feature set --keel was built with (default: the default one)")
    ap.add_argument("--add", action="store_true",
                    help="keep the list's names and append this build's new ones (another "
                         "feature set)")
    ap.add_argument("--check", action="store_true",
                    help="only say whether the list still matches every build (no build needed)")
    ap.add_argument("--peers-lib", default=os.environ.get(
        "KEEL_PEERS_LIB", os.path.join(ROOT, "..", "shared", "peers")))
    args = ap.parse_args()
    if args.check:
        check()
        return
    if args.build != "default" and not args.add:
        raise SystemExit("--build %s goes with --add: the default build's names come first"
                         % args.build)
    binary = os.path.realpath(args.keel)
    symbols = defined_symbols(binary)
    if not symbols:
        raise SystemExit("%s has no symbol table: build it with the release profile as it is "
                         "(strip = \"none\")" % binary)
    runs = {}
    with tempfile.TemporaryDirectory(prefix="keel-hot-") as tmp:
        server, port = mock(args.peers_lib)
        try:
            for name, (mode_args, drive) in [(n, sc) for n, sc in SCENARIOS.items()
                                             for _ in range(2)]:
                home = os.path.join(tmp, name, "home")
                ws = os.path.join(tmp, name, "ws")
                os.makedirs(home, exist_ok=True)
                os.makedirs(ws, exist_ok=True)
                env = dict(os.environ, HOME=home, KEEL_HOME=os.path.join(home, ".keel"))
                profile = os.path.join(tmp, name + ".callgrind")
                argv = ["valgrind", "--tool=callgrind", "--demangle=no", "--dump-instr=no",
                        "--callgrind-out-file=" + profile, binary, *mode_args,
                        "--base-url", "http://127.0.0.1:%d/v1" % port, "--model", "mock-model"]
                with open(os.path.join(tmp, name + ".stderr"), "w") as err:
                    if drive is None:
                        subprocess.run(argv, cwd=ws, env=env, stdin=subprocess.DEVNULL,
                                       stdout=subprocess.DEVNULL, stderr=err, timeout=TIMEOUT_S,
                                       check=True)
                    else:
                        s = Session(argv, ws, env, err)
                        drive(s, ws)
                        s.close()
                runs[name] = runs.get(name, set()) | (functions_run(profile, binary) & symbols)
                print("%-10s %5d functions" % (name, len(runs[name])), file=sys.stderr)
        finally:
            server.kill()
    everywhere = set.intersection(*runs.values())
    somewhere = set.union(*runs.values()) - everywhere
    names = sorted(everywhere) + sorted(somewhere)
    kept, stamp = [], {}
    if os.path.exists(LIST):
        with open(LIST) as f:
            kept = [ln.strip() for ln in f if ln.strip()]
    if args.add and kept:
        known = set(kept)
        names = kept + [n for n in names if n not in known]
        stamp = read_stamp()
    elif kept:
        # This build's names made again: those of other builds (the names
        # this binary does not have) stay after them, with their stamps
        # (this build's own is written fresh below), so that refreshing the
        # default build after a change of keel's own code does not need the
        # other builds rebuilt.
        others = [n for n in kept if n not in symbols]
        names = names + others
        stamp = read_stamp() if others else {}
    stamp[args.build] = fingerprint(args.build)
    with open(LIST, "w") as f:
        for name in names:
            f.write(name + "\n")
    write_stamp(stamp)
    print("wrote %s: %d functions (%d of this build, %d run by every scenario)"
          % (os.path.relpath(LIST), len(names), len(everywhere) + len(somewhere),
             len(everywhere)), file=sys.stderr)


if __name__ == "__main__":
    main()
