"""Asking a person: requests that wait for a person's answer, a yes or no or a filled-in form.

Two kinds of request share one exchange. A call that needs a person's approval waits in
:meth:`Approvals.ask` (a yes/no request); an MCP server that asks the user for input during a
call (MCP elicitation) waits in :meth:`Approvals.ask_input` (a request with a form, or a page to
open). The question reaches the user through the outbox (the channel they are on) with an id;
their answer comes back as an ordinary message (`/approve a3f9`, `/deny a3f9 not on a Friday`,
or just `yes`/`no` while only one approval is open; `/answer b71c date=2026-12-24`, `/decline
b71c`), which the runtime takes out of the event stream before the agent sees it
(:meth:`Approvals.answer_from_text`). Code can answer too (:meth:`resolve`, :meth:`answer_input`,
:meth:`decline_input`), and a deployment may replace the approval exchange with a handler (a web
console, a chat bot's buttons). No answer within the timeout is a no (a declined input request).

What an input request's form accepts is the asker's business (:class:`InputForm`): an answer it
cannot take is told to the user, and the request stays open for a better one.

The agent's own requests to a person (`request_human_approval`, `request_human_input` in
:mod:`wakeful.toolkits.collaboration.human`) are the same two kinds in the same queue, opened
with a priority (the outbox's urgency, which decides how the person is reached), a timeout of
their own and a default: :meth:`Approvals.open_approval` / :meth:`Approvals.open_input` put the
question, :meth:`Approvals.decision` waits for the answer and applies the default when none
comes. Every request ends as a :class:`HumanDecision` (told to `decision_listeners`, the
learning loop's hook). The first answer wins; an answer to a request that was already answered
or has timed out is recorded on it (:class:`LateAnswer`), not applied, and the person is told so
(through :meth:`Approvals.serve`, which the runtime runs).
"""

from __future__ import annotations

import logging
import re
import secrets
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Final, Literal, Protocol

import anyio

from ..core.records import CaseDecision
from ..errors import StoreError
from ..events import utc_now
from ..services import Outbox
from .cases import CaseBook, CaseRequest, SimilarCase, decision_note, similar_for_person
from .verdict import Verdict

log = logging.getLogger(__name__)

Priority = Literal["low", "normal", "high", "urgent"]
"""How pressing a request is: the urgency of the question's message, from which the delivery
policy chooses how the person is reached (urgent: every channel in turn until read)."""

RequestStatus = Literal["answered", "declined", "timed_out"]

# Closed requests kept to recognise a late or second answer (and to list recent decisions).
CLOSED_KEPT: Final = 256
# Notes for the person (about late answers) kept while nothing sends them.
NOTES_KEPT: Final = 100

_COMMAND = re.compile(
    r"^\s*/?(?P<verb>approve|deny|reject)\s+(?P<id>[0-9a-f]{4,12})\b\s*(?P<why>.*)$",
    re.IGNORECASE | re.DOTALL,
)
# Answers to input requests: the slash is required, since "answer" and "decline" are words a
# user may well start an ordinary message with.
_INPUT_COMMAND = re.compile(
    r"^\s*/(?P<verb>answer|decline)\s+(?P<id>[0-9a-f]{4,12})\b\s*(?P<rest>.*)$",
    re.IGNORECASE | re.DOTALL,
)
_YES = frozenset({"yes", "y", "approve", "approved", "ok", "allow", "是", "好", "批准", "同意"})
_NO = frozenset({"no", "n", "deny", "denied", "reject", "不", "否", "拒絕", "拒绝", "不同意"})


