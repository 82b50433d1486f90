"""Model output the session cannot use as it came: repaired, or refused as a tool error.

A model (or an SDK) can emit what would break the loop further on: tool arguments nested so deep
that every JSON parser after it recurses out of stack, two calls of one turn under the same id
(the pairing of calls and results would no longer be one to one), or text with lone surrogates
(repaired when the trajectory stores it, see `Trajectory.append`). Here a finished turn is made
safe before it is recorded: ids are made unique, and a call whose arguments are too deep keeps
its id and name but not its arguments, and is answered with an error instead of being run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from ..messages import MAX_ARGUMENT_DEPTH, AssistantMessage, ToolCall, json_depth

REFUSED_ARGUMENTS = json.dumps({"refused": "arguments nested too deep; not kept"})


def too_deep(call: ToolCall) -> str | None:
    """Why the call's arguments cannot be used (the error the model reads), or None."""
    depth = json_depth(call.arguments)
    if depth <= MAX_ARGUMENT_DEPTH:
        return None
    return (
        f"Not run: the arguments of {call.name} are nested {depth} levels deep, more than the "
        f"{MAX_ARGUMENT_DEPTH} allowed, so they were not kept. Call it again with flatter "
        "arguments, as its schema describes."
    )


def safe_call(call: ToolCall) -> ToolCall:
    """`call`, or, when its arguments are too deep, the same call with placeholder arguments
    (what the safety checks and the observers see while the model still streams)."""
    if too_deep(call) is None:
        return call
    return call.model_copy(update={"arguments": REFUSED_ARGUMENTS})


@dataclass
class RepairedTurn:
    message: AssistantMessage
    # Call id → the error result that answers it instead of running it.
    refused: dict[str, str] = field(default_factory=dict)
    # What was changed, for the log and the message's own record.
    notes: list[str] = field(default_factory=list)


def repair_turn(message: AssistantMessage) -> RepairedTurn:
    """The finished turn made safe to record and run (see the module docstring)."""
    calls: list[ToolCall] = []
    refused: dict[str, str] = {}
    notes: list[str] = []
    seen: set[str] = set()
    for index, call in enumerate(message.tool_calls):
        update: dict[str, str] = {}
        if not call.id or call.id in seen:
            new_id = _unique_id(call.id or "call", index, seen, message.tool_calls)
            notes.append(f"call {index + 1} ({call.name}) reused id {call.id!r}; now {new_id!r}")
            update["id"] = new_id
        problem = too_deep(call)
        if problem is not None:
            notes.append(f"call {index + 1} ({call.name}) had arguments nested too deep")
            update["arguments"] = REFUSED_ARGUMENTS
        fixed = call.model_copy(update=update) if update else call
        if problem is not None:
            refused[fixed.id] = problem
        seen.add(fixed.id)
        calls.append(fixed)
    if not notes:
        return RepairedTurn(message)
    provider_data = {
        **message.provider_data,
        "wakeful": {**message.provider_data.get("wakeful", {}), "repaired_calls": notes},
    }
    repaired = message.model_copy(update={"tool_calls": calls, "provider_data": provider_data})
    return RepairedTurn(repaired, refused, notes)


def _unique_id(base: str, index: int, seen: set[str], calls: list[ToolCall]) -> str:
    taken = seen | {c.id for c in calls}
    candidate = f"{base}_{index + 1}"
    suffix = 1
    while candidate in taken:
        suffix += 1
        candidate = f"{base}_{index + 1}_{suffix}"
    return candidate
