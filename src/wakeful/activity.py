"""Activity in the runtime: a signal that something settled (a session went idle, a task
ended), and when the user was last seen.

Waiters re-check their own condition after each notification, so one signal serves every
"wait until …" without polling.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import anyio

from .clock import Clock, SystemClock
from .events import Event


class ActivitySignal:
    def __init__(self) -> None:
        self._event = anyio.Event()

    def notify(self) -> None:
        self._event.set()
        self._event = anyio.Event()

    async def wait(self) -> None:
        """Return at the next notification."""
        await self._event.wait()


class UserActivity:
    """When the user was last seen by the runtime: every event from the user (input,
    interrupt, an answer to an approval request, on any channel) and every sign of presence a
    channel notices (keystrokes at the console) counts. Reading it costs nothing, so the system
    channel's inactivity check and, later, the choice of how to reach the user can ask often.
    """

    def __init__(self, clock: Clock | None = None) -> None:
        self._clock: Clock = clock or SystemClock()
        self.last_seen: datetime | None = None
        # The channel the user was last seen on ("console", "matrix:home"), "" before.
        self.last_channel = ""
        # Per session, the channel the user last wrote to it from: where its replies go.
        self.homes: dict[str, str] = {}
        # Seen this recently, the user counts as present (the delivery policy sets it).
        self.active_minutes = 10.0

    def saw(self, event: Event) -> None:
        """Count `event` as activity if the user sent it."""
        if event.source.type == "user":
            self.touch(event.channel)
            if event.session:
                self.homes[event.session] = event.channel

    def away(self, active_minutes: float | None = None) -> str:
        """ "" while the user counts as present (seen within `active_minutes`, by default
        `self.active_minutes`); otherwise a line saying since when they are away."""
        minutes = self.active_minutes if active_minutes is None else active_minutes
        now = self._clock.now()
        if self.last_seen is None:
            return "the user has not been seen since the runtime started"
        gone = now - self.last_seen
        if gone <= timedelta(minutes=minutes):
            return ""
        where = f", on {self.last_channel}" if self.last_channel else ""
        return f"the user is away (last seen {_ago(gone)} ago{where})"

    def touch(self, channel: str) -> None:
        """The user is here now, on `channel` (a keystroke at the console, a click)."""
        self.last_seen = self._clock.now()
        self.last_channel = channel


def _ago(gone: timedelta) -> str:
    minutes = int(gone.total_seconds() // 60)
    if minutes < 120:
        return f"{minutes} min"
    hours = minutes // 60
    return f"{hours} h" if hours < 48 else f"{hours // 24} days"
