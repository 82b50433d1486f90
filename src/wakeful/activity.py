"""A signal that something in the runtime settled: a session went idle, a task ended.

Waiters re-check their own condition after each notification, so one signal serves every
"wait until …" without polling.
"""

from __future__ import annotations

import anyio


class ActivitySignal:
    def __init__(self) -> None:
        self._event = anyio.Event()

    def notify(self) -> None:
        self._event.set()
        self._event = anyio.Event()

    async def wait(self) -> None:
        """Return at the next notification."""
        await self._event.wait()
