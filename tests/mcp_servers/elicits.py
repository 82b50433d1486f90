"""An MCP server whose tools ask the client's user for input during a call (MCP elicitation),
through the SDK's resolvers: embedded in an input-required result on the 2026-07-28 protocol, as
a server-to-client `elicitation/create` request on older ones (`--legacy`)."""

from __future__ import annotations

import sys
from typing import Annotated, Literal

import anyio
from mcp.server.elicitation import AcceptedElicitation, ElicitationResult
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resolve import Elicit, Resolve
from mcp.server.runner import serve_loop
from mcp.server.stdio import stdio_server
from pydantic import BaseModel, Field

BOOKING_QUESTION = "Which date and how many guests should the table be booked for?"
SIGN_IN_MESSAGE = "Sign in to the calendar to let the server read it."
SIGN_IN_URL = "https://calendar.example/sign-in?session=abc"


class Booking(BaseModel):
    date: str = Field(description="The day of the booking", json_schema_extra={"format": "date"})
    guests: int = Field(ge=1, le=12, description="How many people")
    seating: Literal["indoor", "outdoor"] = "indoor"


def ask_booking() -> Elicit[Booking]:
    return Elicit(BOOKING_QUESTION, Booking)


def build_server() -> MCPServer:
    server = MCPServer("elicits")

    @server.tool()
    async def book_table(
        restaurant: str,
        booking: Annotated[ElicitationResult[Booking], Resolve(ask_booking)],
    ) -> str:
        """Book a table at a restaurant; asks the user for the date and the number of guests."""
        if isinstance(booking, AcceptedElicitation):
            b = booking.data
            return f"Booked {restaurant} on {b.date} for {b.guests} ({b.seating})."
        return f"Nothing was booked at {restaurant}: the user's answer was {booking.action}."

    @server.tool()
    async def read_calendar(ctx: Context) -> str:
        """Read the calendar; asks the user to sign in on a web page first (older protocol)."""
        answer = await ctx.elicit_url(SIGN_IN_MESSAGE, SIGN_IN_URL, "sign-in-1")
        return f"sign-in answer: {answer.action}"

    return server


async def serve_legacy(server: MCPServer) -> None:
    lowlevel = server._lowlevel_server
    async with stdio_server() as (read, write), lowlevel.lifespan(lowlevel) as state:
        await serve_loop(
            lowlevel,
            read,
            write,
            lifespan_state=state,
            init_options=lowlevel.create_initialization_options(),
        )


if __name__ == "__main__":
    if "--legacy" in sys.argv:
        anyio.run(serve_legacy, build_server())
    else:
        build_server().run("stdio")
