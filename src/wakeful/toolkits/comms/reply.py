"""`reply_to_user`: the one way an agent talks to its user.

Plain assistant text stays in the trajectory as the agent's own notes; only what goes through
this tool reaches the user, on the session's channel, as a stored message (see
:class:`wakeful.services.Outbox`) with workspace files attached by reference.

With a store, each delivery is keyed by its call (session, call id and what is sent): the call
claims the key in the store (the idempotency keys' table) before sending and records the outcome
after, so a call run again never sends twice, and a call that a crash cut off before its result
was recorded is answered at recovery with what happened to its message
(:func:`recovered_replies`) instead of a bare "lost" that would invite the model to send it
again. :func:`deliver_once` gives the card and notification tools the same guarantee.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Final, Literal

import anyio
from pydantic import Field

from ...core.records import OutboundMessage
from ...messages import AssistantMessage, ToolMessage
from ...safety.idempotency import arguments_fingerprint
from ...tools.spec import ToolAnnotations, ToolContext, tool
from .attachments import workspace_attachments

if TYPE_CHECKING:
    from ...agent.trajectory import Trajectory
    from ...core.runtime_store import RuntimeStore
    from ...store.reader import IdempotencyEntry

REPLY_TOOL: Final = "reply_to_user"
SENT: Final = "sent"


@tool(
    annotations=ToolAnnotations(read_only=False, destructive=False, idempotent=False),
    examples=(
        {"text": "It is 14:05 in Paris."},
        {"text": "The build finished: 3 tests failed; details below.", "urgency": "high"},
        {"text": "Here is the report.", "attachments": ["reports/summary.pdf"]},
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
    attachments: Annotated[
        list[str],
        Field(
            max_length=20,
            description="Workspace files to send with the message, by path; the user gets each "
            "file (name, size, type), its content is not read into this conversation, e.g. "
            "['reports/summary.pdf'].",
        ),
    ] = [],  # noqa: B006 - pydantic copies defaults; the schema shows []
) -> str:
    """Send a message to the user now, on the channel of this session.

    Use it for every answer, question or report meant for the user: your plain text is NOT shown
    to them. It cannot reach other people, and it does not attach files from outside the
    workspace or over the size limit (50 MB unless configured). The text is sent byte for byte,
    never reformatted; files travel by reference. Returns "sent" once the message was handed to
    the channel.
    Cost: instant; the result is 4 characters.
    """
    files = await workspace_attachments(ctx, attachments)
    arguments: dict[str, object] = {"text": text, "urgency": urgency}
    if attachments:
        arguments["attachments"] = list(attachments)

    async def send() -> str:
        message = await ctx.services.outbox.send(
            ctx.session, text, urgency=urgency, attachments=files
        )
        return with_failures(SENT, message)

    return await deliver_once(ctx, REPLY_TOOL, arguments, send)


def with_failures(result: str, message: OutboundMessage) -> str:
    """`result`, followed by what failed when a channel did not take the message (the agent
    is told, so it does not take silence for delivery)."""
    failed = [d for d in message.deliveries if d.state == "failed"]
    if not failed:
        return result
    reached = [d.channel for d in message.deliveries if d.state != "failed"]
    what = "; ".join(f"{d.channel} failed ({d.error})" for d in failed)
    if reached:
        return f"{result}, but {what}; it reached {', '.join(reached)}"
    return (
        f"not delivered: {what}. The message is stored and the user sees it when they open "
        "the console; try another way only if it cannot wait."
    )


async def deliver_once(
    ctx: ToolContext,
    tool_name: str,
    arguments: dict[str, object],
    send: Callable[[], Awaitable[str]],
) -> str:
    """Run `send` (one delivery to the user) at most once per call: with a store, the call's
    key is claimed before sending and its outcome recorded after, so a call run again (or
    recovered after a crash) says what happened instead of sending twice."""
    store = ctx.services.store
    if store is None:
        return await send()
    key, fingerprint = _delivery_key(tool_name, ctx.session, ctx.call_id, arguments)
    earlier = await store.claim_idempotency_key(tool_name, key, fingerprint, datetime.now(UTC))
    if earlier is not None:
        return _not_sent_again(earlier)
    try:
        result = await send()
    except BaseException as exc:
        with anyio.CancelScope(shield=True):
            await store.finish_idempotency_key(
                tool_name, key, datetime.now(UTC), error=type(exc).__name__
            )
        raise
    with anyio.CancelScope(shield=True):
        await store.finish_idempotency_key(tool_name, key, datetime.now(UTC), result=result)
    return result


def _delivery_key(
    tool_name: str, session: str, call_id: str, arguments: dict[str, object]
) -> tuple[str, str]:
    """The store key of one delivery, and the fingerprint of its arguments.

    The call id alone is not enough: some providers reuse ids such as "call_0" from turn to
    turn, and two different messages must never be taken for one. So the key also holds the
    session and a fingerprint of what is sent.
    """
    fingerprint = arguments_fingerprint(tool_name, arguments)
    return f"{session}/{call_id}/{fingerprint[:16]}", fingerprint


def _not_sent_again(entry: IdempotencyEntry) -> str:
    """The result of a call whose id already sent (or began sending) this message."""
    if entry.state == "done":
        return (
            f"{entry_result(entry)} (already delivered by this call at {entry.started_at}; "
            "not sent again)"
        )
    return (
        f"not sent again: this call began sending this message at {entry.started_at} and was "
        "cut off, so the user may already have it. Send it again only if the user says they did "
        "not get it."
    )


def entry_result(entry: IdempotencyEntry) -> str:
    """What the call that made `entry` returned ("sent" for reply_to_user)."""
    return entry.result or SENT


async def recovered_replies(store: RuntimeStore, trajectory: Trajectory) -> list[ToolMessage]:
    """Results for the `reply_to_user` calls a crash left unanswered at the end of
    `trajectory` whose delivery the store knows about: "sent" when the message went out and
    only its result was lost; a "lost" result saying it may have reached the user when the
    delivery was cut off. Calls that never began sending are left out (the usual "lost" result
    fits them)."""
    open_ids = {call_id for call_id, name in trajectory.unanswered_calls() if name == REPLY_TOOL}
    last = next((m for m in reversed(trajectory.messages) if isinstance(m, AssistantMessage)), None)
    if not open_ids or last is None:
        return []
    results = []
    for call in last.tool_calls:
        if call.id not in open_ids:
            continue
        try:
            arguments = json.loads(call.arguments)
        except json.JSONDecodeError:
            continue
        if not isinstance(arguments, dict) or not isinstance(arguments.get("text"), str):
            continue
        sent: dict[str, object] = {
            "text": arguments["text"],
            "urgency": str(arguments.get("urgency", "normal")),
        }
        if arguments.get("attachments"):
            sent["attachments"] = arguments["attachments"]
        key, _ = _delivery_key(REPLY_TOOL, trajectory.session, call.id, sent)
        entry = await store.idempotency_entry(REPLY_TOOL, key)
        if entry is None:
            continue
        if entry.state == "done":
            results.append(ToolMessage(tool_call_id=call.id, name=call.name, content=SENT))
            continue
        results.append(
            ToolMessage(
                tool_call_id=call.id,
                name=call.name,
                content=(
                    "The runtime stopped while this message was being delivered; it may have "
                    "reached the user. It was not sent again: send it again only if the user "
                    "says they did not get it."
                ),
                status="lost",
            )
        )
    return results
