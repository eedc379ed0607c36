"""A stdio MCP server in a few lines of Python (no SDK) with one tool,
`touch`, that writes the file named in its arguments and says whether the
write worked: for the tests of a confined server (`sandbox = …`)."""

import json
import sys

for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    method = msg.get("method")
    if method == "initialize":
        result = {"protocolVersion": msg["params"]["protocolVersion"],
                  "capabilities": {"tools": {}}, "serverInfo": {"name": "writer", "version": "1"}}
    elif method == "tools/list":
        schema = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
        result = {"tools": [{"name": "touch", "inputSchema": schema, "annotations": {"readOnlyHint": True}}]}
    elif method == "tools/call":
        path = msg["params"]["arguments"]["path"]
        try:
            with open(path, "w") as f:
                f.write("written\n")
            text = "wrote " + path
        except OSError as e:
            text = "refused: " + e.strerror
        result = {"content": [{"type": "text", "text": text}]}
    else:
        print(json.dumps({"jsonrpc": "2.0", "id": msg["id"],
                          "error": {"code": -32601, "message": "unknown"}}), flush=True)
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)
