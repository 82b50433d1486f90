"""The parent's side of a delegation: what it knows, and what it asks to share.

A :class:`ParentView` is everything a strategy may draw on (the task, the parent's trajectory,
the user's profile, named tool results); a :class:`ManualShare` is the `manual` strategy's list
of what to pass on. Both are plain data, so a strategy is a pure function of them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from ..errors import UserError
from ..messages import AssistantMessage, Message, SystemMessage, ToolMessage, UserMessage

__all__ = [
    "ManualShare",
    "ParentView",
    "Source",
    "flatten_profile",
    "latest_tool_results",
    "message_source",
    "recent_turns",
    "turn_numbers",
]

Source = Literal["main_agent", "user", "tool_result"]

# A user-role message whose text starts with a tag such as `[TOOL_RESULT task_1 (shell)]` or
# `[FROM_CONTACT bob]` carries an event from outside (rendered by `wakeful.events`), not the
# user's own words.
_OUTSIDE_TAG = re.compile(r"^\[[A-Z][A-Z_]+[\] ]")
# Messages the runtime appends for the model's sake, which are no turn of the conversation.
_MACHINE_MARKS = ("note", "tools_loaded")


@dataclass(frozen=True, slots=True)
class ParentView:
    """What the parent knows when it delegates `task`.

    `messages` is its trajectory, `profile` the user's facts (nested keys allowed),
    `tool_results` results by name (see :func:`latest_tool_results` to take them from the
    trajectory).
    """

    task: str
    messages: Sequence[Message] = ()
    profile: Mapping[str, Any] = field(default_factory=dict)
    tool_results: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.task.strip():
            raise UserError(
                "A delegation needs a task: say what the child agent should do, e.g. "
                "'Find the status of order 12345'."
            )

    @classmethod
    def from_trajectory(
        cls,
        task: str,
        messages: Sequence[Message],
        *,
        profile: Mapping[str, Any] | None = None,
    ) -> ParentView:
        """A view whose named tool results are the trajectory's latest successful ones."""
        return cls(
            task=task,
            messages=messages,
            profile=profile or {},
            tool_results=latest_tool_results(messages),
        )


class ManualShare(BaseModel):
    """What the parent names for the `manual` strategy.

    `messages`: indices into its trajectory (negative ones count from the end).
    `tool_results`: names from the view's tool results. `profile_keys`: profile keys, nested
    ones dotted (`address.city`). `notes`: free text the parent writes for the child.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    messages: tuple[int, ...] = ()
    tool_results: tuple[str, ...] = ()
    profile_keys: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.messages or self.tool_results or self.profile_keys or self.notes)

    def describe(self) -> str:
        """The list in words, e.g. "2 messages, 1 note"."""
        parts = [
            (len(self.messages), "message"),
            (len(self.tool_results), "tool result"),
            (len(self.profile_keys), "profile key"),
            (len(self.notes), "note"),
        ]
        return ", ".join(f"{n} {word}{'s' if n != 1 else ''}" for n, word in parts if n)


def latest_tool_results(messages: Sequence[Message]) -> dict[str, str]:
    """The last successful result of each tool in a trajectory, by tool name."""
    results: dict[str, str] = {}
    for message in messages:
        if isinstance(message, ToolMessage) and message.status == "ok":
            results[message.name] = message.content
    return results


def message_source(message: Message) -> Source | None:
    """Who a trajectory message speaks for, as a child is told; None for what is never shared
    as conversation (the system prompt, the runtime's own notes, empty assistant turns)."""
    if isinstance(message, SystemMessage):
        return None
    if isinstance(message, ToolMessage):
        return "tool_result"
    if isinstance(message, AssistantMessage):
        return "main_agent" if message.content.strip() else None
    if message.mark in _MACHINE_MARKS:
        return None
    return "tool_result" if _OUTSIDE_TAG.match(message.content) else "user"


def turn_numbers(messages: Sequence[Message]) -> list[int]:
    """The turn each message belongs to (1-based; 0 before the first user message).

    A turn starts at each user-role message that is not one of the runtime's notes.
    """
    numbers: list[int] = []
    turn = 0
    for message in messages:
        if isinstance(message, UserMessage) and message.mark not in _MACHINE_MARKS:
            turn += 1
        numbers.append(turn)
    return numbers


def recent_turns(messages: Sequence[Message], count: int) -> list[int]:
    """Indices of the messages of the last `count` turns that a child may read as conversation."""
    if count <= 0:
        return []
    numbers = turn_numbers(messages)
    first = max(numbers, default=0) - count + 1
    return [
        i
        for i, message in enumerate(messages)
        if numbers[i] >= max(first, 1)
        and not isinstance(message, ToolMessage)
        and message_source(message) is not None
    ]


def flatten_profile(
    profile: Mapping[str, Any], prefix: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Each leaf of a nested profile with its key path; lists stay whole values."""
    for key, value in profile.items():
        path = (*prefix, str(key))
        if isinstance(value, Mapping) and value:
            yield from flatten_profile(value, path)
        else:
            yield path, value
