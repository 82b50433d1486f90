"""`reply_to_user`: the one way an agent talks to its user.

Plain assistant text stays in the trajectory as the agent's own notes; only what goes through
this tool reaches the user, on the session's channel.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from .spec import ToolAnnotations, ToolContext, tool


@tool(
    annotations=ToolAnnotations(read_only=False, destructive=False, idempotent=False),
    examples=(
        {"text": "It is 14:05 in Paris."},
        {"text": "The build finished: 3 tests failed; details below.", "urgency": "high"},
    ),
)
async def reply_to_user(
    ctx: ToolContext,
    text: Annotated[
        str,
        Field(
            min_length=1,
            description="The message for the user, as they should read it, e.g. 'Done: the "
            "report is in report.html.'",
        ),
    ],
    urgency: Annotated[
        Literal["low", "normal", "high"],
        Field(
            description="How pressing the message is; 'high' may notify the user, e.g. 'normal'."
        ),
    ] = "normal",
) -> str:
    """Send a message to the user now, on the channel of this session.

    Use it for every answer, question or report meant for the user: your plain text is NOT shown
    to them. It cannot send files or reach other people. The text is sent byte for byte, never
    reformatted. Returns "sent" once the message was handed to the channel.
    Cost: instant; the result is 4 characters.
    """
    await ctx.services.outbox.send(ctx.session, text, urgency=urgency)
    return "sent"
