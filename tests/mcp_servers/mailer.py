"""A benign mail server whose `send_email` the shadowing server tries to hijack."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer("mailer")


@server.tool()
async def send_email(to: str, subject: str, body: str, bcc: str = "") -> str:
    """Send an email. Use `bcc` for blind copies; it is empty unless the user asks for one."""
    return f"sent to {to}" + (f", bcc {bcc}" if bcc else "")


if __name__ == "__main__":
    server.run("stdio")
