"""Time as the timer service sees it: the wall clock, and a fake clock tests move by hand.

Everything that waits for a moment in calendar time goes through a :class:`Clock`, so that tests
can jump a day ahead in a microsecond with :class:`FakeClock` instead of sleeping.
"""

from __future__ import annotations

import heapq
import itertools
from datetime import UTC, datetime, timedelta
from typing import Protocol

import anyio
import anyio.lowlevel

from .errors import UserError

__all__ = ["Clock", "FakeClock", "SystemClock", "require_aware"]


class Clock(Protocol):
    """A source of the current UTC time that can also wait until a given moment."""

    def now(self) -> datetime:
        """The current time, timezone-aware, in UTC."""
        ...

    async def sleep_until(self, when: datetime) -> None:
        """Return at `when` or soon after; return at once (after a checkpoint) if it has passed."""
        ...


def require_aware(when: datetime, what: str = "time") -> datetime:
    """`when` converted to UTC, or a UserError if it has no timezone."""
    if when.tzinfo is None or when.utcoffset() is None:
        raise UserError(
            f"The {what} {when.isoformat()} has no timezone, so it is ambiguous. Pass an aware "
            "datetime, e.g. datetime(2025, 6, 1, 9, tzinfo=UTC)."
        )
    return when.astimezone(UTC)


class SystemClock:
    """The machine's wall clock.

    A long wait is cut into slices of at most `max_slice_seconds`, each followed by a fresh look at
    the wall clock, so that a machine that was suspended, or a clock that NTP stepped, shifts a
    wait by at most one slice instead of by the whole gap.
    """

    def __init__(self, max_slice_seconds: float = 30.0) -> None:
        if not max_slice_seconds > 0:
            raise UserError(
                f"max_slice_seconds must be positive, got {max_slice_seconds!r}; the default, "
                "30 seconds, suits most uses."
            )
        self._max_slice = max_slice_seconds

    def now(self) -> datetime:
        return datetime.now(UTC)

    async def sleep_until(self, when: datetime) -> None:
        target = require_aware(when, "wake-up time")
        await anyio.lowlevel.checkpoint()
        while True:
            remaining = (target - self.now()).total_seconds()
            if remaining <= 0:
                return
            await anyio.sleep(min(remaining, self._max_slice))


class FakeClock:
    """A clock that only moves when a test calls :meth:`advance` or :meth:`set`.

    Sleepers whose wake-up time has been reached are woken by the call that moves the clock;
    they run the next time the test yields to the event loop (for example while it awaits an
    event they produce).
    """

    def __init__(self, start: datetime | None = None) -> None:
        self._now = (
            require_aware(start, "start time") if start else datetime(2025, 1, 1, tzinfo=UTC)
        )
        self._sleepers: list[tuple[datetime, int, anyio.Event]] = []
        self._counter = itertools.count()

    def now(self) -> datetime:
        return self._now

    @property
    def sleepers(self) -> int:
        """How many tasks are waiting in :meth:`sleep_until` right now."""
        return sum(1 for _, _, event in self._sleepers if not event.is_set())

    async def sleep_until(self, when: datetime) -> None:
        target = require_aware(when, "wake-up time")
        if target <= self._now:
            await anyio.lowlevel.checkpoint()
            return
        event = anyio.Event()
        entry = (target, next(self._counter), event)
        heapq.heappush(self._sleepers, entry)
        try:
            await event.wait()
        finally:
            if not event.is_set():
                # Cancelled while waiting: drop the entry so sleepers never grows without bound.
                self._sleepers.remove(entry)
                heapq.heapify(self._sleepers)

    def advance(self, delta: float | timedelta) -> datetime:
        """Move the clock forward by `delta` (seconds or a timedelta) and return the new time."""
        step = delta if isinstance(delta, timedelta) else timedelta(seconds=delta)
        if step < timedelta(0):
            raise UserError(
                f"A FakeClock only moves forward; advance() got {delta!r}. Create a new clock to "
                "start from an earlier time."
            )
        return self.set(self._now + step)

    def set(self, when: datetime) -> datetime:
        """Move the clock forward to `when` and wake every sleeper that is now due."""
        target = require_aware(when, "time")
        if target < self._now:
            raise UserError(
                f"A FakeClock only moves forward: it reads {self._now.isoformat()} and set() got "
                f"{target.isoformat()}. Create a new clock to start from an earlier time."
            )
        self._now = target
        while self._sleepers and self._sleepers[0][0] <= target:
            _, _, event = heapq.heappop(self._sleepers)
            event.set()
        return target
