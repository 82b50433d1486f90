"""Where channels hand what arrives from outside: the runtime's implementation of
:class:`~wakeful.core.channel.Inbox`.

An event delivered here is made storable (within the size cap, else InvalidEvent), scanned for
instructions aimed at the assistant (flagged in ``context["suspicious"]``, never dropped: the
agent and the user should see what was tried), stored unless its id is already stored (a
redelivery: "duplicate", nothing changes), and then handed to its session, unless a filter
kept it from the agent (stored with status "filtered" and the reason in
``context["filtered"]``). When `deliver` returns, the event is durable, so the channel may
acknowledge its source. A full disk refuses the event (StoreFull) as `Runtime.submit` does: the
channel does not acknowledge, and the source sends it again.

:class:`FilteringInbox` is what one channel gets (`ChannelContext.inbox`): it applies the
channel's :class:`~wakeful.channels.filters.ChannelFilter` before delivering, and counts.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

import anyio.to_thread

from ..core.channel import Delivery
from ..core.records import EventStatus
from ..events import Event, storable_event, utc_now

if TYPE_CHECKING:
    from ..agent.router import Decision
    from ..channels.filters import ChannelFilter
    from ..core.runtime_store import RuntimeStore

__all__ = ["SCAN_CHARS", "ChannelCounts", "FilteringInbox", "RuntimeInbox", "suspicious_findings"]

SCAN_CHARS: Final = 16_000
"""How many characters of one event the injection scanner reads (about 1.5 ms of CPU for ordinary
mail, up to about 20 ms when every sentence holds a rule's words); the rest of a longer text is
stored and shown unscanned."""

MAX_FINDINGS: Final = 5
# Up to this many characters in a burst, the scan runs on the event loop (about 0.2 ms for
# ordinary text, 3 ms at worst); longer texts go to a worker thread.
INLINE_SCAN_CHARS: Final = 2_000


def suspicious_findings(event: Event, *, scan_chars: int = SCAN_CHARS) -> list[str]:
    """Short findings of instructions aimed at the assistant in the event's text ("tries to
    override the assistant's instructions (in subject)"), medium severity and above; [] when
    none. The user's own words are not scanned: they are the instructions."""
    from ..mcp.poisoning import SEVERITY_RANK, scan_text

    if event.source.type == "user":
        return []
    findings: list[str] = []
    budget = scan_chars
    for where, text in _texts(event.content, "text"):
        if budget <= 0:
            break
        part, budget = text[:budget], budget - len(text)
        for signal in scan_text(part, where):
            if SEVERITY_RANK[signal.severity] >= SEVERITY_RANK["medium"]:
                finding = f"{signal.reason} (in {where})"
                if finding not in findings:
                    findings.append(finding)
    return findings[:MAX_FINDINGS]


def _texts(value: object, where: str) -> Iterator[tuple[str, str]]:
    """Every string in an event's content, with where it is ("subject", "labels.0")."""
    if isinstance(value, str):
        if value.strip():
            yield where, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _texts(item, str(key) if where == "text" else f"{where}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _texts(item, f"{where}.{index}")


class RuntimeInbox:
    """The runtime's Inbox: stores in `store` (None: memory only, duplicates recognised for
    the runtime's life) and hands new, unfiltered events over through `hand`.

    `answers_approval(event)` answers an open approval request when the event is one (a "yes"
    from the user over IM) and says whether it was: such an event is stored as consumed and
    not handed over, as with `Runtime.submit`.

    `delivering` counts the deliveries under way: an event stored and not yet handed to its
    session is work the runtime is not idle without (`Runtime.is_idle`); `settled()` is called
    each time the last of them ends.
    """

    def __init__(
        self,
        *,
        store: RuntimeStore | None,
        hand: Callable[[Event], Awaitable[Decision]],
        answers_approval: Callable[[Event], bool],
        max_event_bytes: int,
        scan_chars: int = SCAN_CHARS,
        settled: Callable[[], None] = lambda: None,
    ) -> None:
        self._store = store
        self._settled = settled
        self.delivering = 0
        self._hand = hand
        self._answers_approval = answers_approval
        self._max_bytes = max_event_bytes
        self._scan_chars = scan_chars
        self._seen: set[str] = set()

    async def deliver(self, event: Event, *, filtered: str | None = None) -> Delivery:
        [delivery] = await self.deliver_many([(event, filtered)])
        return delivery

    async def deliver_many(self, events: Sequence[tuple[Event, str | None]]) -> list[Delivery]:
        """Store a burst in one write (all or none: an event that cannot be stored raises
        InvalidEvent and nothing is stored), then hand the new, unfiltered ones over in order."""
        if not events:
            return []
        self.delivering += 1
        try:
            return await self._deliver_many(events)
        finally:
            self.delivering -= 1
            if not self.delivering:
                self._settled()

    async def _deliver_many(self, events: Sequence[tuple[Event, str | None]]) -> list[Delivery]:
        prepared = [
            (storable_event(event, max_bytes=self._max_bytes), reason) for event, reason in events
        ]
        # A short text is scanned inline: the thread hop would cost more than the scan.
        if sum(len(event.text) for event, _ in prepared) <= INLINE_SCAN_CHARS:
            marked = self._marked(prepared)
        else:
            marked = await anyio.to_thread.run_sync(self._marked, prepared)
        statuses: list[EventStatus] = [
            "filtered" if reason is not None else "pending" for _, reason in prepared
        ]
        stored = await self._store_new(marked, statuses)
        deliveries: list[Delivery] = []
        answered: list[str] = []
        for event, status, new in zip(marked, statuses, stored, strict=True):
            if not new:
                deliveries.append("duplicate")
            elif status == "filtered":
                deliveries.append("filtered")
            elif self._answers_approval(event):
                answered.append(event.id)
                deliveries.append("stored")
            else:
                await self._hand(event)
                deliveries.append("stored")
        if answered and self._store is not None:
            await self._store.events.mark(answered, "consumed")
        return deliveries

    def _marked(self, prepared: Sequence[tuple[Event, str | None]]) -> list[Event]:
        """The events with their flags in `context` (runs on a worker thread: scanning a long
        text takes tens of milliseconds)."""
        marked = []
        for event, reason in prepared:
            extra: dict[str, Any] = {}
            if findings := suspicious_findings(event, scan_chars=self._scan_chars):
                extra["suspicious"] = findings
            if reason is not None:
                extra["filtered"] = reason
            if extra:
                event = event.model_copy(update={"context": {**event.context, **extra}})
            marked.append(event)
        return marked

    async def _store_new(
        self, events: Sequence[Event], statuses: Sequence[EventStatus]
    ) -> list[bool]:
        if self._store is not None:
            pairs = list(zip(events, statuses, strict=True))
            return await self._store.events.add_new_many(pairs)
        new = []
        for event in events:
            new.append(event.id not in self._seen)
            self._seen.add(event.id)
        return new


@dataclass
class ChannelCounts:
    """What one channel delivered since the runtime started."""

    stored: int = 0
    filtered: int = 0
    duplicate: int = 0
    last_event_at: datetime | None = None


class FilteringInbox:
    """One channel's Inbox: applies its `channel_filter` before delivering to `inbox`, and
    counts what became of each event (`counts`)."""

    def __init__(self, inbox: RuntimeInbox, channel_filter: ChannelFilter) -> None:
        self._inbox = inbox
        self.filter = channel_filter
        self.counts = ChannelCounts()

    async def deliver(self, event: Event, *, filtered: str | None = None) -> Delivery:
        [delivery] = await self.deliver_many([(event, filtered)])
        return delivery

    async def deliver_many(self, events: Sequence[tuple[Event, str | None]]) -> list[Delivery]:
        judged = [(event, reason or self.filter.rejects(event)) for event, reason in events]
        deliveries = await self._inbox.deliver_many(judged)
        for delivery in deliveries:
            setattr(self.counts, delivery, getattr(self.counts, delivery) + 1)
        if deliveries:
            self.counts.last_event_at = utc_now()
        return deliveries
