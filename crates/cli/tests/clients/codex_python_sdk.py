"""OpenAI's Python SDK for the Codex app-server (`openai-codex` on PyPI),
unmodified, driving `keel app-server` (its `codex_bin`). The mock model's
answers are queued by the Rust test that runs this script
(suite/clients), in the order of the steps below. Prints one JSON object
with what the SDK saw; a step that raises records its error and the rest
go on."""

import json
import os
import sys
import threading
import traceback

from openai_codex import Codex, CodexConfig
from openai_codex.client import CodexClient

out = {}
errors = {}


def step(name, fn):
    try:
        out[name] = fn()
    except Exception as e:  # noqa: BLE001 - every failure is reported
        errors[name] = f"{type(e).__name__}: {e}"
        traceback.print_exc(file=sys.stderr)


# keel (KEEL_BIN), or without it the Codex CLI that ships with the SDK, for
# comparison. CODEX_TOOLLESS=1 leaves out the steps that need a tool call
# (the mock's tool names are keel's).
TOOLS = os.environ.get("CODEX_TOOLLESS") != "1"


def config():
    return CodexConfig(codex_bin=os.environ.get("KEEL_BIN"), cwd=os.environ["KEEL_TEST_WS"])


def items_of(turn):
    return [i.root.type if hasattr(i, "root") else i.type for i in turn.items]


with Codex(config=config()) as codex:
    step("userAgent", lambda: codex.metadata.userAgent)
    thread = codex.thread_start(cwd=os.environ["KEEL_TEST_WS"])
    step("text", lambda: thread.run("hello").final_response)
    # A held command: the SDK's default handler accepts it.
    if TOOLS:
        step("accepted", lambda: thread.run("fetch it").final_response)
    # Version-gated options are sent, not refused.
    step(
        "gated",
        lambda: thread.turn("again", source="user", turn_service_tier="default")
        .run()
        .final_response,
    )

    def interrupt():
        handle = thread.turn("stall")
        events = handle.stream()
        for event in events:
            if event.method == "item/agentMessage/delta":
                handle.interrupt()
                break
        for event in events:
            if event.method == "turn/completed":
                return event.payload.turn.status.value
        return None

    step("interrupted", interrupt)

    def steer():
        handle = thread.turn("slow")
        events = handle.stream()
        steered = None
        for event in events:
            if event.method == "item/agentMessage/delta" and steered is None:
                steered = handle.steer("and also this").turn_id == handle.id
            if event.method == "turn/completed":
                return {"steered": steered, "status": event.payload.turn.status.value}
        return None

    step("steer", steer)
    step("compact", lambda: thread.compact() is not None)

    def wait_compacted():
        # thread/compact/start answers at once; the compaction is a turn.
        for _ in range(200):
            turns = thread.read(include_turns=True).thread.turns
            if any("contextCompaction" in items_of(t) for t in turns):
                return len(turns)
            threading.Event().wait(0.05)
        return None

    step("compactedTurns", wait_compacted)
    step(
        "forked",
        lambda: codex.thread_fork(thread.id, include_turns=False).id != thread.id,
    )
    step("listed", lambda: thread.id in [t.id for t in codex.thread_list().data])
    thread_id = thread.id

# A new process: the thread and every turn are still there.
with Codex(config=config()) as codex:
    step(
        "resumedWithoutTurns",
        lambda: len(codex.thread_resume(thread_id, include_turns=False).read().thread.turns) >= 0,
    )

    def read_back():
        turns = codex.thread_resume(thread_id).read(include_turns=True).thread.turns
        return {"ids": [t.id for t in turns], "items": [items_of(t) for t in turns]}

    step("readBack", read_back)

# A client that declines: CodexClient's public approval handler.
declined = []


def decline(method, params):
    declined.append(method)
    return {"decision": "decline"}


client = CodexClient(config=config(), approval_handler=decline)
client.start()
try:
    client.initialize()
    started = client.thread_start({"cwd": os.environ["KEEL_TEST_WS"]})

    def declined_run():
        turn = client.turn_start(started.thread.id, "fetch it").turn
        statuses = []
        while True:
            event = client.next_turn_notification(turn.id)
            if event.method == "item/completed":
                item = event.payload.item.root
                if item.type == "commandExecution":
                    statuses.append(item.status.value)
            if event.method == "turn/completed":
                return {"status": event.payload.turn.status.value, "commands": statuses}

    if TOOLS:
        step("declinedRun", declined_run)
finally:
    client.close()
out["declinedMethods"] = declined
out["errors"] = errors
print(json.dumps(out, default=str))
