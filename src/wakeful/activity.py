"""Activity in the runtime: a signal that something settled (a session went idle, a task
ended), and when the user was last seen.

Waiters re-check their own condition after each notification, so one signal serves every
"wait until …" without polling.
"""

from __future__ import annotations

from datetime import datetime

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

    def saw(self, event: Event) -> None:
        """Count `event` as activity if the user sent it."""
        if event.source.type == "user":
            self.touch(event.channel)

    def touch(self, channel: str) -> None:
        """The user is here now, on `channel` (a keystroke at the console, a click)."""
        self.last_seen = self._clock.now()
        self.last_channel = channel
