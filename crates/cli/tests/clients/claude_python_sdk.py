"""Anthropic's Claude Agent SDK for Python (claude-agent-sdk on PyPI),
unmodified, with keel as its Claude Code CLI (cli_path): query() with a
string prompt, ClaudeSDKClient with several messages, can_use_tool allow
with an updated input and deny, a PreToolUse hook, interrupt(),
set_permission_mode(), structured output, resume in a new process, and the
client's other methods (get_server_info, get_mcp_status,
toggle_mcp_server, reconnect_mcp_server, rewind_files with file
checkpointing, get_context_usage, set_model, stop_task). The
model is the SDK's own: ANTHROPIC_BASE_URL at the mock. The mock's answers
are queued by the Rust test (suite/clients/claude_agent_sdk.rs), in step
order. Prints one JSON object: what the SDK gave back at each step."""

import asyncio
import json
import os
import traceback

from claude_agent_sdk import (
    AssistantMessage,
    ClaudeAgentOptions,
    ClaudeSDKClient,
    HookMatcher,
    PermissionResultAllow,
    PermissionResultDeny,
    ResultMessage,
    SystemMessage,
    ToolUseBlock,
    UserMessage,
    query,
)

WS = os.environ["KEEL_TEST_WS"]
OUT = {"errors": {}}


def options(**extra):
    return ClaudeAgentOptions(
        cli_path=os.environ["KEEL_BIN"],
        cwd=WS,
        model="claude-sonnet-4-5",
        **extra,
    )


async def step(name, f):
    try:
        OUT[name] = await f()
    except Exception:  # noqa: BLE001 - reported to the test
        OUT["errors"][name] = traceback.format_exc()


def result_of(messages):
    r = next(m for m in messages if isinstance(m, ResultMessage))
    return {
        "subtype": r.subtype,
        "result": r.result,
        "session_id": r.session_id,
        "usage": r.usage,
        "structured": r.structured_output,
        "is_error": r.is_error,
    }


async def one_query():
    seen = [m async for m in query(prompt="say hi", options=options())]
    init = next(m for m in seen if isinstance(m, SystemMessage))
    return {"kinds": [type(m).__name__ for m in seen], "init": init.data, "result": result_of(seen)}


async def can_use_tool():
    asked = []

    async def decide(tool_name, tool_input, context):
        asked.append({"tool": tool_name, "input": tool_input})
        if tool_input.get("file_path") == "a.txt":
            return PermissionResultAllow(updated_input={**tool_input, "content": "two\n"})
        return PermissionResultDeny(message="not that one")

    async with ClaudeSDKClient(options=options(can_use_tool=decide)) as client:
        await client.query("write a file")
        first = [m async for m in client.receive_response()]
        await client.query("write another")
        second = [m async for m in client.receive_response()]
    results = [
        b.content
        for m in first + second
        if isinstance(m, UserMessage) and isinstance(m.content, list)
        for b in m.content
        if hasattr(b, "tool_use_id")
    ]
    with open(os.path.join(WS, "a.txt")) as f:
        content = f.read()
    return {
        "asked": asked,
        "file": content,
        "b_exists": os.path.exists(os.path.join(WS, "b.txt")),
        "results": results,
        "second": result_of(second),
    }


async def hook():
    inputs = []

    async def pre_tool_use(input, tool_use_id, context):
        inputs.append({"tool": input["tool_name"], "command": input["tool_input"].get("command")})
        return {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": "no deleting here",
            }
        }

    hooks = {"PreToolUse": [HookMatcher(matcher="Bash", hooks=[pre_tool_use])]}
    seen = [m async for m in query(prompt="clean up", options=options(hooks=hooks))]
    return {
        "inputs": inputs,
        "kept": os.path.exists(os.path.join(WS, "keep.txt")),
        "result": result_of(seen),
    }


async def interrupt_and_mode():
    async with ClaudeSDKClient(options=options()) as client:
        await client.set_permission_mode("acceptEdits")
        await client.query("take your time")
        seen = []
        async for m in client.receive_response():
            seen.append(m)
            if isinstance(m, AssistantMessage) and any(
                isinstance(b, ToolUseBlock) for b in m.content
            ):
                await asyncio.sleep(0.3)
                await client.interrupt()
    return result_of(seen)


async def structured():
    schema = {
        "type": "object",
        "properties": {"ok": {"type": "boolean"}},
        "required": ["ok"],
        "additionalProperties": False,
    }
    fmt = {"type": "json_schema", "schema": schema}
    seen = [m async for m in query(prompt="answer in JSON", options=options(output_format=fmt))]
    return result_of(seen)


async def resumed():
    session = OUT["query"]["result"]["session_id"]
    seen = [m async for m in query(prompt="and again", options=options(resume=session))]
    return result_of(seen)


async def controls():
    servers = {"everything": {"type": "stdio", "command": os.environ["MCP_EVERYTHING"], "args": []}}
    opts = options(
        permission_mode="acceptEdits",
        enable_file_checkpointing=True,
        extra_args={"replay-user-messages": None},
        mcp_servers=servers,
    )
    c_txt = os.path.join(WS, "c.txt")
    out = {}
    async with ClaudeSDKClient(options=opts) as client:
        info = await client.get_server_info()
        out["models"] = [m["value"] for m in info["models"]]

        async def status():
            s = await client.get_mcp_status()
            return [f"{x['name']}:{x['status']}" for x in s["mcpServers"]]

        out["status"] = [await status()]
        await client.toggle_mcp_server("everything", False)
        out["status"].append(await status())
        await client.toggle_mcp_server("everything", True)
        await client.reconnect_mcp_server("everything")
        out["status"].append(await status())
        uuids = []
        for prompt in ("write c", "change c"):
            await client.query(prompt)
            async for m in client.receive_response():
                if isinstance(m, UserMessage) and getattr(m, "uuid", None) and m.content == prompt:
                    uuids.append(m.uuid)
        out["before"] = open(c_txt).read()
        await client.rewind_files(uuids[1])
        out["after"] = open(c_txt).read()
        usage = await client.get_context_usage()
        out["tokens"] = usage["totalTokens"]
        await client.set_model("claude-sonnet-4-5")
        try:
            await client.stop_task("t1")
            out["stop"] = None
        except Exception as e:  # noqa: BLE001 - what the SDK raised
            out["stop"] = str(e)
    return out


async def main():
    await step("query", one_query)
    await step("canUseTool", can_use_tool)
    await step("hook", hook)
    await step("interrupt", interrupt_and_mode)
    await step("structured", structured)
    await step("resumed", resumed)
    await step("controls", controls)
    print(json.dumps(OUT, default=str))


asyncio.run(main())
