"""An MCP server (on the published Python SDK) whose tool list changes.

`unlock` adds the tool `secret` and tells the client its tool list changed;
the MCP tests check that keel offers `secret` from the next model call on.
Started over stdio by crates/cli/tests/suite/mcp.rs.
"""

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("changing")


def secret() -> str:
    """A tool that only exists after `unlock`."""
    return "the secret tool ran"


@server.tool()
async def unlock(ctx: Context) -> str:
    """Adds the `secret` tool."""
    server.add_tool(secret, name="secret")
    await ctx.session.send_tool_list_changed()
    return "unlocked"


if __name__ == "__main__":
    server.run()
