"""An MCP server that speaks only protocol 2026-07-28 (stateless), over
stdio, on Python's standard library.

It answers `server/discover`, `tools/list` and `tools/call` (each request
carrying its own `_meta`), and refuses `initialize`, which 2026-07-28
removed. Its tool `era` says which protocol version the request named;
`ask` puts a question to the client the 2026-07-28 way (an
`input_required` result, answered by calling again with `inputResponses`)
and says what the client answered. Started by crates/cli/tests/suite/mcp/protocols.rs.
"""

import json
import sys

VERSION = "2026-07-28"
META = "io.modelcontextprotocol/protocolVersion"


def answer(req):
    method = req.get("method")
    params = req.get("params") or {}
    meta = params.get("_meta") or {}
    if method == "initialize":
        return None, {
            "code": -32601,
            "message": "initialize is not part of protocol 2026-07-28: use server/discover",
        }
    if method == "server/discover":
        return {
            "resultType": "complete",
            "supportedVersions": [VERSION],
            "capabilities": {"tools": {}},
            "ttlMs": 0,
            "cacheScope": "private",
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "stateless", "version": "1.0.0"}},
        }, None
    if method == "tools/list":
        return {
            "resultType": "complete",
            "tools": [{
                "name": "era",
                "description": "Says which protocol version the request named.",
                "inputSchema": {"type": "object", "properties": {}},
                "annotations": {"readOnlyHint": True},
            }, {
                "name": "ask",
                "description": "Asks the client whether to proceed.",
                "inputSchema": {"type": "object", "properties": {}},
                "annotations": {"readOnlyHint": True},
            }],
            "ttlMs": 0,
            "cacheScope": "private",
        }, None
    if method == "tools/call" and params.get("name") == "ask":
        answered = (params.get("inputResponses") or {}).get("proceed")
        if answered is None:
            return {
                "resultType": "input_required",
                "inputRequests": {"proceed": {"method": "elicitation/create", "params": {
                    "mode": "form",
                    "message": "Proceed with the migration?",
                    "requestedSchema": {
                        "type": "object",
                        "properties": {"proceed": {"type": "boolean", "title": "Proceed"}},
                        "required": ["proceed"],
                    },
                }}},
                "requestState": "asked-once",
            }, None
        text = f"the client answered: {answered.get('action')}; {json.dumps(answered.get('content'))}"
        if params.get("requestState") != "asked-once":
            text += " (the request state was lost)"
        return {"resultType": "complete", "content": [{"type": "text", "text": text}]}, None
    if method == "tools/call":
        named = meta.get(META, "none")
        return {
            "resultType": "complete",
            "content": [{"type": "text", "text": f"this request named protocol {named}"}],
        }, None
    return None, {"code": -32601, "message": f"unknown method {method}"}


def main():
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        req = json.loads(line)
        if "id" not in req:
            continue
        result, error = answer(req)
        reply = {"jsonrpc": "2.0", "id": req["id"]}
        if error is not None:
            reply["error"] = error
        else:
            reply["result"] = result
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
