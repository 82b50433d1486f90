"""How an event enters the runtime: made storable (within the size cap), stored, then handed to
its session; a user's answer to an open approval request is stored and answers it instead.

On a full disk a new event is refused (StoreFull), since its sender can send it again; an event
about work already done (a background task's result) is held in memory and written when space
returns, since no one would send it again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

from ..agent.router import Decision, Strategy
from ..events import Event, InvalidEvent, cut_to_fit, storable_event

if TYPE_CHECKING:
    from ..core.runtime_store import RuntimeStore

__all__ = ["EventIntake"]


class EventIntake:
    """Stores events in `store` (none: memory only) and hands them over through `hand`.

    `answers_approval(event)` answers an open approval request when the event is one, and says
    whether it was.
    """

    def __init__(
        self,
        *,
        max_event_bytes: int,
        hand: Callable[[Event], Awaitable[Decision]],
        answers_approval: Callable[[Event], bool],
    ) -> None:
        self.store: RuntimeStore | None = None
        self._max_bytes = max_event_bytes
        self._hand = hand
        self._answers_approval = answers_approval

    async def submit(self, event: Event, *, hold_when_full: bool = False) -> Decision:
        """Store the event and hand it over; with `hold_when_full`, an event about work already
        done is held in memory on a full disk (and written when space returns) instead of being
        refused."""
        event = storable_event(event, max_bytes=self._max_bytes)
        if self._answers_approval(event):
            if self.store is not None:
                await self.store.keep_event(event, status="consumed")
            return Decision(Strategy.QUEUE, reason="an answer to an approval request", wake=False)
        if self.store is not None:
            if hold_when_full:
                await self.store.keep_event(event)
            else:
                await self.store.add_event(event)
        return await self._hand(event)

    async def submit_many(self, events: Sequence[Event]) -> list[Decision]:
        """Store the events in one write (all or none), then hand each over, in order."""
        events = [storable_event(event, max_bytes=self._max_bytes) for event in events]
        if self.store is not None and events:
            await self.store.add_events(events)
        return [await self._hand(event) for event in events]

    async def submit_task_result(self, event: Event) -> Decision:
        """Submit a background task's result: one too large to store is cut to fit, visibly,
        rather than refused, since no caller is there to see the refusal; on a full disk it is
        held in memory and stored when space returns, for the same reason."""
        try:
            return await self.submit(event, hold_when_full=True)
        except InvalidEvent as exc:
            cut = cut_to_fit(event, exc, max_bytes=self._max_bytes)
            return await self.submit(cut, hold_when_full=True)
