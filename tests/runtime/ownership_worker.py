"""A worker process for the ownership tests and the scaling benchmark: a SessionOwnership on a
PostgreSQL store with a small session handler that consumes each owned session's pending events
as a session does (its trajectory first, then the events marked consumed).

Run as ``python ownership_worker.py URL --name NAME --lease SECONDS [--max-sessions N]
[--idle-release SECONDS] [--claim-batch N]``. It prints one JSON line
when it runs (``{"ready": WORKER_ID}``) and one when it stopped (``{"stopped": true}``, after
SIGTERM or SIGINT: the leases are released). Each trajectory message it appends carries one
event in `event_ids` and, as its content, the worker and the lease epoch it wrote under
(``{"worker": …, "epoch": …}``), so a test can tell from the store who handled what, and when.
"""

from __future__ import annotations

import argparse
import json
import math
import signal
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from wakeful.messages import UserMessage
from wakeful.runtime.worker import SessionOwnership
from wakeful.store.postgres import FencedStore, LeaseLost, PostgresStore

__all__ = ["EventConsumer", "run_worker"]

CONSUMERS = 4


def say(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


class EventConsumer:
    """A :class:`~wakeful.runtime.worker.SessionHandler` that consumes the pending events of the
    sessions it owns, one session at a time each (a session woken while it is being handled is
    handled again after)."""

    def __init__(self, worker_name: str) -> None:
        self.worker_name = worker_name
        self.handled = 0
        self.lost_sessions: list[str] = []
        self._views: dict[str, FencedStore] = {}
        self._queued: set[str] = set()
        self._running: set[str] = set()
        self._dirty: set[str] = set()
        # The events of each session already in its trajectory, as of the lease (epoch) they
        # were loaded under: a new lease loads the trajectory again.
        self._seen: dict[str, tuple[int, set[str]]] = {}
        self._send: MemoryObjectSendStream[str]
        self._receive: MemoryObjectReceiveStream[str]
        self._send, self._receive = anyio.create_memory_object_stream[str](math.inf)

    async def run(self) -> None:
        """Consume until cancelled (a few sessions at a time)."""
        with self._send, self._receive:
            async with anyio.create_task_group() as tg:
                for _ in range(CONSUMERS):
                    tg.start_soon(self._consume)

    def close(self) -> None:
        """Close the queue of a consumer that never ran."""
        self._send.close()
        self._receive.close()

    # The SessionHandler protocol.
    def claimed(self, session: str, store: FencedStore) -> None:
        self._views[session] = store
        self._ready(session)

    def woken(self, session: str, store: FencedStore) -> None:
        self._views[session] = store
        self._ready(session)

    def lost(self, session: str) -> None:
        self._views.pop(session, None)
        self._seen.pop(session, None)
        self.lost_sessions.append(session)

    def busy(self, session: str) -> bool:
        return session in self._running or session in self._queued

    def _ready(self, session: str) -> None:
        if session in self._running:
            self._dirty.add(session)
        elif session not in self._queued:
            self._queued.add(session)
            self._send.send_nowait(session)

    async def _consume(self) -> None:
        async for session in self._receive:
            self._queued.discard(session)
            self._running.add(session)
            try:
                while (view := self._views.get(session)) is not None:
                    self._dirty.discard(session)
                    try:
                        await self._handle(session, view)
                    except LeaseLost:
                        self.lost(session)
                        break
                    if session not in self._dirty:
                        break
            finally:
                self._running.discard(session)

    async def _handle(self, session: str, view: FencedStore) -> None:
        pending = await view.events.pending(session)
        if not pending:
            return
        epoch = view.lease.epoch
        seen_epoch, seen = self._seen.get(session, (None, set()))
        if seen_epoch != epoch:
            # A new lease: what an earlier owner appended (perhaps just before it died, without
            # marking the events consumed) is not appended twice.
            trajectory = await view.trajectories.load(session)
            seen = {i for m in trajectory if isinstance(m, UserMessage) for i in m.event_ids}
            self._seen[session] = (epoch, seen)
        fresh = [event for event in pending if event.id not in seen]
        content = json.dumps({"worker": self.worker_name, "epoch": epoch})
        if fresh:
            messages = [UserMessage(content=content, event_ids=[event.id]) for event in fresh]
            await view.trajectories.append(session, messages)
            seen.update(event.id for event in fresh)
            self.handled += len(fresh)
        await view.events.mark([event.id for event in pending], "consumed")


async def run_worker(
    url: str,
    name: str,
    lease_s: float,
    idle_release_s: float | None,
    max_sessions: int | None,
    claim_batch: int = 10,
) -> None:
    async with await PostgresStore.open(url, pool_size=4) as store:
        consumer = EventConsumer(name)
        ownership = SessionOwnership(
            store,
            consumer,
            lease_seconds=lease_s,
            name=name,
            idle_release_s=idle_release_s,
            max_sessions=max_sessions,
            claim_batch=claim_batch,
        )
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async with anyio.create_task_group() as tg:
                tg.start_soon(consumer.run)
                await tg.start(ownership.run)
                say(ready=ownership.worker_id)
                async for _ in signals:
                    break
                tg.cancel_scope.cancel()
        say(stopped=True, handled=consumer.handled)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("--name", required=True)
    parser.add_argument("--lease", type=float, default=2.0)
    parser.add_argument("--idle-release", type=float, default=None)
    parser.add_argument("--max-sessions", type=int, default=None)
    parser.add_argument("--claim-batch", type=int, default=10)
    args = parser.parse_args()
    anyio.run(
        run_worker,
        args.url,
        args.name,
        args.lease,
        args.idle_release,
        args.max_sessions,
        args.claim_batch,
    )


if __name__ == "__main__":
    main()