@dataclass(frozen=True)
class LateAnswer:
    """An answer that came after its request was answered or had timed out: recorded on the
    request, not applied."""

    answer: str
    """What the person answered, in words ("approve", "deny: not now", "date=2026-12-24")."""
    at: datetime
    why_not_applied: str


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
        said = self._said()
        return f"{said}\n{self.case_note}" if self.case_note else said

    def _said(self) -> str:
        head = f"request [{self.request_id}] ({_quoted(self.question)})"
        answer = self.choice if self.kind == "approval" else _values_words(self.values)
        why = f' Their reason: "{self.reason}".' if self.reason else ""
        if self.status == "answered":
            return f"The approver answered {head}: {answer}.{why}"
        if self.status == "declined":
            said = f"The approver declined to answer {head}.{why}"
        else:
            said = f"No answer to {head} in {duration_words(self.waited_seconds)}."
        if self.applied_default:
            return f"{said} Applied the default: {self.default_words}."
        return (
            f"{said} No default was set, so nothing was decided: go on without it, or ask again "
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


DecisionListener = Callable[[HumanDecision], None]
"""Told of every request that ended (e.g. to keep it as a case for the learning loop)."""


def duration_words(seconds: float) -> str:
    """A duration as a person says it: "45 s", "5 min", "2 h"."""
    if seconds < 120:
        return f"{seconds:.3g} s" if seconds < 10 else f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.3g} min"
    return f"{seconds / 3600:.3g} h"


def _values_words(values: dict[str, Any]) -> str:
    return " ".join(f"{name}={value}" for name, value in values.items()) or "(no values)"


