"""Following the messages an outbox handed over to another worker (a channel that worker runs,
:class:`~wakeful.core.channel.HandedOver`), so that the listeners of the session's worker (an
open console page, the delivery policy) hear what that worker records in the shared store: each
change of the delivery (sent with the copy's id, failed, read) and a read on that channel, as if
recorded here.

Polled rather than notified by the worker that sends: it needs nothing of the store but its
messages, costs nothing while nothing is handed over, and a page that misses an update still
catches up when its stream reconnects.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import anyio

from ..core.records import MessageDelivery, OutboundMessage
from ..core.repositories import MessageRepository
from ..errors import StoreError

__all__ = [
    "HANDED_OVER_FOLLOWED",
    "HANDED_OVER_FOLLOW_SECONDS",
    "HANDED_OVER_POLL_SECONDS",
    "HANDED_OVER_READ_GRACE_SECONDS",
    "HANDED_OVER_SENT_POLL_SECONDS",
    "HandedOverFollower",
]

log = logging.getLogger(__name__)

# The delivery there is looked at every HANDED_OVER_POLL_SECONDS while "queued" (or once the
# message was read elsewhere, for HANDED_OVER_READ_GRACE_SECONDS, while that worker shows it read
# on its copy), every HANDED_OVER_SENT_POLL_SECONDS once sent (a read on the copy), until read or
# failed there or HANDED_OVER_FOLLOW_SECONDS after the hand-over; at most HANDED_OVER_FOLLOWED at
# a time (the oldest dropped first).
HANDED_OVER_POLL_SECONDS = 0.5
HANDED_OVER_SENT_POLL_SECONDS = 5.0
HANDED_OVER_READ_GRACE_SECONDS = 30.0
HANDED_OVER_FOLLOW_SECONDS = 3600.0
HANDED_OVER_FOLLOWED = 500


@dataclass
class _Followed:
    """A message handed over to another worker on a channel, as last seen here."""

    since: float
    seen: MessageDelivery | None = None
    read_told: bool = False
    # When to look next, and when the message was first seen read (monotonic clock).
    next_at: float = 0.0
    read_seen_at: float | None = None


class HandedOverFollower:
    """The messages one outbox handed over, followed (see the module docs). It reads them in
    `messages()` (the outbox's repository of the moment) and tells the outbox of each change:
    `changed(message)` for its deliveries, `copy_recorded(channel, copy id)` once the other
    worker recorded the copy's id (a receipt kept for it applies now), `read(ids, channel)` for
    a read on the copy there."""

    def __init__(
        self,
        *,
        messages: Callable[[], MessageRepository],
        changed: Callable[[OutboundMessage], Awaitable[None]],
        copy_recorded: Callable[[str, str], Awaitable[None]],
        read: Callable[[list[str], str], Awaitable[object]],
    ) -> None:
        self._messages = messages
        self._changed = changed
        self._copy_recorded = copy_recorded
        self._read = read
        # (message id, channel) handed over to another worker.
        self._followed: dict[tuple[str, str], _Followed] = {}
        self._came: anyio.Event | None = None

    def follow(self, message_id: str, channel: str) -> None:
        """Follow the delivery of a message handed over to another worker; the oldest followed
        is dropped past HANDED_OVER_FOLLOWED."""
        self._followed[(message_id, channel)] = _Followed(time.monotonic())
        while len(self._followed) > HANDED_OVER_FOLLOWED:
            del self._followed[next(iter(self._followed))]
        if self._came is not None:
            self._came.set()

    async def run(self) -> None:
        """Follow until cancelled: one read of a followed message at each look (see
        HANDED_OVER_POLL_SECONDS), bounded in number and time."""
        while True:
            if not self._followed:
                self._came = anyio.Event()
                await self._came.wait()
            await anyio.sleep(HANDED_OVER_POLL_SECONDS)
            now = time.monotonic()
            for key in [k for k, f in self._followed.items() if f.next_at <= now]:
                try:
                    await self._look(*key)
                except StoreError as exc:  # the store's trouble: looked at again next time
                    log.warning("could not look at the delivery of %s on %s: %s", *key, exc)
                except Exception:  # a listener's failure must not stop the following
                    log.exception("could not tell what became of %s on %s", *key)

    async def _look(self, message_id: str, channel: str) -> None:
        followed = self._followed.get((message_id, channel))
        if followed is None:
            return
        message = await self._messages().get(message_id)
        delivery = None
        if message is not None:
            delivery = next((d for d in message.deliveries if d.channel == channel), None)
        if message is None or delivery is None:
            del self._followed[(message_id, channel)]
            return
        if delivery != followed.seen:
            followed.seen = delivery
            await self._changed(message)
            if delivery.channel_message_id is not None:
                await self._copy_recorded(channel, delivery.channel_message_id)
        if message.read_on == channel and not followed.read_told:
            followed.read_told = True  # read on the copy there: the other worker recorded it
            await self._read([message.id], channel)
        now = time.monotonic()
        every = HANDED_OVER_SENT_POLL_SECONDS
        if message.read:
            # Read elsewhere: the other worker shows it on its copy (read), or cannot.
            followed.read_seen_at = followed.read_seen_at or now
            every = HANDED_OVER_POLL_SECONDS
        elif delivery.state == "queued":
            every = HANDED_OVER_POLL_SECONDS
        followed.next_at = now + every
        if (
            delivery.state in ("read", "failed")
            or now - followed.since > HANDED_OVER_FOLLOW_SECONDS
            or (
                followed.read_seen_at is not None
                and now - followed.read_seen_at > HANDED_OVER_READ_GRACE_SECONDS
            )
        ):
            self._followed.pop((message_id, channel), None)
