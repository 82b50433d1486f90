"""Group delivery: deliveries that arrive while the Inbox is storing others go to it together.

Each webhook request waits for its own event to be durable before it is answered, so under load
many requests wait on the store at once. Rather than one store write (and one hop to a worker
thread for the injection scan) per request, the first request to find the Inbox idle delivers
its event at once; the requests that arrive meanwhile queue, and when it is done the first of
them delivers the whole queue with one `deliver_many`. No delay is added to wait for company:
a request alone is delivered alone. This is a store's group commit, done at the channel.

`deliver_many` stores all or none. When it refuses a batch because one event cannot be stored
(InvalidEvent: too large), the batch is delivered again one event at a time, so only that
delivery is refused; any other failure (a full disk) is every request's answer, as nothing of
the batch was stored.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import anyio

from ...core.channel import Delivery, Inbox
from ...events import Event, InvalidEvent

__all__ = ["GroupDelivery"]


@dataclass(eq=False)
class _Request:
    event: Event
    filtered: str | None
    # Set when `outcome` or `error` is in, or when this request is to deliver the queue.
    turn: anyio.Event = field(default_factory=anyio.Event)
    outcome: Delivery | None = None
    error: BaseException | None = None

    @property
    def settled(self) -> bool:
        return self.outcome is not None or self.error is not None

    def result(self) -> Delivery:
        if self.error is not None:
            raise self.error
        assert self.outcome is not None
        return self.outcome


class GroupDelivery:
    """Delivers to `inbox` one event per call, several calls' events in one `deliver_many`
    when they overlap; see the module docs."""

    def __init__(self, inbox: Inbox) -> None:
        self._inbox = inbox
        self._queue: list[_Request] = []
        self._busy = False

    async def deliver(self, event: Event, *, filtered: str | None = None) -> Delivery:
        """Deliver one event; returns once it is durable, as `Inbox.deliver` does."""
        request = _Request(event, filtered)
        self._queue.append(request)
        # Shielded: a request that is part of a batch under way, or whose turn it is to deliver
        # the queue, finishes that first, so that no other request is left waiting on it.
        with anyio.CancelScope(shield=True):
            if self._busy:
                await request.turn.wait()
            if not request.settled:
                self._busy = True
                batch, self._queue = self._queue, []
                await self._deliver(batch)
                if self._queue:
                    self._queue[0].turn.set()  # its turn: it delivers what queued meanwhile
                else:
                    self._busy = False
        return request.result()

    async def _deliver(self, batch: list[_Request]) -> None:
        try:
            outcomes = await self._inbox.deliver_many([(r.event, r.filtered) for r in batch])
        except InvalidEvent as exc:
            if len(batch) == 1:
                batch[0].error = exc
            else:
                for request in batch:
                    await self._deliver_alone(request)
        except Exception as exc:  # nothing of the batch was stored: each request answers so
            for request in batch:
                request.error = exc
        else:
            for request, outcome in zip(batch, outcomes, strict=True):
                request.outcome = outcome
        for request in batch:
            request.turn.set()

    async def _deliver_alone(self, request: _Request) -> None:
        try:
            request.outcome = await self._inbox.deliver(request.event, filtered=request.filtered)
        except Exception as exc:  # handed to the request's own task, which raises it
            request.error = exc