@dataclass
class ApprovalRequest:
    """One open yes/no question: which call (or, asked by the agent, which question), why it
    needs a person, and (once given) the answer."""

    id: str
    session: str
    tool: str
    summary: str
    reasons: tuple[str, ...]
    created: datetime = field(default_factory=utc_now)
    answered: anyio.Event = field(default_factory=anyio.Event)
    verdict: Verdict | None = None
    priority: Priority = "high"
    asker: str = ""
    """Who asks when it is not the safety gate holding a call ("the agent"); `summary` is then
    their question."""
    options: tuple[str, str] = ("approve", "deny")
    """The words of yes and no, as the asker named them."""
    default: str | None = None
    """The option applied when nobody answers in time; None: no (the call is not run)."""
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

    def question(self) -> str:
        return _with_similar(self._question(), self.similar)

    def _question(self) -> str:
        if self.asker:
            yes, no = self.options
            why = "".join(f"\n{reason}" for reason in self.reasons)
            default = self.default or no
            return (
                f"Approval requested [{self.id}] by {self.asker}: {_quoted(self.summary)}{why}\n"
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

_QUOTE_LIMIT = 500


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
class InputRequest:
    """One open request for input: who asks (a third party, never the agent), for which call,
    their message, and a form to fill in or a page (`url`) to open."""

    id: str
    session: str
    asker: str
    """Who asks, in words ("MCP server 'booking'"): shown first, so no one mistakes it for
    the agent or the runtime."""
    call: str
    """The tool call it is for ("book_table"), or "" when it came outside any call."""
    message: str
    form: InputForm | None = None
    url: str | None = None
    created: datetime = field(default_factory=utc_now)
    outcome: InputOutcome | None = None
    # Woken when the outcome is set, or a note for the person (a bad answer) is waiting.
    changed: anyio.Event = field(default_factory=anyio.Event)
    notes: list[str] = field(default_factory=list)
    priority: Priority = "high"
    from_agent: bool = False
    """Asked by the agent itself (request_human_input), not by a third party for a call."""
    default: dict[str, Any] | None = None
    """The values applied when nobody answers in time (or the person declines); None: none."""
    choice_field: str | None = None
    """Set for an approval with options of its own: the one field, whose value is the choice."""
    timeout_seconds: float | None = None
    answer_reason: str = ""
    late: list[LateAnswer] = field(default_factory=list)
    decision: HumanDecision | None = None
    started: float = field(default_factory=time.monotonic)
    context: str = ""
    similar: tuple[SimilarCase, ...] = ()
    case_number: int | None = None

    def default_words(self) -> str:
        if self.default is None:
            return ""
        if self.choice_field is not None:
            return str(self.default.get(self.choice_field, ""))
        return _values_words(self.default)

    def question(self) -> str:
        return _with_similar(self._question(), self.similar)

    def _question(self) -> str:
        if self.from_agent:
            return self._agent_question()
        call = f" for the call to {self.call}" if self.call else ""
        head = (
            f"Input requested [{self.id}] by {self.asker}{call}: {_quoted(self.message)}\n"
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
                f"Choice requested [{self.id}] by the agent: {_quoted(self.message)}\n"
                f"{fields}\nWith no answer in {wait}: {fallback}.\n"
                f"Reply /answer {self.id} <option> to choose, or /decline {self.id}."
            )
        return (
            f"Input requested [{self.id}] by the agent: {_quoted(self.message)}\n"
            f"Fields: {fields}\nWith no answer in {wait}: {fallback}.\n"
            f"Reply /answer {self.id} {example} to give them, or /decline {self.id}."
        )

    def note(self, text: str) -> None:
        """Leave `text` for the person; the task waiting for the answer sends it."""
        self.notes.append(text)
        self.changed.set()


def _quoted(text: str) -> str:
    """Third-party text, on one line, cut short and in quotes, so it reads as someone's words."""
    line = " ".join(text.split())
    if len(line) > _QUOTE_LIMIT:
        line = line[: _QUOTE_LIMIT - 1] + "…"
    return f'"{line}"'


class Approvals:
    """Open requests to a person (the gate's approvals, third parties' input requests and the
    agent's own requests), asked through the outbox and answered by the person's reply: one
    queue, one id space."""

    def __init__(
        self,
        outbox: Outbox,
        *,
        timeout_seconds: float = 900.0,
        handler: ApprovalHandler | None = None,
        cases: CaseBook | None = None,
    ) -> None:
        self.outbox = outbox
        # Where decisions are kept as cases, and similar earlier ones found; None: nowhere.
        self.cases = cases
        self.timeout_seconds = timeout_seconds
        self.handler = handler
        self.decision_listeners: list[DecisionListener] = []
        self._open: dict[str, ApprovalRequest | InputRequest] = {}
        self._closed: OrderedDict[str, ApprovalRequest | InputRequest] = OrderedDict()
        # Notes for the person (late answers), sent by `serve`; the oldest dropped past NOTES_KEPT.
        self._notes: list[tuple[str, str]] = []
        self._notes_waiting = anyio.Event()

    def pending(self, session: str | None = None) -> list[ApprovalRequest]:
        """The open approval requests (of one session)."""
        return [
            r
            for r in self._open.values()
            if isinstance(r, ApprovalRequest) and (session is None or r.session == session)
        ]

    def pending_inputs(self, session: str | None = None) -> list[InputRequest]:
        """The open input requests (of one session)."""
        return [
            r
            for r in self._open.values()
            if isinstance(r, InputRequest) and (session is None or r.session == session)
        ]

    def closed(self, session: str | None = None) -> list[ApprovalRequest | InputRequest]:
        """The most recently ended requests (of one session), oldest first, each with its
        `decision` and the `late` answers that came after it."""
        return [r for r in self._closed.values() if session is None or r.session == session]

    def get(self, request_id: str) -> ApprovalRequest | InputRequest | None:
        """An open request, or one of the recently ended ones."""
        key = request_id.lower()
        return self._open.get(key) or self._closed.get(key)

    def _new_id(self) -> str:
        request_id = secrets.token_hex(2)
        while request_id in self._open or request_id in self._closed:
            request_id = secrets.token_hex(3)
        return request_id

    # --- asking ----------------------------------------------------------------------------

    async def ask(
        self,
        session: str,
        tool: str,
        summary: str,
        reasons: tuple[str, ...],
        *,
        context: str = "",
    ) -> Verdict:
        """Wait for a person's answer about one call (the safety gate's "ask"); no answer in
        time is a deny. `context` is what the user last asked (kept with the case)."""
        request = ApprovalRequest(self._new_id(), session, tool, summary, reasons, context=context)
        if self.handler is not None:
            request.similar = await self._similar(request)
            verdict = await self.handler(request)
            approved = verdict.decision == "allow"
            case_note = await self._keep_case(
                request, "approved" if approved else "denied", " ".join(verdict.reasons)
            )
            return Verdict(verdict.decision, (*verdict.reasons, *case_note), "human")
        await self._post(request)
        decision = await self._settle(request)
        case_note = (decision.case_note,) if decision.case_note else ()
        if request.verdict is None:
            return Verdict(
                "deny",
                (
                    f"Nobody answered the approval request [{request.id}] within "
                    f"{self._timeout(request):g} s, so the call was not run. Ask the user "
                    "directly if it is still needed.",
                    *case_note,
                ),
                "human",
            )
        return replace(request.verdict, reasons=(*request.verdict.reasons, *case_note))

    async def ask_input(
        self,
        session: str,
        *,
        asker: str,
        call: str,
        message: str,
        form: InputForm | None = None,
        url: str | None = None,
    ) -> InputOutcome:
        """Ask a person for input on behalf of `asker` (a third party) and wait for it: the
        values of `form`, or the go-ahead to open `url`. Declined when the person says so or
        nobody answers within the timeout; a bad answer is told to the person, and the request
        stays open until the timeout."""
        request = InputRequest(self._new_id(), session, asker, call, message, form, url)
        await self._post(request)
        await self._settle(request)
        if request.outcome is None:
            return InputOutcome(
                "decline",
                reason=(
                    f"nobody answered the input request [{request.id}] within "
                    f"{self._timeout(request):g} s, so it was declined"
                ),
            )
        return request.outcome

    async def open_approval(
        self,
        session: str,
        question: str,
        *,
        options: tuple[str, str] = ("approve", "deny"),
        default: str | None = None,
        priority: Priority = "normal",
        timeout_seconds: float | None = None,
        reasons: tuple[str, ...] = (),
        asker: str = "the agent",
        tool: str = "request_human_approval",
    ) -> ApprovalRequest:
        """Put a yes/no question of `asker` to the person (the first option is yes) and return
        the open request at once; :meth:`decision` waits for its answer (from the `handler`,
        when the deployment has one, as for the gate's questions)."""
        request = ApprovalRequest(
            self._new_id(),
            session,
            tool,
            question,
            reasons,
            priority=priority,
            asker=asker,
            options=options,
            default=default,
            timeout_seconds=timeout_seconds
            if timeout_seconds is not None
            else self.timeout_seconds,
        )
        await self._post(request)
        return request

    async def open_input(
        self,
        session: str,
        question: str,
        form: InputForm,
        *,
        default: dict[str, Any] | None = None,
        priority: Priority = "normal",
        timeout_seconds: float | None = None,
        choice_field: str | None = None,
        tool: str = "request_human_input",
    ) -> InputRequest:
        """Put the agent's own request for input (or, with `choice_field`, for a choice among
        options) to the person and return the open request at once; :meth:`decision` waits."""
        request = InputRequest(
            self._new_id(),
            session,
            "the agent",
            tool,
            question,
            form,
            priority=priority,
            from_agent=True,
            default=default,
            choice_field=choice_field,
            timeout_seconds=timeout_seconds
            if timeout_seconds is not None
            else self.timeout_seconds,
        )
        await self._post(request)
        return request

    async def decision(self, request: ApprovalRequest | InputRequest) -> HumanDecision:
        """Wait for the answer to an open request, or its timeout (then its default applies);
        the request is closed. Cancelled, the request is withdrawn without a decision."""
        return await self._settle(request)

    async def _post(self, request: ApprovalRequest | InputRequest) -> None:
        request.similar = await self._similar(request)
        self._open[request.id] = request
        if self.handler is not None and isinstance(request, ApprovalRequest):
            return  # the handler answers yes/no questions in place of the message exchange
        try:
            await self.outbox.send(request.session, request.question(), urgency=request.priority)
        except BaseException:
            self._open.pop(request.id, None)
            raise

    def _timeout(self, request: ApprovalRequest | InputRequest) -> float:
        given = request.timeout_seconds
        return given if given is not None else self.timeout_seconds

    async def _settle(self, request: ApprovalRequest | InputRequest) -> HumanDecision:
        if request.decision is not None:
            return request.decision
        settled = False
        try:
            with anyio.move_on_after(self._timeout(request)):
                if isinstance(request, ApprovalRequest) and self.handler is not None:
                    verdict = await self.handler(request)
                    if request.verdict is None:
                        request.verdict = Verdict(verdict.decision, verdict.reasons, "human")
                        request.answer_reason = " ".join(verdict.reasons)
                elif isinstance(request, ApprovalRequest):
                    await request.answered.wait()
                else:
                    await self._wait_input(request)
            decision = self._close(request)
            settled = True
        finally:
            if not settled:
                self._open.pop(request.id, None)
        return await self._recorded(request, decision)

    # --- the learning loop -----------------------------------------------------------------

    async def _similar(self, request: ApprovalRequest | InputRequest) -> tuple[SimilarCase, ...]:
        """The similar earlier cases; the request's context is taken now, as it arises."""
        if self.cases is None:
            return ()
        request.context = request.context or self.cases.context_for(request.session)
        try:
            return tuple(await self.cases.similar(_case_request(request)))
        except StoreError as exc:  # the question goes without precedent
            log.warning("the earlier cases could not be read: %s", exc)
            return ()

    async def _recorded(
        self, request: ApprovalRequest | InputRequest, decision: HumanDecision
    ) -> HumanDecision:
        """`decision`, kept as a case (when there is a case book) and naming it."""
        timed_out = decision.status == "timed_out"
        reason = decision.reason
        if timed_out:
            outcome = (
                f"applied the default: {decision.default_words}"
                if decision.applied_default
                else "nothing was decided"
            )
            reason = f"no answer in {duration_words(decision.waited_seconds)}; {outcome}"
        if isinstance(request, ApprovalRequest):
            chosen: CaseDecision = "approved" if decision.choice == request.options[0] else "denied"
        elif decision.status == "answered" or (timed_out and decision.applied_default):
            chosen = "answered"
        else:
            chosen = "declined"
        # A third party's form may hold what should not be kept: only the agent's own
        # requests keep their answers.
        keep_answer = isinstance(request, InputRequest) and request.from_agent
        answer = (dict(decision.values) or None) if keep_answer else None
        note = await self._keep_case(request, chosen, reason, timed_out=timed_out, answer=answer)
        if not note:
            return decision
        kept = replace(decision, case_note=note[0], case=request.case_number)
        request.decision = kept
        return kept

    async def _keep_case(
        self,
        request: ApprovalRequest | InputRequest,
        decision: CaseDecision,
        reason: str,
        *,
        timed_out: bool = False,
        answer: dict[str, Any] | None = None,
    ) -> tuple[str, ...]:
        """Keep a decision as a case; the note for the agent (one, or none without a book)."""
        if self.cases is None:
            return ()
        try:
            with anyio.CancelScope(shield=True):  # a decision made is kept, even mid-cancel
                case = await self.cases.record(
                    _case_request(request),
                    decision,
                    reason,
                    timed_out=timed_out,
                    request_id=request.id,
                    answer=answer,
                )
        except StoreError as exc:
            log.warning("the decision on request %s was not kept as a case: %s", request.id, exc)
            return ()
        request.case_number = case.number
        return (decision_note(case, request.similar),)

    async def _wait_input(self, request: InputRequest) -> None:
        while request.outcome is None:
            await request.changed.wait()
            request.changed = anyio.Event()
            notes, request.notes = request.notes, []
            for note in notes:
                await self.outbox.send(request.session, note, urgency="high")

    def _close(self, request: ApprovalRequest | InputRequest) -> HumanDecision:
        """End a request: out of the queue, among the recently closed, its decision told."""
        self._open.pop(request.id, None)
        decision = _decision_of(request, time.monotonic() - request.started)
        request.decision = decision
        self._closed[request.id] = request
        while len(self._closed) > CLOSED_KEPT:
            self._closed.popitem(last=False)
        for listener in self.decision_listeners:
            try:
                listener(decision)
            except Exception:
                log.exception("a decision listener failed on request %s", request.id)
        return decision

    # --- answering -------------------------------------------------------------------------

    def answer_input(self, request_id: str, answer: str | dict[str, Any]) -> InputReply:
        """Answer an open input request with typed text (`date=2026-12-24 guests=4`) or with
        values (from code). A bad answer is not taken: the reply says why, and the request
        stays open. An answer to a request already answered or timed out is recorded, not
        applied, and the reply (and a note to the person) says so."""
        request = self._open.get(request_id.lower())
        if not isinstance(request, InputRequest) or request.outcome is not None:
            words = answer if isinstance(answer, str) else _values_words(answer)
            late = self._after_the_fact(request_id, None, InputRequest, words.strip())
            return InputReply(False, late or _no_input_request(request_id))
        values: dict[str, Any] = {}
        if request.form is not None:
            try:
                if isinstance(answer, str):
                    values = request.form.parse(answer)
                else:
                    values = request.form.check(dict(answer))
            except InvalidAnswer as exc:
                return InputReply(
                    False,
                    f"That answer to [{request.id}] was not taken: {exc} Reply /answer "
                    f"{request.id} {request.form.example()}, or /decline {request.id}.",
                )
        request.outcome = InputOutcome("accept", values)
        request.changed.set()
        return InputReply(True, f"Answered [{request.id}]; the answer went to {request.asker}.")

    def decline_input(self, request_id: str, reason: str = "") -> bool:
        """Decline an open input request; False when there is no such request open (an answer
        to one that ended is recorded and the person told, see :meth:`answer_input`)."""
        request = self._open.get(request_id.lower())
        if not isinstance(request, InputRequest) or request.outcome is not None:
            self._after_the_fact(request_id, None, InputRequest, _said("decline", reason))
            return False
        why = f"the user declined: {reason}" if reason else "the user declined"
        request.outcome = InputOutcome("decline", reason=why)
        request.answer_reason = reason
        request.changed.set()
        return True

    def resolve(self, request_id: str, approve: bool, reason: str = "") -> bool:
        """Answer an open approval request; False when there is no such request open. The
        first answer wins: a second one, or one after the timeout, is recorded on the request,
        not applied, and the person is told."""
        request = self._open.get(request_id.lower())
        if not isinstance(request, ApprovalRequest) or request.verdict is not None:
            words = _said("approve" if approve else "deny", reason)
            self._after_the_fact(request_id, None, ApprovalRequest, words)
            return False
        request.answer_reason = reason
        if approve:
            reasons = (f"Approved by the user{': ' + reason if reason else '.'}",)
            request.verdict = Verdict("allow", reasons, "human")
        else:
            reasons = (f"The user declined{': ' + reason if reason else '.'}",)
            request.verdict = Verdict("deny", reasons, "human")
        request.answered.set()
        return True

    def answer_from_text(self, session: str, text: str) -> bool:
        """Treat a user's message as an answer if it is one; True when it answered a request.

        `/approve ID`, `/deny ID why` answer that request; a bare yes/no (in English or
        Chinese) answers the one open approval of the session, and only when there is one.
        `/answer ID field=value …` and `/decline ID` answer an input request; a bad answer is
        consumed too, and the person is told what was wrong (the request stays open). An
        answer naming a request of the session that was already answered or has timed out is
        consumed, recorded and not applied; the person is told."""
        inputs = _INPUT_COMMAND.match(text)
        if inputs is not None:
            request = self.get(inputs.group("id"))
            if not isinstance(request, InputRequest) or request.session != session:
                return False
            verb, rest = inputs.group("verb").lower(), inputs.group("rest").strip()
            if request.id not in self._open or request.outcome is not None:
                words = _said("decline", rest) if verb == "decline" else rest
                return self._after_the_fact(request.id, session, InputRequest, words) is not None
            if verb == "decline":
                return self.decline_input(request.id, rest)
            reply = self.answer_input(request.id, inputs.group("rest"))
            if not reply.accepted:
                request.note(reply.text)
            return True
        match = _COMMAND.match(text)
        if match is not None:
            request = self.get(match.group("id"))
            if not isinstance(request, ApprovalRequest) or request.session != session:
                return False
            approve = match.group("verb").lower() == "approve"
            why = match.group("why").strip()
            if request.id not in self._open or request.verdict is not None:
                words = _said("approve" if approve else "deny", why)
                return self._after_the_fact(request.id, session, ApprovalRequest, words) is not None
            return self.resolve(request.id, approve, why)
        word = text.strip().strip(".!。！").lower()
        if word not in _YES and word not in _NO:
            return False
        open_here = [r for r in self.pending(session) if r.verdict is None]
        if len(open_here) != 1:
            return False
        return self.resolve(open_here[0].id, word in _YES)

    def _after_the_fact(
        self,
        request_id: str,
        session: str | None,
        kind: type[ApprovalRequest] | type[InputRequest],
        answer: str,
    ) -> str | None:
        """Record an answer to a request no longer open for answers (answered already, or
        timed out) and tell the person; the note, or None when no such request is known."""
        request = self.get(request_id)
        if not isinstance(request, kind) or (session is not None and request.session != session):
            return None
        decision = request.decision
        if decision is None or decision.status != "timed_out":
            first = _first_answer(request)
            why = f"it was already answered ({first}); the first answer counts"
        elif decision.applied_default:
            why = (
                f"it had timed out after {duration_words(decision.waited_seconds)}, and the "
                f"default ({decision.default_words}) was applied"
            )
        else:
            why = (
                f"it had timed out after {duration_words(decision.waited_seconds)}, and the "
                "asker went on without an answer"
            )
        request.late.append(LateAnswer(answer or "(empty)", utc_now(), why))
        shown = f" ({answer})" if answer else ""
        note = (
            f"Your answer to [{request.id}]{shown} was recorded but not applied: {why}. "
            "If it still matters, say so in a message of your own."
        )
        self._tell(request.session, note)
        return note

    # --- notes to the person ---------------------------------------------------------------

    def _tell(self, session: str, text: str) -> None:
        self._notes.append((session, text))
        if len(self._notes) > NOTES_KEPT:
            dropped = self._notes.pop(0)
            log.warning("a note to the person was dropped (nothing sends them): %s", dropped[1])
        self._notes_waiting.set()

    async def flush_notes(self) -> int:
        """Send the notes waiting for the person (about late answers); how many were sent."""
        notes, self._notes = self._notes, []
        self._notes_waiting = anyio.Event()
        for session, text in notes:
            await self.outbox.send(session, text, urgency="normal")
        return len(notes)

    async def serve(self) -> None:
        """Send notes to the person as they arise, until cancelled (the runtime runs it in its
        task group)."""
        while True:
            await self._notes_waiting.wait()
            await self.flush_notes()


def _said(verb: str, reason: str) -> str:
    return f"{verb}: {reason}" if reason else verb


def _first_answer(request: ApprovalRequest | InputRequest) -> str:
    if isinstance(request, ApprovalRequest):
        if request.verdict is None:
            return "no answer"
        yes, no = request.options
        chosen = yes if request.verdict.decision == "allow" else no
        return _said(chosen, request.answer_reason)
    outcome = request.outcome
    if outcome is None:
        return "no answer"
    if outcome.action == "decline":
        return _said("declined", request.answer_reason)
    if request.choice_field is not None:
        return str(outcome.values.get(request.choice_field, ""))
    return _values_words(outcome.values)


def _decision_of(request: ApprovalRequest | InputRequest, waited: float) -> HumanDecision:
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


def _no_input_request(request_id: str) -> str:
    return (
        f"No input request is open with id {request_id}: it was answered, declined or timed "
        "out. /approvals lists what is waiting for you."
    )


def _with_similar(question: str, similar: tuple[SimilarCase, ...]) -> str:
    return f"{question}\n{similar_for_person(similar)}" if similar else question


def _case_request(request: ApprovalRequest | InputRequest) -> CaseRequest:
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
