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
question. The outcome goes where the request says (`answered_in`): back to a call that waits
for it (:meth:`Approvals.decision`), or, for a request the agent did not wait for, to its
session as a `human.answer` event, which the queue adds itself while it is served
(:meth:`Approvals.serve`, which the runtime runs). Every request ends as a
:class:`~wakeful.safety.decisions.HumanDecision` (told to `decision_listeners`, the learning
loop's hook). The first answer wins; an answer to a request that was already answered or has
timed out is recorded on it (:class:`~wakeful.safety.decisions.LateAnswer`), not applied, and
the person is told so.

With a repository (:class:`~wakeful.core.repositories.HumanRequestRepository`, the store's),
every request is stored as it opens and as it ends, so a restart loses none
(:meth:`Approvals.restore`): a request whose answer goes to an event is open again with the time
it had left (its default applied at once when its deadline passed meanwhile), an outcome not yet
handed over is handed over once, and a request whose call ended with the restart is closed as
ended, which is what a late answer to it is told. A stored request that cannot be rebuilt (its
data damaged, or written by another version) ends too, and unless it was answered in its call,
its session is told so in a `human.answer` event, once: the agent does not wait forever. As
one worker of several sharing a store, each session's requests are taken up by the worker that
takes the session over (``restore(session=…)``) and dropped by the one that loses it
(:meth:`Approvals.forget_session`), and a session's own writes go through its lease's fence
(``session_writes``).

The requests themselves are in :mod:`wakeful.safety.human_requests`, their stored form in
:mod:`wakeful.safety.request_records`; this module is the queue.
"""

from __future__ import annotations

import json
import logging
import re
import secrets
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Final

import anyio
from anyio.abc import TaskGroup, TaskStatus

from ..core.records import CaseDecision, HumanRequestRecord, HumanRequestStatus
from ..core.repositories import HumanRequestRepository
from ..core.session_writes import SessionWrites, shared_writes
from ..errors import SessionMoved, StoreError, UserError
from ..events import Event, utc_now
from ..services import Outbox
from .cases import CaseBook, SimilarCase, decision_note
from .decisions import (
    DecisionListener,
    HumanDecision,
    LateAnswer,
    RequestStatus,
    duration_words,
    said,
    values_words,
)
from .human_requests import (
    AnsweredIn,
    ApprovalHandler,
    ApprovalRequest,
    HumanRequest,
    InputForm,
    InputOutcome,
    InputReply,
    InputRequest,
    InvalidAnswer,
    Priority,
    case_request,
    decision_of,
    first_answer,
)
from .request_records import (
    NOT_RESTORED,
    RESTART_ENDED,
    FormOf,
    answer_event,
    answered_in_of,
    record_of,
    request_of,
    restart_answer_event,
    set_ending,
    stand_in,
)
from .verdict import Verdict

__all__ = [
    "AnsweredIn",
    "ApprovalHandler",
    "ApprovalRequest",
    "Approvals",
    "DecisionListener",
    "HumanDecision",
    "HumanRequest",
    "InputForm",
    "InputOutcome",
    "InputReply",
    "InputRequest",
    "InvalidAnswer",
    "LateAnswer",
    "Priority",
    "RequestStatus",
    "answer_event",
    "duration_words",
]

log = logging.getLogger(__name__)

DeliverEvent = Callable[[Event], Awaitable[object]]
"""Stores an event and hands it to its session, dropping one whose id is stored already."""

# Closed requests kept to recognise a late or second answer (and to list recent decisions).
CLOSED_KEPT: Final = 256
# Notes for the person (about late answers) kept while nothing sends them.
NOTES_KEPT: Final = 100
# Why a request ended without a decision: its call ended, or its question could not be sent.
CALL_ENDED: Final = (
    "the call it was for ended before an answer came (it was cancelled, or the runtime stopped)"
)
NOT_SENT: Final = "the question could not be sent"

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


@dataclass
class _Serving:
    """What a running :meth:`Approvals.serve` gives the queue: where its followers run, where
    `human.answer` events go, and whom to tell that one was handed over."""

    tg: TaskGroup
    deliver: DeliverEvent | None
    settled: Callable[[], None] | None


class Approvals:
    """Open requests to a person (the gate's approvals, third parties' input requests and the
    agent's own requests), asked through the outbox and answered by the person's reply: one
    queue, one id space. With a `repository`, every request is stored (see the module docs);
    None keeps them in memory only."""

    def __init__(
        self,
        outbox: Outbox,
        *,
        timeout_seconds: float = 900.0,
        handler: ApprovalHandler | None = None,
        cases: CaseBook | None = None,
        repository: HumanRequestRepository | None = None,
    ) -> None:
        self.outbox = outbox
        # Where decisions are kept as cases, and similar earlier ones found; None: nowhere.
        self.cases = cases
        self.timeout_seconds = timeout_seconds
        self.handler = handler
        self.repository = repository
        # Where a session's own writes go (opening a request, its outcome delivered; see
        # wakeful.core.session_writes): as one worker of several, the view fenced by the
        # session's lease. Closing a request and a late answer are a person's, and go to
        # `repository` from any worker.
        self.session_writes: SessionWrites = shared_writes
        self.decision_listeners: list[DecisionListener] = []
        self._open: dict[str, ApprovalRequest | InputRequest] = {}
        self._closed: OrderedDict[str, ApprovalRequest | InputRequest] = OrderedDict()
        # Notes for the person (late answers), sent by `serve`; the oldest dropped past NOTES_KEPT.
        self._notes: list[tuple[str, str]] = []
        self._notes_waiting = anyio.Event()
        # Late answers to store (by request id), written by `serve` with the notes.
        self._late_to_store: list[tuple[str, LateAnswer]] = []
        # Requests whose outcome goes to an event, waiting for `serve` to follow them.
        self._to_follow: list[ApprovalRequest | InputRequest] = []
        # Outcomes ready to hand over (of requests that could not be rebuilt at a start),
        # waiting for `serve`.
        self._to_tell: list[tuple[HumanRequest, Event]] = []
        # Requests decided whose `human.answer` event is not handed over yet: id → session.
        self._handing_over: dict[str, str] = {}
        # How to stop following each request whose outcome goes to an event (see
        # `forget_session`), by id, until its decision is made.
        self._following: dict[str, anyio.CancelScope] = {}
        self._serving: _Serving | None = None

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
        `decision` (or why it `ended` without one) and the `late` answers that came after it."""
        return [r for r in self._closed.values() if session is None or r.session == session]

    def get(self, request_id: str) -> ApprovalRequest | InputRequest | None:
        """An open request, or one of the recently ended ones."""
        key = request_id.lower()
        return self._open.get(key) or self._closed.get(key)

    @property
    def answers_as_events(self) -> bool:
        """Whether a request's outcome can go to its session as a `human.answer` event: the
        queue is served with somewhere to deliver events (:meth:`serve`)."""
        return self._serving is not None and self._serving.deliver is not None

    def busy(self, session: str | None = None) -> bool:
        """Whether an answer is on its way to a session (of one session): a request whose
        outcome goes to an event was answered (or its default applied), and the event is not
        handed over yet."""
        if any(s == session or session is None for s in self._handing_over.values()):
            return True
        return any(
            r.answered_in == "event"
            and r.has_answer()
            and (session is None or r.session == session)
            for r in self._open.values()
        )

    def awaiting(self, session: str | None = None) -> bool:
        """Whether an outcome is still to come to a session (to `session`): a request the agent
        did not wait for is open (its answer, or at its deadline the default, will arrive as an
        event), or an outcome is being handed over."""
        return any(s == session or session is None for s in self._handing_over.values()) or any(
            r.answered_in == "event" and (session is None or r.session == session)
            for r in self._open.values()
        )

    async def _new_id(self) -> str:
        """A short id for people to type, used by no request open, recently ended or stored."""
        for attempt in range(24):
            request_id = secrets.token_hex(2 if attempt < 8 else 3)
            if request_id in self._open or request_id in self._closed:
                continue
            if self.repository is not None and await self.repository.get(request_id):
                continue
            return request_id
        return secrets.token_hex(6)

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
        request = ApprovalRequest(
            await self._new_id(), session, tool, summary, reasons, context=context
        )
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
        request = InputRequest(await self._new_id(), session, asker, call, message, form, url)
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
        call_id: str = "",
        answered_in: AnsweredIn = "call",
    ) -> ApprovalRequest:
        """Put a yes/no question of `asker` to the person (the first option is yes) and return
        the open request at once. With `answered_in="call"`, :meth:`decision` waits for its
        answer (from the `handler`, when the deployment has one, as for the gate's questions);
        with "event", the queue follows it and adds its outcome to the session as a
        `human.answer` event (see :meth:`serve`)."""
        request = ApprovalRequest(
            await self._new_id(),
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
            call_id=call_id,
            answered_in=answered_in,
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
        schema: Mapping[str, Any] | None = None,
        call_id: str = "",
        answered_in: AnsweredIn = "call",
    ) -> InputRequest:
        """Put the agent's own request for input (or, with `choice_field`, for a choice among
        options) to the person and return the open request at once; where its outcome goes
        is as for :meth:`open_approval`. `schema` is the form's JSON schema: without it, a
        request answered in an event cannot be taken up after a restart."""
        request = InputRequest(
            await self._new_id(),
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
            schema=dict(schema) if schema is not None else None,
            call_id=call_id,
            answered_in=answered_in,
        )
        await self._post(request)
        return request

    async def decision(self, request: ApprovalRequest | InputRequest) -> HumanDecision:
        """Wait for the answer to an open request, or its timeout (then its default applies);
        the request is closed. Cancelled, a request answered in its call is withdrawn without a
        decision (stored as ended); one answered in an event stays open."""
        return await self._settle(request)

    async def _post(self, request: ApprovalRequest | InputRequest) -> None:
        request.similar = await self._similar(request)
        if self.repository is not None:
            try:
                await self._store_new(request)
            except SessionMoved:
                raise  # another worker runs the session now: it asks what it needs
            except StoreError as exc:  # asked all the same: only a restart would lose it
                log.warning("request %s was not stored, so a restart loses it: %s", request.id, exc)
        self._open[request.id] = request
        if request.answered_in == "event":
            self._follow(request)
        if self.handler is not None and isinstance(request, ApprovalRequest):
            return  # the handler answers yes/no questions in place of the message exchange
        try:
            await self.outbox.send(request.session, request.question(), urgency=request.priority)
        except BaseException as exc:
            # Cancelled mid-send, the question may well have gone out: its call ended.
            why = CALL_ENDED if isinstance(exc, anyio.get_cancelled_exc_class()) else NOT_SENT
            self._open.pop(request.id, None)
            request.ended = why
            await self._store_ending(request, "ended", json.dumps({"ended": why}), True)
            raise

    def _session_repository(self, session: str) -> HumanRequestRepository:
        """Where `session`'s own writes go: its fenced view, else the queue's repository."""
        assert self.repository is not None
        fenced = self.session_writes(session)
        return fenced.human_requests if fenced is not None else self.repository

    async def _store_new(self, request: ApprovalRequest | InputRequest) -> None:
        """Store a new request; another id when its id was taken meanwhile."""
        repository = self._session_repository(request.session)
        for _ in range(3):
            try:
                await repository.add(record_of(request, self._timeout(request)))
                return
            except UserError:  # stored already (another queue on the same store)
                request.id = await self._new_id()
        await repository.add(record_of(request, self._timeout(request)))

    async def _store_ending(
        self, request: HumanRequest, status: HumanRequestStatus, decision: str, delivered: bool
    ) -> None:
        """Record how a request ended; kept even mid-cancel, logged when the store fails."""
        if self.repository is None:
            return
        try:
            with anyio.CancelScope(shield=True):
                await self.repository.close(request.id, status, decision, delivered=delivered)
        except StoreError as exc:
            log.warning("the end of request %s was not stored: %s", request.id, exc)

    def _timeout(self, request: HumanRequest) -> float:
        given = request.timeout_seconds
        return given if given is not None else self.timeout_seconds

    async def _settle(self, request: ApprovalRequest | InputRequest) -> HumanDecision:
        if request.decision is not None:
            return request.decision
        settled = False
        try:
            left = self._timeout(request) - (time.monotonic() - request.started)
            with anyio.move_on_after(max(left, 0.0)):
                if isinstance(request, ApprovalRequest) and self.handler is not None:
                    verdict = await self.handler(request)
                    if request.verdict is None:
                        request.verdict = Verdict(verdict.decision, verdict.reasons, "human")
                        request.answer_reason = " ".join(verdict.reasons)
                elif isinstance(request, ApprovalRequest):
                    await request.answered.wait()
                else:
                    await self._wait_input(request)
            if request.decision is not None:  # another waiter closed it meanwhile
                return request.decision
            decision = self._close(request)
            settled = True
        finally:
            if not settled and request.answered_in == "call" and request.decision is None:
                # Its call ended (cancelled, or the runtime stopped): nobody waits for it now.
                self._open.pop(request.id, None)
                request.ended = CALL_ENDED
                self._keep_closed(request)
                await self._store_ending(request, "ended", json.dumps({"ended": CALL_ENDED}), True)
        with anyio.CancelScope(shield=True):  # a decision made is kept, even mid-cancel
            decision = await self._recorded(request, decision)
            status: HumanRequestStatus = (
                "timed_out" if decision.status == "timed_out" else "answered"
            )
            await self._store_ending(
                request, status, decision.to_json(), request.answered_in == "call"
            )
        return decision

    # --- outcomes as events ----------------------------------------------------------------

    def _follow(self, request: ApprovalRequest | InputRequest) -> None:
        """Have the queue wait for the request's outcome and hand it over as an event."""
        if self._serving is None:
            self._to_follow.append(request)
            return
        self._serving.tg.start_soon(self._hand_over, request, name=f"request {request.id}")

    def _hand_over_outcome(self, request: HumanRequest, event: Event) -> None:
        """Have the queue hand `event`, the outcome of `request`, to its session."""
        self._handing_over[request.id] = request.session
        if self._serving is None:
            self._to_tell.append((request, event))
            return
        self._serving.tg.start_soon(self._deliver, request, event, name=f"request {request.id}")

    async def _hand_over(self, request: ApprovalRequest | InputRequest) -> None:
        """Wait for the request's decision, then hand it to its session as a `human.answer`
        event."""
        with anyio.CancelScope() as following:
            self._following[request.id] = following
            try:
                decision = await self._settle(request)
            except SessionMoved as exc:  # a note to the person refused: see forget_session
                log.warning("request %s is followed by another worker now: %s", request.id, exc)
                return
            finally:
                self._following.pop(request.id, None)
            await self._deliver(request, answer_event(request, decision))

    def forget_session(self, session: str) -> None:
        """Stop following the undecided requests of `session` whose outcome goes to an event:
        the session moved to another worker (as one worker of several), which took them up and
        applies their answers or defaults. Nothing is written."""
        for request in list(self._open.values()):
            following = self._following.get(request.id)
            if request.session == session and following is not None and request.decision is None:
                del self._open[request.id]
                following.cancel()

    async def _deliver(self, request: HumanRequest, event: Event) -> None:
        """Add `event` (the request's outcome) to its session (an id stored already, from a
        hand-over a crash cut short, is dropped) and mark it delivered: once, also across
        restarts."""
        serving = self._serving
        if serving is None or serving.deliver is None:
            self._handing_over.pop(request.id, None)
            log.warning(
                "the outcome of request %s has nowhere to go: the queue is served without a "
                "way to deliver events; it is handed over at the next start",
                request.id,
            )
            return
        try:
            await serving.deliver(event)
            if self.repository is not None:
                await self._session_repository(request.session).mark_delivered(request.id)
        except SessionMoved as exc:
            # Stored, not marked: the session's owner hands it over again at its take-over,
            # and the store drops that second copy by its id.
            log.warning("the outcome of request %s was not marked delivered: %s", request.id, exc)
        finally:
            self._handing_over.pop(request.id, None)
            if serving.settled is not None:
                serving.settled()

    async def serve(
        self,
        deliver: DeliverEvent | None = None,
        *,
        settled: Callable[[], None] | None = None,
        task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Run the queue until cancelled (the runtime runs it in its task group): follow the
        requests whose outcome goes to an event and add each outcome to its session through
        `deliver` (which stores it and hands it over, dropping an id stored already), calling
        `settled` after each; and send notes to the person (late answers) as they arise.
        Without `deliver`, the agent cannot ask without waiting."""
        if self._serving is not None:
            raise UserError(
                "This queue of requests is served already: serve it once (the runtime does)."
            )
        try:
            async with anyio.create_task_group() as tg:
                self._serving = _Serving(tg, deliver, settled)
                waiting, self._to_follow = self._to_follow, []
                for request in waiting:
                    self._follow(request)
                ready, self._to_tell = self._to_tell, []
                for stood_in, event in ready:
                    self._hand_over_outcome(stood_in, event)
                task_status.started()
                while True:
                    await self._notes_waiting.wait()
                    await self.flush_notes()
        finally:
            self._serving = None

    # --- a restart -------------------------------------------------------------------------

    async def restore(self, form_of: FormOf | None = None, *, session: str | None = None) -> None:
        """Take up what a previous run left in the repository: open requests whose outcome goes
        to an event are open again with the time they had left (followed once the queue is
        served; a default that fell due meanwhile applies then), outcomes not yet handed over
        are handed over, and requests whose call ended with the restart are closed as ended.
        A request that cannot be rebuilt ends, and its session is told (see
        :meth:`_take_up_unreadable`). The recently ended ones are kept to recognise late
        answers. `form_of` rebuilds a form from its schema (without it, open input requests
        end). Call it before serving, or while served.

        With `session`, only that session's requests are taken up: as one worker of several,
        each session's by the worker that takes the session over, so each once."""
        if self.repository is None:
            return
        for record in await self.repository.unsettled():
            held = record.id in self._open or record.id in self._handing_over
            if (session is None or record.session == session) and not held:
                await self._take_up(record, form_of)
        for record in reversed(await self.repository.recent(CLOSED_KEPT, session=session)):
            if record.status == "open" or record.id in self._open or record.id in self._closed:
                continue
            try:
                request = request_of(record, form_of, self.timeout_seconds)
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("request %s could not be read back: %s", record.id, exc)
                request = stand_in(record, NOT_RESTORED)
            set_ending(request, record)
            self._keep_closed(request)

    async def _take_up(self, record: HumanRequestRecord, form_of: FormOf | None) -> None:
        assert self.repository is not None
        try:
            request = request_of(record, form_of, self.timeout_seconds)
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("request %s could not be read back, so it ends: %s", record.id, exc)
            await self._take_up_unreadable(record)
            return
        by_event = request.answered_in == "event"
        if record.status == "open" and by_event:
            self._open[request.id] = request
            self._follow(request)
            return
        if record.status == "open":
            await self.repository.close(
                record.id, "ended", json.dumps({"ended": RESTART_ENDED}), delivered=True
            )
            request.ended = RESTART_ENDED
            self._keep_closed(request)
            return
        if by_event and record.decision is not None:
            try:
                request.decision = HumanDecision.from_json(record.decision)
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("the outcome of request %s could not be read: %s", record.id, exc)
            else:
                self._keep_closed(request)
                self._handing_over[request.id] = request.session
                self._follow(request)
                return
        # Nothing to hand over: its call ended with the previous run.
        await self._session_repository(record.session).mark_delivered(record.id)
        set_ending(request, record)
        self._keep_closed(request)

    async def _take_up_unreadable(self, record: HumanRequestRecord) -> None:
        """End a stored request that cannot be rebuilt (its data damaged, or written by another
        version), kept by its id for late answers. Unless its outcome was for a call (which
        ended with the restart), its session is told: the outcome stored, or that no answer
        will come; else the agent would wait for one forever."""
        assert self.repository is not None
        told = answered_in_of(record) != "call"  # data that cannot say: told, to be safe
        if record.status == "open":
            ended = json.dumps({"ended": NOT_RESTORED if told else RESTART_ENDED})
            await self.repository.close(record.id, "ended", ended, delivered=not told)
            record = record._replace(status="ended", decision=ended)
        elif not told:
            await self._session_repository(record.session).mark_delivered(record.id)
        request = stand_in(record, NOT_RESTORED)
        set_ending(request, record)
        self._keep_closed(request)
        if told:
            self._hand_over_outcome(request, restart_answer_event(record, request.decision))

    # --- the learning loop -----------------------------------------------------------------

    async def _similar(self, request: ApprovalRequest | InputRequest) -> tuple[SimilarCase, ...]:
        """The similar earlier cases; the request's context is taken now, as it arises."""
        if self.cases is None:
            return ()
        request.context = request.context or self.cases.context_for(request.session)
        try:
            return tuple(await self.cases.similar(case_request(request)))
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
                    case_request(request),
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
        waited = time.monotonic() - request.started
        if not request.has_answer():  # a default that fell due while the runtime was down
            waited = min(waited, self._timeout(request))
        decision = decision_of(request, waited)
        request.decision = decision
        if request.answered_in == "event":
            self._handing_over[request.id] = request.session
        self._keep_closed(request)
        for listener in self.decision_listeners:
            try:
                listener(decision)
            except Exception:
                log.exception("a decision listener failed on request %s", request.id)
        return decision

    def _keep_closed(self, request: ApprovalRequest | InputRequest) -> None:
        self._closed[request.id] = request
        while len(self._closed) > CLOSED_KEPT:
            self._closed.popitem(last=False)

    # --- answering -------------------------------------------------------------------------

    def answer_input(self, request_id: str, answer: str | dict[str, Any]) -> InputReply:
        """Answer an open input request with typed text (`date=2026-12-24 guests=4`) or with
        values (from code). A bad answer is not taken: the reply says why, and the request
        stays open. An answer to a request already answered or timed out is recorded, not
        applied, and the reply (and a note to the person) says so."""
        request = self._open.get(request_id.lower())
        if not isinstance(request, InputRequest) or request.outcome is not None:
            words = answer if isinstance(answer, str) else values_words(answer)
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
            self._after_the_fact(request_id, None, InputRequest, said("decline", reason))
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
            words = said("approve" if approve else "deny", reason)
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
                words = said("decline", rest) if verb == "decline" else rest
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
                words = said("approve" if approve else "deny", why)
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
        if request.ended:
            why = f"it had already ended: {request.ended}"
        elif decision is None or decision.status != "timed_out":
            first = first_answer(request)
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
        late = LateAnswer(answer or "(empty)", utc_now(), why)
        request.late.append(late)
        if self.repository is not None:
            self._late_to_store.append((request.id, late))
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
        """Send the notes waiting for the person (about late answers), and store the late
        answers; how many notes were sent."""
        notes, self._notes = self._notes, []
        late, self._late_to_store = self._late_to_store, []
        self._notes_waiting = anyio.Event()
        for request_id, answer in late:
            assert self.repository is not None
            try:
                await self.repository.add_late(request_id, answer.to_json())
            except StoreError as exc:
                log.warning("a late answer to request %s was not stored: %s", request_id, exc)
        sent = 0
        for session, text in notes:
            try:
                await self.outbox.send(session, text, urgency="normal")
            except SessionMoved as exc:  # as one worker of several: told by nobody here
                log.warning("a note about a late answer was not sent: %s", exc)
                continue
            sent += 1
        return sent


def _no_input_request(request_id: str) -> str:
    return (
        f"No input request is open with id {request_id}: it was answered, declined or timed "
        "out. /approvals lists what is waiting for you."
    )
