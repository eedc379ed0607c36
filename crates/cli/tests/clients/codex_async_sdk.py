"""`codex-app-server-sdk` (PyPI), an async Python client for the Codex
app-server, unmodified, driving `keel app-server` over stdio. The mock
model's answers are queued by the Rust test (suite/clients), in step
order. Prints one JSON object; a failing step records its error."""

import asyncio
import json
import os
import sys
import traceback

from codex_app_server_sdk import CodexClient, CodexTurnInactiveError, ThreadConfig

WS = os.environ["KEEL_TEST_WS"]
COMMAND = [os.environ["KEEL_BIN"], "app-server"]
out, errors = {}, {}


async def step(name, coro):
    try:
        out[name] = await asyncio.wait_for(coro, 30)
    except Exception as e:  # noqa: BLE001 - every failure is reported
        errors[name] = f"{type(e).__name__}: {e}"
        traceback.print_exc(file=sys.stderr)


def item_types(read):
    turns = read["thread"]["turns"] if isinstance(read, dict) else read.thread.turns
    return [[i["type"] for i in t["items"]] for t in turns]


async def main():
    client = CodexClient.connect_stdio(command=COMMAND, cwd=WS, env=dict(os.environ))
    await client.start()
    try:
        init = await client.initialize()
        out["userAgent"] = (getattr(init, "raw", None) or {}).get("userAgent")
        thread = await client.start_thread(ThreadConfig(cwd=WS))
        out["threadId"] = thread.thread_id
        await step("text", _text(thread, "hello"))
        # Without a callback the client declines approvals by itself.
        await step("declined", _text(thread, "fetch it"))
        await step("interrupted", _interrupted(client, thread))
        await step("compact", _compact(client, thread.thread_id))
        await step("listed", _listed(client, thread.thread_id))
        await step("forked", _forked(client, thread.thread_id))
    finally:
        await client.close()
    # A new process: the thread and every turn are still there.
    again = CodexClient.connect_stdio(command=COMMAND, cwd=WS, env=dict(os.environ))
    await again.start()
    try:
        await step("resumed", _resumed(again, out.get("threadId")))
    finally:
        await again.close()


async def _text(thread, text):
    return (await thread.chat_once(text)).final_text


async def _interrupted(client, thread):
    # The SDK's way: a turn that goes quiet raises with a continuation,
    # and `cancel` interrupts it and waits for the end.
    try:
        await thread.chat_once("stall", inactivity_timeout=1.0)
        return "not stalled"
    except CodexTurnInactiveError as e:
        return (await client.cancel(e.continuation)).was_interrupted


async def _compact(client, thread_id):
    await client.compact_thread(thread_id)
    for _ in range(200):
        read = await client.read_thread(thread_id, include_turns=True)
        if any("contextCompaction" in t for t in item_types(read)):
            return True
        await asyncio.sleep(0.05)
    return False


async def _listed(client, thread_id):
    listed = await client.list_threads()
    data = listed["data"] if isinstance(listed, dict) else listed.data
    return any((t["id"] if isinstance(t, dict) else t.id) == thread_id for t in data)


async def _forked(client, thread_id):
    forked = await client.fork_thread(thread_id)
    return forked.thread_id != thread_id


async def _resumed(client, thread_id):
    await client.resume_thread(thread_id)
    return item_types(await client.read_thread(thread_id, include_turns=True))


asyncio.run(main())
out["errors"] = errors
print(json.dumps(out, default=str))
