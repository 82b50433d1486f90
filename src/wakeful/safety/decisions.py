"""How a request to a person ended (:class:`HumanDecision`), the answers that came too late
(:class:`LateAnswer`), and the words both are told in.

A decision is what the agent reads (as the call's result, or as a `human.answer` event) and what
the learning loop keeps; it is stored as JSON with its request (:meth:`HumanDecision.to_json`),
so that an outcome not yet handed to its session survives a restart.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final, Literal

from ..events import utc_now

__all__ = [
    "DecisionListener",
    "HumanDecision",
    "LateAnswer",
    "RequestStatus",
    "duration_words",
    "quoted",
    "said",
    "values_words",
]

RequestStatus = Literal["answered", "declined", "timed_out"]

_QUOTE_LIMIT: Final = 500


@dataclass(frozen=True)
class LateAnswer:
    """An answer that came after its request was answered or had timed out: recorded on the
    request, not applied."""

    answer: str
    """What the person answered, in words ("approve", "deny: not now", "date=2026-12-24")."""
    at: datetime
    why_not_applied: str

    def to_json(self) -> str:
        return json.dumps(
            {
                "answer": self.answer,
                "at": self.at.isoformat(),
                "why_not_applied": self.why_not_applied,
            },
            ensure_ascii=False,
        )


@dataclass(frozen=True)
class HumanDecision:
    """How a request to a person ended: what the agent reads, and what the learning loop keeps."""

    request_id: str
    session: str
    kind: Literal["approval", "input"]
    question: str
    status: RequestStatus
    waited_seconds: float
    choice: str | None = None
    """An approval's option: the one chosen, or the default applied."""
    values: dict[str, Any] = field(default_factory=dict)
    """An input request's values: those given, or the default applied."""
    reason: str = ""
    """The person's own words with their answer (why they denied, declined)."""
    applied_default: bool = False
    default_words: str = ""
    """The default in words ("deny", "date=2026-12-24"); "" when none was set."""
    decided_at: datetime = field(default_factory=utc_now)
    case: int | None = None
    """The number of the case this decision was kept as (the learning loop), if it was."""
    case_note: str = ""
    """For the agent: the case's id and the similar earlier cases (see safety.cases)."""

    def text(self) -> str:
        """The decision as the agent reads it, saying when a default was applied and why, and
        the case it was kept as."""
        words = self._said()
        return f"{words}\n{self.case_note}" if self.case_note else words

    def _said(self) -> str:
        head = f"request [{self.request_id}] ({quoted(self.question)})"
        answer = self.choice if self.kind == "approval" else values_words(self.values)
        why = f' Their reason: "{self.reason}".' if self.reason else ""
        if self.status == "answered":
            return f"The approver answered {head}: {answer}.{why}"
        if self.status == "declined":
            words = f"The approver declined to answer {head}.{why}"
        else:
            words = f"No answer to {head} in {duration_words(self.waited_seconds)}."
        if self.applied_default:
            return f"{words} Applied the default: {self.default_words}."
        return (
            f"{words} No default was set, so nothing was decided: go on without it, or ask again "
            "if it is still needed."
        )

    def as_dict(self) -> dict[str, Any]:
        """The decision as JSON-ready data (the tool result's structured part)."""
        return {
            "request_id": self.request_id,
            "kind": self.kind,
            "status": self.status,
            "choice": self.choice,
            "values": dict(self.values),
            "reason": self.reason,
            "applied_default": self.applied_default,
            "waited_seconds": round(self.waited_seconds, 3),
            "decided_at": self.decided_at.isoformat(),
            "case": self.case,
        }

    def to_json(self) -> str:
        """The whole decision as JSON text (how the store keeps it); see :meth:`from_json`."""
        whole = self.as_dict() | {
            "session": self.session,
            "question": self.question,
            "default_words": self.default_words,
            "case_note": self.case_note,
        }
        return json.dumps(whole, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> HumanDecision:
        """The decision :meth:`to_json` wrote; ValueError (or KeyError) for anything else."""
        data = json.loads(text)
        if not isinstance(data, dict) or data.get("status") not in (
            "answered",
            "declined",
            "timed_out",
        ):
            raise ValueError("it is not a stored decision")
        kind = data["kind"]
        if kind not in ("approval", "input"):
            raise ValueError(f"its kind {kind!r} is neither approval nor input")
        values = data.get("values") or {}
        if not isinstance(values, dict):
            raise ValueError("its values are not an object")
        choice = data.get("choice")
        case = data.get("case")
        return cls(
            request_id=str(data["request_id"]),
            session=str(data["session"]),
            kind=kind,
            question=str(data["question"]),
            status=data["status"],
            waited_seconds=float(data["waited_seconds"]),
            choice=None if choice is None else str(choice),
            values=values,
            reason=str(data.get("reason", "")),
            applied_default=bool(data.get("applied_default", False)),
            default_words=str(data.get("default_words", "")),
            decided_at=datetime.fromisoformat(str(data["decided_at"])),
            case=None if case is None else int(case),
            case_note=str(data.get("case_note", "")),
        )


DecisionListener = Callable[[HumanDecision], None]
"""Told of every request that ended (e.g. to keep it as a case for the learning loop)."""


def duration_words(seconds: float) -> str:
    """A duration as a person says it: "45 s", "5 min", "2 h"."""
    if seconds < 120:
        return f"{seconds:.3g} s" if seconds < 10 else f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.3g} min"
    return f"{seconds / 3600:.3g} h"


def values_words(values: dict[str, Any]) -> str:
    """Form values as typed after `/answer ID`: "date=2026-12-24 guests=4"."""
    return " ".join(f"{name}={value}" for name, value in values.items()) or "(no values)"


def said(verb: str, reason: str) -> str:
    """An answer in words: "deny: not on a Friday", or the verb alone."""
    return f"{verb}: {reason}" if reason else verb


def quoted(text: str) -> str:
    """Someone's text, on one line, cut short and in quotes, so it reads as their words."""
    line = " ".join(text.split())
    if len(line) > _QUOTE_LIMIT:
        line = line[: _QUOTE_LIMIT - 1] + "…"
    return f'"{line}"'
