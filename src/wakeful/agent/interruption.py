"""The step a session is running, and the interrupt that cuts it short.

A step is a model stream, a group of tool calls, or a wait before a retry. An urgent event asks
for an interrupt: the running step's cancel scope is cancelled at once, and a step that starts
while an interrupt waits is cancelled as it starts. The decision stays until the next batch of
events is appended, so the calls of the interrupted turn can say why they did not run.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import anyio

from .router import Decision


class Interruption:
    """The running step's cancel scope and the interrupt waiting to be handled, if any."""

    def __init__(self) -> None:
        self.decision: Decision | None = None
        self._scope: anyio.CancelScope | None = None

    def request(self, decision: Decision) -> None:
        """Cut the running step short; a stop outranks an interrupt already waiting."""
        if self.decision is None or (decision.stop and not self.decision.stop):
            self.decision = decision
        if self._scope is not None:
            self._scope.cancel()

    def handled(self) -> None:
        """The events that interrupted are being appended: the interrupt is over."""
        self.decision = None

    def reset(self) -> None:
        """Forget the step and the interrupt (the session's loop ended in a fault)."""
        self.decision = None
        self._scope = None

    @contextmanager
    def step(self) -> Iterator[anyio.CancelScope]:
        """A step an interrupt cancels, at once if one is already waiting."""
        with anyio.CancelScope() as scope:
            self._scope = scope
            if self.decision is not None:
                scope.cancel()
            try:
                yield scope
            finally:
                self._scope = None
