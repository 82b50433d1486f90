"""An MCP server whose tools need input from a person before they can finish, in the ways newer
servers ask for it: an input-required result that embeds an elicitation (2026-07-28), and the
URL-elicitation-required error -32042 (2025-11-25)."""

from __future__ import annotations

import mcp_types
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import UrlElicitationRequiredError

BOOKING_QUESTION = "Which date should the table be booked for?"
AUTHORIZE_MESSAGE = "Authorize access to your calendar."
AUTHORIZE_URL = "https://calendar.example/authorize?session=abc"


def build_server() -> MCPServer:
    server = MCPServer("needs_input")

    @server.tool()
    async def book_table(restaurant: str) -> mcp_types.InputRequiredResult:
        """Book a table; asks the user for the date first."""
        question = mcp_types.ElicitRequest(
            params=mcp_types.ElicitRequestFormParams(
                message=BOOKING_QUESTION,
                requested_schema={
                    "type": "object",
                    "properties": {"date": {"type": "string", "format": "date"}},
                    "required": ["date"],
                },
            )
        )
        return mcp_types.InputRequiredResult(
            input_requests={"date": question}, request_state=f"booking:{restaurant}"
        )

    @server.tool()
    async def read_calendar(day: str) -> str:
        """Read the calendar; the user must first authorize access in a browser."""
        raise UrlElicitationRequiredError(
            [
                mcp_types.ElicitRequestURLParams(
                    message=AUTHORIZE_MESSAGE, url=AUTHORIZE_URL, elicitation_id="calendar-1"
                )
            ]
        )

    @server.tool()
    async def slow_report(ctx: Context) -> str | mcp_types.InputRequiredResult:
        """Ask to be polled twice (state only, nothing asked of anyone), then answer."""
        polls = int(ctx.request_state or "0")
        if polls < 2:
            return mcp_types.InputRequiredResult(request_state=str(polls + 1))
        return f"ready after {polls} polls"

    return server


if __name__ == "__main__":
    build_server().run("stdio")
