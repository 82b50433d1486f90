"""The answer every safety layer gives about one action: allow, ask a human, or deny, and why."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

Decision = Literal["allow", "ask", "deny"]
"""`allow` runs it, `ask` needs a human's yes first, `deny` refuses it with the reasons."""

_ORDER: dict[Decision, int] = {"allow": 0, "ask": 1, "deny": 2}


@dataclass(frozen=True, slots=True)
class Verdict:
    """One layer's decision about one action, with the reasons a person (or model) can act on.

    `layer` names who decided ("policy", "sidecar", "reviewer", "human", "breaker", …), so an
    audit record can show the path a call took."""

    decision: Decision
    reasons: tuple[str, ...] = ()
    layer: str = ""

    @property
    def allowed(self) -> bool:
        return self.decision == "allow"

    def to_json(self) -> dict[str, Any]:
        return {"decision": self.decision, "reasons": list(self.reasons)}


def strictest(verdicts: list[Verdict] | tuple[Verdict, ...], *, layer: str = "") -> Verdict:
    """The most restrictive of several verdicts (deny > ask > allow), with all their reasons
    at that level; an empty list allows."""
    if not verdicts:
        return Verdict("allow", (), layer)
    worst = max(verdicts, key=lambda v: _ORDER[v.decision]).decision
    reasons: list[str] = []
    for v in verdicts:
        if v.decision == worst:
            reasons.extend(r for r in v.reasons if r not in reasons)
    return Verdict(worst, tuple(reasons), layer)
