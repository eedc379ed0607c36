"""An MCP server over streamable HTTP that wants a bearer token, on the
published Python SDK.

Usage: `guarded_server.py PORT TOKEN_ENV`: serves `/mcp` on 127.0.0.1:PORT
and answers 401 to any request whose `Authorization` is not
`Bearer $TOKEN_ENV` (the token is read from that environment variable, so
it is never on a command line). Tools: `whoami` says which `X-Team` header
came with the call; `ask` asks the client a question (elicitation) and
says what the client answered (and the form's values); `deploy`, annotated destructive, counts
how many times it really ran. Started by crates/cli/tests/suite/mcp/.
"""

import os
import sys

import uvicorn
from pydantic import BaseModel
from starlette.responses import PlainTextResponse

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ToolAnnotations

server = MCPServer("guarded")


@server.tool()
def whoami(ctx: Context) -> str:
    """Says which team the request came from."""
    headers = ctx.headers or {}
    return f"authorized; team={headers.get('x-team', '-')}"


class Confirm(BaseModel):
    proceed: bool
    target: str = "staging"


@server.tool()
async def ask(ctx: Context) -> str:
    """Asks the client whether to proceed, and reports the answer."""
    result = await ctx.elicit("Proceed with the deployment?", Confirm)
    if result.action == "accept":
        return (
            f"the client answered: accept; proceed={result.data.proceed}"
            f" target={result.data.target}"
        )
    return f"the client answered: {result.action}"


deployments = 0


@server.tool(annotations=ToolAnnotations(destructiveHint=True))
def deploy() -> str:
    """Deploys (here: counts the deployments)."""
    global deployments
    deployments += 1
    return f"deployed #{deployments}"


class Guard:
    """Refuses HTTP requests without the right bearer token."""

    def __init__(self, app, token: str):
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            given = dict(scope["headers"]).get(b"authorization", b"")
            if given != self.expected:
                print("refused a request without the token", file=sys.stderr, flush=True)
                await PlainTextResponse("unauthorized", status_code=401)(scope, receive, send)
                return
        await self.app(scope, receive, send)


if __name__ == "__main__":
    port = int(sys.argv[1])
    token = os.environ[sys.argv[2]]
    app = Guard(server.streamable_http_app(), token)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="info")
