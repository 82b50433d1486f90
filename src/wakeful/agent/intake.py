"""A session's intake: what reached it and waits for the next safe point (rule 5).

Events that wake the session wait in `pending`; those that only ride along (progress updates)
wait in `passive`, the latest per task, and are never the reason to wake it. At a safe point the
session takes a batch (:meth:`Intake.take_batch`): events that interrupted first, then the oldest
others, at most a configured number; the rest wait for the next one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import anyio

from ..events import TOOL_RESULT, Event
from ..messages import UserMessage, image_attachments
from .batch import Note, ParallelExchange, PendingItem, render_batch, split_batch
from .router import Decision, Strategy

BatchMark = Literal["events", "parallel", "event", "note"]


@dataclass(frozen=True)
class Batch:
    """Pending items taken at one safe point, and the ids the store marks consumed with them."""

    items: list[PendingItem]
    waiting: list[PendingItem]
    superseded: list[str]

    @property
    def event_ids(self) -> list[str]:
        return [
            item.id if isinstance(item, Event) else item.event.id
            for item in self.items
            if isinstance(item, Event | ParallelExchange)
        ]

    @property
    def needs_model(self) -> bool:
        """Whether the model must answer (a parallel exchange was answered already)."""
        return any(not isinstance(item, ParallelExchange) for item in self.items)

    def message(self, status: str) -> UserMessage:
        """The batch as one user message, closed by the status block when there is one."""
        text = render_batch(self.items, waiting=self.waiting)
        if status:
            text = f"{text}\n{status}"
        if len(self.items) > 1:
            mark: BatchMark = "events"
        elif isinstance(self.items[0], ParallelExchange):
            mark = "parallel"
        elif isinstance(self.items[0], Note):
            mark = "note"
        else:
            mark = "event"
        # Images that background tools returned ride along (other event sources carry none).
        attachments = [
            image
            for item in self.items
            if isinstance(item, Event) and item.kind == TOOL_RESULT
            for image in image_attachments(item.context)
        ]
        return UserMessage(
            content=text, event_ids=self.event_ids, mark=mark, attachments=attachments
        )


class Intake:
    """The pending queue of one session, and the signal that wakes its loop."""

    def __init__(self) -> None:
        self.pending: list[PendingItem] = []
        # Events that ride along with the next batch without waking the session (progress),
        # the latest per task; and the ids of those a newer one replaced.
        self.passive: dict[str, Event] = {}
        self._superseded: list[str] = []
        self._interrupting: set[str] = set()  # ids of pending events that interrupted
        self._wake = anyio.Event()

    def add(self, event: Event, decision: Decision) -> None:
        """Queue an event as the router decided (its interrupt is the session's to carry out)."""
        task_id = event.context.get("task_id")
        key = task_id if isinstance(task_id, str) else event.id
        if not decision.wake:
            self._supersede(key)
            self.passive[key] = event
            return
        if event.kind == TOOL_RESULT:
            self._supersede(key)  # the result says more than any progress update
        self.pending.append(event)
        if decision.strategy is Strategy.CANCEL:
            self._interrupting.add(event.id)  # goes in the next batch, however long the queue
        self._wake.set()

    def add_item(self, item: PendingItem) -> None:
        """Queue something the session itself has to say (a note, a parallel exchange)."""
        self.pending.append(item)
        self._wake.set()

    async def wait(self) -> None:
        """Until something that wakes the session arrives (at once if it already has)."""
        await self._wake.wait()
        self._wake = anyio.Event()

    def take_batch(self, limit: int) -> Batch:
        """The next batch (see `split_batch`): events that interrupted always go, then the
        oldest others, at most `limit` items; the rest wait for the next safe point."""
        riding = list(self.passive.values())
        items, self.pending, left_riding = split_batch(
            self.pending, riding, max(1, limit), first=lambda e: e.id in self._interrupting
        )
        self._interrupting -= {item.id for item in items if isinstance(item, Event)}
        left = {id(event) for event in left_riding}
        self.passive = {k: e for k, e in self.passive.items() if id(e) in left}
        superseded, self._superseded = self._superseded, []
        return Batch(items, [*self.passive.values(), *self.pending], superseded)

    def _supersede(self, key: str) -> None:
        old = self.passive.pop(key, None)
        if old is not None:
            self._superseded.append(old.id)
