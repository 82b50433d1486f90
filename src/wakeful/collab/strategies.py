"""The three rule-based strategies: what each shares from the parent's view.

Each returns the candidate blocks for :func:`~wakeful.collab.child_context.assemble` and notes
what it withheld in the record; none of them needs a model. Private fields are withheld at their
source here, and the assembly scrubs the final text whatever was picked.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from ..errors import UserError
from ..messages import Message, ToolMessage
from .child_context import Candidate, ContextBlock, ContextRecord, trim_to_tokens
from .parent_view import (
    ManualShare,
    ParentView,
    flatten_profile,
    message_source,
    recent_turns,
    turn_numbers,
)
from .redaction import Redactor
from .settings import AutomaticSettings

__all__ = [
    "PRIORITY_NOTE",
    "PRIORITY_PROFILE",
    "PRIORITY_TOOL_RESULT",
    "PRIORITY_TURN",
    "automatic_candidates",
    "manual_candidates",
    "profile_candidate",
]

# What stays when the budget is short, most important first: what the parent wrote for the
# child, the user's profile, tool results, then conversation (newest turns kept longest).
PRIORITY_NOTE: Final = 40.0
PRIORITY_PROFILE: Final = 30.0
PRIORITY_TOOL_RESULT: Final = 20.0
PRIORITY_TURN: Final = 10.0

_EVENT_TOOL: Final = re.compile(r"^\[TOOL_(?:RESULT|PROGRESS)[^\]\n]*\(([^()\]\n]+)\)\]")
_ROLE_WORDS: Final = {"main_agent": "main agent", "user": "user", "tool_result": "outside data"}


def _value_text(value: Any) -> str:
    if isinstance(value, list | tuple):
        return ", ".join(map(str, value))
    return str(value)


def profile_candidate(
    profile: Mapping[str, Any],
    redactor: Redactor,
    record: ContextRecord,
    *,
    keys: tuple[tuple[str, ...], ...] | None = None,
    item_tokens: int | None = None,
) -> Candidate | None:
    """The user's profile as one `[FROM_USER]` block of `- key: value` lines, private fields
    withheld; only the key paths in `keys` when given (a prefix shares everything below it)."""
    lines: list[str] = []
    withheld: list[str] = []
    for path, value in flatten_profile(profile):
        if keys is not None and not any(path[: len(key)] == key for key in keys):
            continue
        field = redactor.private_field(path)
        if field is not None:
            withheld.append(field)
            continue
        line = f"- {'.'.join(path)}: {_value_text(value)}"
        lines.append(trim_to_tokens(line, item_tokens) if item_tokens else line)
    record.withheld += [f"{field} (private)" for field in dict.fromkeys(withheld)]
    if not lines:
        return None
    block = ContextBlock(source="user", label="user profile", text="\n".join(lines))
    return Candidate(
        block, PRIORITY_PROFILE, f"profile ({len(lines)} fact{'s' if len(lines) != 1 else ''})"
    )


def _tool_candidate(
    name: str, text: str, redactor: Redactor, record: ContextRecord, item_tokens: int | None
) -> Candidate | None:
    if redactor.private_tool(name):
        record.withheld.append(f"tool.{name} (private)")
        return None
    body = trim_to_tokens(text, item_tokens) if item_tokens else text
    block = ContextBlock(source="tool_result", label=name, text=body)
    return Candidate(block, PRIORITY_TOOL_RESULT, f"tool result {name}")


def _tool_of(message: Message) -> str | None:
    """The tool a message carries the output of: a tool result, or a background result event
    (`[TOOL_RESULT task_1 (shell)] …`)."""
    if isinstance(message, ToolMessage):
        return message.name
    found = _EVENT_TOOL.match(message.content) if message.role == "user" else None
    return found.group(1) if found else None


def _message_candidate(
    index: int,
    message: Message,
    turn: int,
    last_turn: int,
    item_tokens: int | None,
    redactor: Redactor,
    record: ContextRecord,
) -> Candidate | None:
    source = message_source(message)
    if source is None:
        return None
    tool = _tool_of(message)
    if tool is not None and redactor.private_tool(tool):
        record.withheld.append(f"message {index} (output of private tool {tool})")
        return None
    label = (
        f"{message.name} result (turn {turn})"
        if isinstance(message, ToolMessage)
        else f"{_ROLE_WORDS[source]} (turn {turn})"
    )
    text = trim_to_tokens(message.content, item_tokens) if item_tokens else message.content
    block = ContextBlock(source=source, label=label, text=text)
    # Newer turns matter more: the last turn just under a tool result's priority.
    priority = PRIORITY_TURN + (turn / last_turn if last_turn else 0.0) * 5
    return Candidate(block, priority, f"message {index}")


def automatic_candidates(
    view: ParentView, settings: AutomaticSettings, redactor: Redactor, record: ContextRecord
) -> list[Candidate]:
    """The chapter's rule: the user's profile + the last N turns + named tool results, each item
    cut to `item_tokens`."""
    candidates: list[Candidate] = []
    if settings.profile:
        profile = profile_candidate(
            view.profile, redactor, record, item_tokens=settings.item_tokens
        )
        if profile is not None:
            candidates.append(profile)
    names = list(view.tool_results) if settings.tool_results is None else settings.tool_results
    for name in names:
        if name not in view.tool_results:
            record.withheld.append(f"tool result {name} (not in the parent's results)")
            continue
        tool = _tool_candidate(
            name, view.tool_results[name], redactor, record, settings.item_tokens
        )
        if tool is not None:
            candidates.append(tool)
    numbers = turn_numbers(view.messages)
    last_turn = max(numbers, default=0)
    for index in recent_turns(view.messages, settings.last_turns):
        message = view.messages[index]
        turn = _message_candidate(
            index,
            message,
            numbers[index],
            last_turn,
            settings.item_tokens,
            redactor,
            record,
        )
        if turn is not None:
            candidates.append(turn)
    return candidates


def manual_candidates(
    view: ParentView, share: ManualShare, redactor: Redactor, record: ContextRecord
) -> list[Candidate]:
    """Exactly what the parent named; a name or index that does not exist is an error that says
    what does, and a private item is withheld (and said so in the record)."""
    candidates: list[Candidate] = []
    for note in share.notes:
        block = ContextBlock(source="main_agent", label="note", text=note)
        candidates.append(Candidate(block, PRIORITY_NOTE, "note"))
    if share.profile_keys:
        known = {path for path, _ in flatten_profile(view.profile)}
        keys = tuple(tuple(key.split(".")) for key in share.profile_keys)
        for key, path_wanted in zip(share.profile_keys, keys, strict=True):
            if not any(path[: len(path_wanted)] == path_wanted for path in known):
                keys_text = ", ".join(sorted(".".join(path) for path in known))
                raise UserError(
                    f"The profile has no key {key!r} to share. Its keys are: "
                    f"{keys_text or 'none (the profile is empty)'}."
                )
        profile = profile_candidate(view.profile, redactor, record, keys=keys)
        if profile is not None:
            candidates.append(profile)
    for name in share.tool_results:
        if name not in view.tool_results:
            names = ", ".join(sorted(view.tool_results)) or "none"
            raise UserError(
                f"There is no tool result named {name!r} to share. The parent's results are: "
                f"{names}."
            )
        tool = _tool_candidate(name, view.tool_results[name], redactor, record, None)
        if tool is not None:
            candidates.append(tool)
    numbers = turn_numbers(view.messages)
    last_turn = max(numbers, default=0)
    count = len(view.messages)
    for wanted in dict.fromkeys(share.messages):
        if not -count <= wanted < count:
            raise UserError(
                f"Message index {wanted} is outside the parent's trajectory, which has {count} "
                f"messages (indices 0 to {count - 1}, or -1 to -{count} from the end)."
                if count
                else f"Message index {wanted} cannot be shared: the parent's trajectory is empty."
            )
        index = wanted % count
        message = view.messages[index]
        withheld = len(record.withheld)
        candidate = _message_candidate(
            index, message, numbers[index], last_turn, None, redactor, record
        )
        if candidate is None:
            if len(record.withheld) == withheld:
                reason = (
                    "the system prompt is never shared"
                    if message.role == "system"
                    else "it has no text to share"
                )
                record.withheld.append(f"message {index} ({reason})")
            continue
        # The parent picked it: it counts as much as a note of its own.
        candidates.append(
            Candidate(candidate.block, PRIORITY_NOTE - 1 + index / count, candidate.name)
        )
    return candidates
