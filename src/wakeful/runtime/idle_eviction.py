"""Unloading sessions that stayed idle: the countdown of each idle session and the task that
runs it out.

A session that goes idle (re)starts its countdown; when it runs out, the runtime is asked to
evict the session, which it does only if the session is still idle with nothing of its own in
flight, and otherwise the countdown starts again. Countdowns are kept in the order they started,
so the next one to run out is always the first, and each costs O(1) to start or restart: the
work is proportional to the sessions in memory, never to all the sessions there ever were.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

import anyio
import anyio.lowlevel
from anyio.abc import TaskStatus

from ..activity import ActivitySignal
from ..clock import Clock, SystemClock
from ..errors import UserError

__all__ = ["IdleEviction", "SessionSettled"]


class IdleEviction:
    """Evicts sessions idle for `after_seconds` (measured on `clock`) through `evict`.

    `evict(session_id)` returns False when the session cannot go now (work arrived, a task of
    its own runs); its countdown then starts again. Run :meth:`run` in the task group that owns
    the sessions.
    """

    def __init__(
        self,
        after_seconds: float,
        evict: Callable[[str], bool],
        *,
        clock: Clock | None = None,
    ) -> None:
        if not after_seconds > 0:
            raise UserError(
                f"evict_idle_after_seconds must be positive, got {after_seconds!r}; pass None "
                "to keep idle sessions in memory for the runtime's whole life."
            )
        self.after = timedelta(seconds=after_seconds)
        self._evict = evict
        self._clock: Clock = clock or SystemClock()
        # Session id -> when its countdown started, oldest first (dicts keep insertion order).
        self._started_at: dict[str, datetime] = {}
        self._armed = anyio.Event()

    def __len__(self) -> int:
        """How many sessions are counting down."""
        return len(self._started_at)

    def settled(self, session_id: str) -> None:
        """The session went idle: (re)start its countdown."""
        self._started_at.pop(session_id, None)
        self._started_at[session_id] = self._clock.now()
        self._armed.set()

    def forget(self, session_id: str) -> None:
        """Stop the session's countdown (it was unloaded by other means)."""
        self._started_at.pop(session_id, None)

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Evict sessions as their countdowns run out, until cancelled."""
        task_status.started()
        while True:
            # One session per pass, with a checkpoint each: evicting thousands of sessions
            # that went idle together never holds the event loop for long.
            await anyio.lowlevel.checkpoint()
            if not self._started_at:
                self._armed = anyio.Event()
                await self._armed.wait()
                continue
            session_id, started_at = next(iter(self._started_at.items()))
            due = started_at + self.after
            if self._clock.now() < due:
                await self._clock.sleep_until(due)
                continue
            del self._started_at[session_id]
            if not self._evict(session_id):
                self.settled(session_id)


class SessionSettled(ActivitySignal):
    """The signal one session notifies each time it goes idle: it starts the session's eviction
    countdown, then notifies the runtime's shared signal (which `Runtime.wait_idle` waits on)."""

    def __init__(self, session_id: str, shared: ActivitySignal, eviction: IdleEviction) -> None:
        super().__init__()
        self._session_id = session_id
        self._shared = shared
        self._eviction = eviction

    def notify(self) -> None:
        self._eviction.settled(self._session_id)
        self._shared.notify()

    async def wait(self) -> None:
        await self._shared.wait()
