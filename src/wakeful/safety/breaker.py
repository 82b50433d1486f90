"""The denial circuit breaker: after N refusals in a row, a person decides instead.

A safety check that keeps refusing while the agent keeps rephrasing wastes requests and can trap
the user in a loop. After `threshold` consecutive denials in one session, the next denied call is
handed to a person (an "ask") rather than refused again; any allowed call, or a person's answer,
closes the breaker.
"""

from __future__ import annotations

from ..errors import UserError
from .verdict import Verdict


class DenialBreaker:
    """Counts consecutive denials per session."""

    def __init__(self, threshold: int = 3) -> None:
        if threshold < 1:
            raise UserError(
                f"A denial breaker's threshold must be at least 1, got {threshold}; give the "
                "number of refusals in a row after which a person decides, e.g. 3."
            )
        self.threshold = threshold
        self._denials: dict[str, int] = {}

    def consecutive(self, session: str) -> int:
        return self._denials.get(session, 0)

    def after_denial(self, session: str, verdict: Verdict) -> Verdict:
        """Count a denial; return it, or an "ask" to a person once the breaker trips."""
        count = self._denials.get(session, 0) + 1
        self._denials[session] = count
        if count <= self.threshold:
            return verdict
        return Verdict(
            "ask",
            (
                *verdict.reasons,
                f"The safety checks refused {count} calls in a row, so this one goes to you "
                "instead of being refused again.",
            ),
            "breaker",
        )

    def reset(self, session: str) -> None:
        self._denials.pop(session, None)
