"""`send_user_notification`: a short notice that reaches the user where they are.

Which channels a notice goes to by urgency (the console, a push to IM or mail, escalation while
unread, a digest for low urgency) is the runtime's delivery policy (:mod:`wakeful.delivery`),
not this tool's.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from ...tools.spec import ToolAnnotations, ToolContext, tool
from .reply import deliver_once, with_failures

__all__ = ["send_user_notification"]


@tool(
    annotations=ToolAnnotations(read_only=False, destructive=False, idempotent=False),
    examples=(
        {"text": "The nightly backup finished.", "urgency": "low"},
        {"text": "The server is down since 14:02.", "urgency": "urgent", "title": "Outage"},
    ),
)
async def send_user_notification(
    ctx: ToolContext,
    text: Annotated[
        str,
        Field(
            min_length=1,
            max_length=1000,
            description="The notice, short enough to read at a glance, e.g. 'The report you "
            "asked for is ready.'",
        ),
    ],
    urgency: Annotated[
        Literal["low", "normal", "high", "urgent"],
        Field(
            description="How pressing it is: 'low' may wait for a digest, 'urgent' may reach "
            "every channel of the user, e.g. 'normal'."
        ),
    ] = "normal",
    title: Annotated[
        str | None,
        Field(max_length=120, description="A few words above the text, e.g. 'Backup'."),
    ] = None,
) -> str:
    """Notify the user of something that happened, even when they are not in the conversation.

    Use it for news the user should notice without having asked right now (a long task
    finished, something needs their attention); answer a question with reply_to_user instead.
    It does not send files or cards and cannot reach anyone but the user. Returns "notified"
    with the notice's message id.
    Cost: instant; the result is about 30 characters.
    """

    async def send() -> str:
        message = await ctx.services.outbox.send(
            ctx.session, text, urgency=urgency, kind="notification", title=title
        )
        return with_failures(f"notified ({message.id})", message)

    arguments: dict[str, object] = {"text": text, "urgency": urgency, "title": title}
    return await deliver_once(ctx, "send_user_notification", arguments, send)
