"""`list_user_messages`: what the agent sent the user, and whether they have read it yet."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from ...tools.spec import ToolAnnotations, ToolContext, tool

__all__ = ["list_user_messages"]

FIRST_LINE_CHARS = 100


@tool(
    annotations=ToolAnnotations(read_only=True, destructive=False, idempotent=True),
    examples=({}, {"unread_only": False, "limit": 5}),
)
async def list_user_messages(
    ctx: ToolContext,
    unread_only: Annotated[
        bool,
        Field(description="Only the messages the user has not read yet, e.g. true."),
    ] = True,
    limit: Annotated[
        int,
        Field(ge=1, le=100, description="How many messages at most, newest first, e.g. 20."),
    ] = 20,
) -> str:
    """List the messages this session sent the user, newest first, with their read state.

    Use it before repeating yourself or sending a reminder: a message still unread need not be
    sent again. It cannot show what the user wrote, and it does not mark anything read. Returns
    one line per message: id, time sent, urgency, kind, read state and its first line.
    Cost: a few milliseconds; about 150 characters per message.
    """
    messages = await ctx.services.outbox.messages.list(
        ctx.session, unread_only=unread_only, limit=limit
    )
    unread = await ctx.services.outbox.messages.unread_count(ctx.session)
    if not messages:
        return (
            "No unread messages: the user has read everything you sent."
            if unread_only
            else "You have not sent the user any message in this session."
        )
    lines = [f"{unread} unread message(s); newest first:"]
    for message in messages:
        state = f"read {message.read_at} on {message.read_on}" if message.read else "unread"
        first = message.first_line
        if len(first) > FIRST_LINE_CHARS:
            first = first[: FIRST_LINE_CHARS - 1] + "…"
        lines.append(
            f"{message.id} {message.created_at} {message.urgency} {message.kind} {state}: {first}"
        )
    return "\n".join(lines)
