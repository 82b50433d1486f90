"""The collaboration tools: a parent's (spawn_subagent, send_message_to_subagent,
cancel_subagent, list_subagents) and a child's (return_result, ask_parent, send_progress).

They reach the runtime's :class:`~wakeful.subagents.manager.Subagents` through the tool
context; a runtime without agent definitions offers none of them.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import Field

from ..collab import CallContextSettings, ManualShare
from ..errors import ToolError
from ..tools.spec import Tool, ToolAnnotations, ToolContext, tool
from .manager import Subagents, describe_ending

__all__ = ["CHILD_TOOLS", "PARENT_TOOLS"]


def _subagents(ctx: ToolContext) -> Subagents:
    found = ctx.services.state.get(Subagents)
    if not isinstance(found, Subagents):
        raise ToolError("This runtime has no subagents: define agents with [[agents]].")
    return found


@tool(
    annotations=ToolAnnotations(read_only=False, destructive=False, idempotent=False),
    examples=(
        {"agent": "researcher", "task": "Find the 2025 revenue of ACME and cite the source."},
        {
            "agent": "reviewer",
            "task": "Review the diff in changes.patch for security problems.",
            "mode": "async",
            "context": "The service handles payments; the diff touches the refund endpoint.",
        },
    ),
)
async def spawn_subagent(
    ctx: ToolContext,
    agent: Annotated[
        str,
        Field(min_length=1, description="The agent to delegate to, by name, e.g. 'researcher'."),
    ],
    task: Annotated[
        str,
        Field(
            min_length=1,
            max_length=20_000,
            description="The task, complete and self-contained: what to do, what to hand back, "
            "e.g. 'List the open invoices of March with their amounts.'",
        ),
    ],
    mode: Annotated[
        Literal["sync", "async", "stream"],
        Field(
            description="'sync' waits for the result (this call returns it); 'async' returns "
            "at once and the result arrives later as a subagent.result event; 'stream' is async "
            "and also sends the child's progress as it goes, e.g. 'sync'."
        ),
    ] = "sync",
    context: Annotated[
        str,
        Field(
            max_length=50_000,
            description="What the child needs to know besides the task, written by you: facts, "
            "constraints, earlier results (never secrets it does not need), e.g. 'The user "
            "prefers morning flights.'",
        ),
    ] = "",
    share_tool_results: Annotated[
        list[str],
        Field(
            max_length=20,
            description="Tools whose latest result in this conversation the child should read, "
            "by tool name, e.g. ['read_file'].",
        ),
    ] = [],  # noqa: B006 - pydantic copies defaults; the schema shows []
    context_strategy: Annotated[
        Literal["minimal", "manual", "automatic", "llm", "adaptive"] | None,
        Field(
            description="What else of this conversation the child reads: 'minimal' the task "
            "only; 'manual' only what you give in context/share_tool_results; 'automatic' the "
            "recent turns and results by rule; 'llm' a summary written for it; 'adaptive' "
            "chosen by the task. Default: the agent's (usually adaptive), e.g. 'minimal'."
        ),
    ] = None,
) -> str:
    """Delegate a task to a subagent: a separate agent with its own role, tools and limits.

    Use it for a well-defined piece of work that needs many steps or a specialist (research,
    a review, a long computation) while you keep the conversation. The child reads only the
    task and the context you give it — nothing else of this conversation — and cannot talk to
    the user. It does not share your tools unless its agent allows them, and it is stopped at
    its limits (time, tokens, depth). Returns the child's result (sync) or its id (async,
    stream).
    Cost: as much as the child's own work; the result is the child's result.
    """
    subagents = _subagents(ctx)
    share = ManualShare(notes=(context,) if context else (), tool_results=tuple(share_tool_results))
    if context and context_strategy not in (None, "manual", "adaptive"):
        # The strategy chooses from the conversation; what the parent wrote goes in any case.
        task, share = f"{task}\n\nContext: {context}", share.model_copy(update={"notes": ()})
    record, chosen = await subagents.spawn(
        ctx.session,
        ctx.call_id,
        agent=agent,
        task=task,
        mode=mode,
        share=None if share.empty else share,
        call=CallContextSettings(strategy=context_strategy) if context_strategy else None,
    )
    how = chosen.summary()
    if mode != "sync":
        return json.dumps(
            {
                "subagent_id": record.id,
                "status": "running",
                "note": "Its result arrives as a subagent.result event"
                + ("; its progress as subagent.progress events." if mode == "stream" else ".")
                + " list_subagents shows how it is doing.",
                "context": how,
            }
        )
    await ctx.progress(None, f"waiting for {record.id} ({agent})")
    ended = await subagents.wait(record.id)
    if ended.status == "done":
        return f"{describe_ending(ended)}\n{how}"
    raise ToolError(f"{describe_ending(ended)}\n{how}")


@tool(
    annotations=ToolAnnotations(read_only=False, destructive=False, idempotent=False),
    examples=({"subagent_id": "sub_1a2b3c4d", "text": "Use the 2024 figures, not 2023."},),
)
async def send_message_to_subagent(
    ctx: ToolContext,
    subagent_id: Annotated[
        str, Field(pattern=r"^sub_[0-9a-f]{8}$", description="e.g. 'sub_1a2b3c4d'.")
    ],
    text: Annotated[
        str,
        Field(
            min_length=1,
            max_length=20_000,
            description="The answer to its question, or more instructions, e.g. 'Yes, include "
            "the drafts.'",
        ),
    ],
) -> str:
    """Send a message to one of your running subagents: the answer to the question it asked
    (a subagent.question event), or a further instruction.

    It cannot reach a subagent that has ended, nor another session's. Returns whether it
    answered a question or was sent as a new message.
    Cost: instant; the result is about 40 characters.
    """
    return await _subagents(ctx).message(ctx.session, subagent_id, text)


@tool(
    annotations=ToolAnnotations(read_only=False, destructive=True, idempotent=True),
    examples=({"subagent_id": "sub_1a2b3c4d", "reason": "the user changed the plan"},),
)
async def cancel_subagent(
    ctx: ToolContext,
    subagent_id: Annotated[
        str, Field(pattern=r"^sub_[0-9a-f]{8}$", description="e.g. 'sub_1a2b3c4d'.")
    ],
    reason: Annotated[
        str, Field(min_length=1, max_length=500, description="Why, e.g. 'no longer needed'.")
    ],
) -> str:
    """Cancel one of your subagents: it stops at once, with its tools, its background tasks
    and its own subagents, and returns no result.

    Use it when its work is no longer needed or it is going wrong. A subagent that has already
    ended is left as it is. Returns what was cancelled.
    Cost: instant; the result is about 40 characters.
    """
    return await _subagents(ctx).cancel(subagent_id, reason, parent=ctx.session)


@tool(annotations=ToolAnnotations(read_only=True, destructive=False, idempotent=True))
async def list_subagents(ctx: ToolContext) -> str:
    """List the subagents you spawned: id, agent, mode, status, tokens used so far, its task,
    its last message, the question it waits to have answered (answer it with
    send_message_to_subagent), and its result or error once it ended.

    Use it to see how delegated work is going before waiting or spawning more. It shows only
    your own subagents, not theirs. Returns a JSON list, oldest first.
    Cost: instant; about 300 characters per subagent.
    """
    return json.dumps(await _subagents(ctx).listing(ctx.session), ensure_ascii=False)


@tool(
    annotations=ToolAnnotations(read_only=False, destructive=False, idempotent=False),
    examples=({"result": {"summary": "Revenue 2025: 4.2 M EUR", "source": "annual report"}},),
)
async def return_result(
    ctx: ToolContext,
    result: Annotated[
        Any,
        Field(
            description="Your result for your parent: a JSON value matching your output schema "
            "when you have one, otherwise a text or any JSON value, e.g. {'summary': '…'}."
        ),
    ],
) -> str:
    """Hand your result back to your parent and end your task (subagents only).

    Call it once, when the task is done (or cannot be done: say why in the result). A result
    that does not match your output schema is refused with the reason; fix it and call again.
    Returns "returned" — then stop.
    Cost: instant; the result is about 40 characters.
    """
    return await _subagents(ctx).return_result(ctx.session, result)


@tool(
    annotations=ToolAnnotations(read_only=True, destructive=False, idempotent=False),
    examples=({"question": "Should I include cancelled orders?"},),
)
async def ask_parent(
    ctx: ToolContext,
    question: Annotated[
        str,
        Field(
            min_length=1,
            max_length=5_000,
            description="One clear question, with the options when there are some, e.g. "
            "'Include cancelled orders (yes/no)?'",
        ),
    ],
) -> str:
    """Ask your parent agent a question and wait for the answer (subagents only).

    Use it when the task is ambiguous or needs a decision outside your role, instead of
    guessing. It cannot reach the user. Returns the answer, or after the answer timeout a note
    to go on with the most conservative choice.
    Cost: as long as your parent takes to answer; the result is the answer.
    """
    return await _subagents(ctx).ask(ctx.session, question)


@tool(
    annotations=ToolAnnotations(read_only=True, destructive=False, idempotent=False),
    examples=({"text": "Found 3 of 5 invoices; the other two are in the archive."},),
)
async def send_progress(
    ctx: ToolContext,
    text: Annotated[
        str,
        Field(
            min_length=1,
            max_length=5_000,
            description="An intermediate finding, e.g. 'Step 1 of 3 done.'",
        ),
    ],
) -> str:
    """Report progress to your parent while you work (subagents only).

    A parent that spawned you in 'stream' mode gets each report as it comes; otherwise it sees
    the last one in list_subagents. It does not end your task (return_result does). Returns
    where the report went.
    Cost: instant; the result is about 40 characters.
    """
    return await _subagents(ctx).progress(ctx.session, text)


PARENT_TOOLS: tuple[Tool, ...] = (
    spawn_subagent,
    send_message_to_subagent,
    cancel_subagent,
    list_subagents,
)
CHILD_TOOLS: tuple[Tool, ...] = (return_result, ask_parent, send_progress)
