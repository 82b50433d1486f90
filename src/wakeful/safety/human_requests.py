"""Requests to a person: a yes/no question (:class:`ApprovalRequest`) or a form to fill in or a
page to open (:class:`InputRequest`), what each asks in words, and the decision it ends with.

They wait in one queue (:class:`~wakeful.safety.approvals.Approvals`), which asks, settles and
answers them; their stored form is in :mod:`wakeful.safety.request_records`.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import KW_ONLY, dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol

import anyio

from ..events import utc_now
from .cases import CaseRequest, SimilarCase, similar_for_person
from .decisions import (
    HumanDecision,
    LateAnswer,
    RequestStatus,
    duration_words,
    quoted,
    said,
    values_words,
)
from .verdict import Verdict

__all__ = [
    "AnsweredIn",
    "ApprovalHandler",
    "ApprovalRequest",
    "HumanRequest",
    "InputForm",
    "InputOutcome",
    "InputReply",
    "InputRequest",
    "InvalidAnswer",
    "Priority",
    "case_request",
    "decision_of",
    "first_answer",
]

Priority = Literal["low", "normal", "high", "urgent"]
"""How pressing a request is: the urgency of the question's message, from which the delivery
policy chooses how the person is reached (urgent: every channel in turn until read)."""

AnsweredIn = Literal["call", "event"]
"""Where a request's outcome goes: to the call that waits for it ("call": the gate's approvals,
MCP input requests, the agent's requests with wait=true), or to its session as a `human.answer`
event ("event": the agent's requests that did not wait)."""


@dataclass
class HumanRequest:
    """What every request to a person has: its id and session, how pressing it is and how long
    it waits, where its outcome goes, the answer's reason and late answers, and (once ended)
    its decision and case."""

    id: str
    session: str
    _: KW_ONLY
    created: datetime = field(default_factory=utc_now)
    priority: Priority = "high"
    timeout_seconds: float | None = None
    """How long to wait for an answer; None: the approvals' own timeout."""
    answer_reason: str = ""
    """The person's own words with their answer."""
    late: list[LateAnswer] = field(default_factory=list)
    decision: HumanDecision | None = None
    started: float = field(default_factory=time.monotonic)
    context: str = ""
    """What the user last asked when the request arose (the case's context)."""
    similar: tuple[SimilarCase, ...] = ()
    """The similar earlier cases, shown with the question."""
    case_number: int | None = None
    """The case the decision was kept as."""
    call_id: str = ""
    """The tool call that asked ("" when none is known)."""
    answered_in: AnsweredIn = "call"
    ended: str = ""
    """Why it ended without a decision (its call ended); "" while open or once decided."""

    @property
    def kind(self) -> Literal["approval", "input"]:
        """What it asks for: a choice ("approval") or values ("input")."""
        raise NotImplementedError

    def has_answer(self) -> bool:
        """Whether the person (or a handler) has answered it."""
        raise NotImplementedError

    def question(self) -> str:
        raise NotImplementedError


@dataclass
class ApprovalRequest(HumanRequest):
    """One open yes/no question: which call (or, asked by the agent, which question), why it
    needs a person, and (once given) the answer."""

    tool: str
    summary: str
    reasons: tuple[str, ...]
    answered: anyio.Event = field(default_factory=anyio.Event)
    verdict: Verdict | None = None
    asker: str = ""
    """Who asks when it is not the safety gate holding a call ("the agent"); `summary` is then
    their question."""
    options: tuple[str, str] = ("approve", "deny")
    """The words of yes and no, as the asker named them."""
    default: str | None = None
    """The option applied when nobody answers in time; None: no (the call is not run)."""

    @property
    def kind(self) -> Literal["approval", "input"]:
        return "approval"

    def has_answer(self) -> bool:
        return self.verdict is not None

    def question(self) -> str:
        return _with_similar(self._question(), self.similar)

    def _question(self) -> str:
        if self.asker:
            yes, no = self.options
            why = "".join(f"\n{reason}" for reason in self.reasons)
            default = self.default or no
            return (
                f"Approval requested [{self.id}] by {self.asker}: {quoted(self.summary)}{why}\n"
                f"With no answer in {duration_words(self.timeout_seconds or 0)}: {default}.\n"
                f"Reply /approve {self.id} ({yes}), or /deny {self.id} <why> ({no})."
            )
        why = " ".join(self.reasons) or "It needs a person's approval."
        return (
            f"Approval needed [{self.id}]: {self.tool} {self.summary}\n{why}\n"
            f"Reply /approve {self.id} to run it, or /deny {self.id} <why> to refuse."
        )


ApprovalHandler = Callable[[ApprovalRequest], Awaitable[Verdict]]
"""Answers a request itself (e.g. a web console); returns allow or deny with the reason."""


class InvalidAnswer(ValueError):
    """Raised by an :class:`InputForm` for an answer it cannot take; the message says what is
    wrong and what to type instead (it is shown to the person as it is)."""


class InputForm(Protocol):
    """What a person is asked to fill in, and how their answer becomes values."""

    def describe(self) -> str:
        """The fields, for the question: name, kind, whether required, allowed values."""
        ...

    def example(self) -> str:
        """An answer of the right shape after `/answer ID`, e.g. `date=2026-12-24`."""
        ...

    def parse(self, text: str) -> dict[str, Any]:
        """The values of a typed answer (`field=value …`); raises InvalidAnswer."""
        ...

    def check(self, values: dict[str, Any]) -> dict[str, Any]:
        """The values given by code, checked (and converted); raises InvalidAnswer."""
        ...


@dataclass(frozen=True)
class InputOutcome:
    """How an input request ended: the values given, or declined (by the person, or by nobody
    answering in time) with the reason in words."""

    action: Literal["accept", "decline"]
    values: dict[str, Any] = field(default_factory=dict)
    reason: str = ""


@dataclass(frozen=True)
class InputReply:
    """What answering an input request did: `accepted`, or not and why (`text`, for the
    person); the request stays open after a bad answer."""

    accepted: bool
    text: str


@dataclass
class InputRequest(HumanRequest):
    """One open request for input: who asks (a third party, or the agent itself), for which
    call, their message, and a form to fill in or a page (`url`) to open."""

    asker: str
    """Who asks, in words ("MCP server 'booking'"): shown first, so no one mistakes it for
    the agent or the runtime."""
    call: str
    """The tool call it is for ("book_table"), or "" when it came outside any call."""
    message: str
    form: InputForm | None = None
    url: str | None = None
    outcome: InputOutcome | None = None
    # Woken when the outcome is set, or a note for the person (a bad answer) is waiting.
    changed: anyio.Event = field(default_factory=anyio.Event)
    notes: list[str] = field(default_factory=list)
    from_agent: bool = False
    """Asked by the agent itself (request_human_input), not by a third party for a call."""
    default: dict[str, Any] | None = None
    """The values applied when nobody answers in time (or the person declines); None: none."""
    choice_field: str | None = None
    """Set for an approval with options of its own: the one field, whose value is the choice."""
    schema: dict[str, Any] | None = None
    """The form's JSON schema, kept so the form can be rebuilt after a restart (None: the form
    cannot be, so the request ends with a restart)."""

    @property
    def kind(self) -> Literal["approval", "input"]:
        return "approval" if self.choice_field is not None else "input"

    def has_answer(self) -> bool:
        return self.outcome is not None

    def default_words(self) -> str:
        if self.default is None:
            return ""
        if self.choice_field is not None:
            return str(self.default.get(self.choice_field, ""))
        return values_words(self.default)

    def question(self) -> str:
        return _with_similar(self._question(), self.similar)

    def _question(self) -> str:
        if self.from_agent:
            return self._agent_question()
        call = f" for the call to {self.call}" if self.call else ""
        head = (
            f"Input requested [{self.id}] by {self.asker}{call}: {quoted(self.message)}\n"
            f"{self.asker[0].upper()}{self.asker[1:]} asks this, not the agent."
        )
        if self.url is not None:
            return (
                f"{head} It asks you to open {self.url}; open it only if you trust that site.\n"
                f"Reply /answer {self.id} once you have opened it (or to go ahead), or "
                f"/decline {self.id}."
            )
        fields = self.form.describe() if self.form is not None else "none"
        example = self.form.example() if self.form is not None else ""
        return (
            f"{head} Do not type passwords or other secrets here: your answer goes to it.\n"
            f"Fields: {fields}\n"
            f"Reply /answer {self.id} {example} to give them, or /decline {self.id}."
        )

    def _agent_question(self) -> str:
        fields = self.form.describe() if self.form is not None else "none"
        example = self.form.example() if self.form is not None else ""
        wait = duration_words(self.timeout_seconds or 0)
        default = self.default_words()
        fallback = f"{default} (the agent's default)" if default else "nothing is decided"
        if self.choice_field is not None:
            return (
                f"Choice requested [{self.id}] by the agent: {quoted(self.message)}\n"
                f"{fields}\nWith no answer in {wait}: {fallback}.\n"
                f"Reply /answer {self.id} <option> to choose, or /decline {self.id}."
            )
        return (
            f"Input requested [{self.id}] by the agent: {quoted(self.message)}\n"
            f"Fields: {fields}\nWith no answer in {wait}: {fallback}.\n"
            f"Reply /answer {self.id} {example} to give them, or /decline {self.id}."
        )

    def note(self, text: str) -> None:
        """Leave `text` for the person; the task waiting for the answer sends it."""
        self.notes.append(text)
        self.changed.set()


def first_answer(request: ApprovalRequest | InputRequest) -> str:
    """The answer that counted, in words ("deny: not on a Friday", "date=2026-12-24"): what a
    late answer is told."""
    decision = request.decision
    if not request.has_answer() and decision is not None:  # read back from the store
        if decision.status == "declined":
            return said("declined", decision.reason)
        if decision.kind == "approval":
            return said(decision.choice or "", decision.reason)
        return values_words(decision.values)
    if isinstance(request, ApprovalRequest):
        if request.verdict is None:
            return "no answer"
        yes, no = request.options
        chosen = yes if request.verdict.decision == "allow" else no
        return said(chosen, request.answer_reason)
    outcome = request.outcome
    if outcome is None:
        return "no answer"
    if outcome.action == "decline":
        return said("declined", request.answer_reason)
    if request.choice_field is not None:
        return str(outcome.values.get(request.choice_field, ""))
    return values_words(outcome.values)


def decision_of(request: ApprovalRequest | InputRequest, waited: float) -> HumanDecision:
    """How `request` ended, from its answer (or none) and its default."""
    if isinstance(request, ApprovalRequest):
        yes, no = request.options
        default = request.default or no
        base: dict[str, Any] = {
            "request_id": request.id,
            "session": request.session,
            "kind": "approval",
            "question": request.summary if request.asker else f"{request.tool} {request.summary}",
            "waited_seconds": waited,
            "default_words": default,
        }
        if request.verdict is None:
            return HumanDecision(**base, status="timed_out", choice=default, applied_default=True)
        chosen = yes if request.verdict.decision == "allow" else no
        return HumanDecision(**base, status="answered", choice=chosen, reason=request.answer_reason)
    kind: Literal["approval", "input"] = "approval" if request.choice_field else "input"
    common: dict[str, Any] = {
        "request_id": request.id,
        "session": request.session,
        "kind": kind,
        "question": request.message,
        "waited_seconds": waited,
        "default_words": request.default_words(),
        "reason": request.answer_reason,
    }
    outcome = request.outcome
    if outcome is not None and outcome.action == "accept":
        values = dict(outcome.values)
        return HumanDecision(
            **common, status="answered", values=values, choice=_choice(request, values)
        )
    status: RequestStatus = "timed_out" if outcome is None else "declined"
    if request.default is None:
        return HumanDecision(**common, status=status)
    values = dict(request.default)
    return HumanDecision(
        **common,
        status=status,
        values=values,
        choice=_choice(request, values),
        applied_default=True,
    )


def _choice(request: InputRequest, values: dict[str, Any]) -> str | None:
    if request.choice_field is None:
        return None
    return str(values.get(request.choice_field, ""))


def _with_similar(question: str, similar: tuple[SimilarCase, ...]) -> str:
    return f"{question}\n{similar_for_person(similar)}" if similar else question


def case_request(request: ApprovalRequest | InputRequest) -> CaseRequest:
    """A request as the learning loop sees it. The agent's own requests name no tool: their
    question is the whole request (the tool they came through would make every one of them
    look alike)."""
    if isinstance(request, ApprovalRequest):
        tool = "" if request.asker else request.tool
        return CaseRequest(
            request.session, "approval", tool, request.summary, request.reasons, request.context
        )
    kind: Literal["approval", "input"] = "approval" if request.choice_field else "input"
    tool = "" if request.from_agent else request.call
    return CaseRequest(request.session, kind, tool, request.message, (), request.context)
