"""A session's trajectory: the message list the model reads, persisted as it grows.

The session appends through `Trajectory.append` only, which keeps the in-memory list and the
store in step. `repair` makes a trajectory reloaded after a crash well-formed again: a tool call
whose result was never recorded gets a result saying it was lost.

Every message is made storable before it is appended: text with lone UTF-16 surrogates (which
UTF-8, and so the store, cannot hold) is repaired with U+FFFD, and the repair is noted in the
message (`provider_data["wakeful"]` of an assistant message) and in the log.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

from pydantic_core import PydanticSerializationError

from ..messages import (
    MESSAGE_ADAPTER,
    AssistantMessage,
    Message,
    SystemMessage,
    ToolMessage,
    UserMessage,
)
from ..storable_text import repair_strings

log = logging.getLogger(__name__)


class TrajectoryStore(Protocol):
    async def append_messages(self, session: str, messages: Sequence[Message]) -> None: ...

    async def mark_events(self, ids: Sequence[str], status: str) -> None: ...


class Trajectory:
    def __init__(
        self,
        session: str,
        messages: Sequence[Message] = (),
        *,
        store: TrajectoryStore | None = None,
    ) -> None:
        self.session = session
        self.messages: list[Message] = list(messages)
        self._store = store

    def __len__(self) -> int:
        return len(self.messages)

    async def append(self, *messages: Message) -> tuple[Message, ...]:
        """Append and persist. When the store fails, the messages are taken back out of the
        list too, so memory and store never disagree; a cancellation keeps them (the write may
        have happened, and callers rely on an append being visible at once). When the store's
        disk is full, the store holds the write and this returns as if it were stored: the
        messages stay here, and the store writes them, in order, once there is room again (the
        session goes on in memory meanwhile). Returns the messages as stored."""
        messages = tuple(storable(m, session=self.session) for m in messages)
        start = len(self.messages)
        self.messages.extend(messages)
        if self._store is None:
            return messages
        try:
            await self._store.append_messages(self.session, messages)
        except Exception:
            if self.messages[start : start + len(messages)] == list(messages):
                del self.messages[start : start + len(messages)]
            raise
        return messages

    async def consume_events(self, ids: Sequence[str]) -> None:
        if self._store is not None and ids:
            await self._store.mark_events(ids, "consumed")

    def consumed_event_ids(self) -> set[str]:
        return {
            event_id
            for m in self.messages
            if isinstance(m, UserMessage)
            for event_id in m.event_ids
        }

    def unanswered_calls(self) -> list[tuple[str, str]]:
        """(call id, tool name) of calls at the end of the trajectory that have no result."""
        for index in range(len(self.messages) - 1, -1, -1):
            message = self.messages[index]
            if isinstance(message, AssistantMessage):
                answered = {
                    m.tool_call_id for m in self.messages[index + 1 :] if isinstance(m, ToolMessage)
                }
                return [(c.id, c.name) for c in message.tool_calls if c.id not in answered]
            if not isinstance(message, ToolMessage):
                return []
        return []

    async def repair(self, why: str = "The runtime stopped") -> list[str]:
        """Answer calls left open by a crash (or a session's fault, named by `why`); returns the
        ids of the calls it answered."""
        open_calls = self.unanswered_calls()
        if open_calls:
            await self.append(
                *(
                    ToolMessage(
                        tool_call_id=call_id,
                        name=name,
                        content=(
                            f"{why} while {name} was running; its result was lost. Check "
                            "whether it took effect before calling it again."
                        ),
                        status="lost",
                    )
                    for call_id, name in open_calls
                )
            )
        return [call_id for call_id, _ in open_calls]

    def task_summary(self, limit: int = 300) -> str:
        """The latest thing the user asked, as a short summary of the main task."""
        for message in reversed(self.messages):
            if isinstance(message, UserMessage) and message.mark in ("event", "events", None):
                text = message.content.strip()
                return text if len(text) <= limit else text[:limit] + "…"
        return "(no task yet)"

    @property
    def needs_model(self) -> bool:
        """Whether the last message calls for a model turn (an event or a tool result)."""
        if not self.messages:
            return False
        last = self.messages[-1]
        if isinstance(last, SystemMessage | AssistantMessage):
            return False
        if isinstance(last, UserMessage):
            return last.mark != "parallel"
        return True


def storable(message: Message, *, session: str = "") -> Message:
    """`message`, or a copy whose text the store can encode (lone surrogates → U+FFFD)."""
    try:
        message.model_dump_json()
    except PydanticSerializationError:
        pass
    else:
        return message
    data, count = repair_strings(message.model_dump())
    if isinstance(message, AssistantMessage):
        note = f"replaced {count} text(s) holding lone UTF-16 surrogates with U+FFFD"
        data["provider_data"] = {**data.get("provider_data", {}), "wakeful": {"repaired": note}}
    repaired = MESSAGE_ADAPTER.validate_python(data)
    log.warning(
        "session %s: a %s message held text UTF-8 cannot encode (lone surrogates); %d string(s) "
        "repaired with U+FFFD before storing it",
        session,
        message.role,
        count,
    )
    return repaired
