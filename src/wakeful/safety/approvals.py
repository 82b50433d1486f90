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
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol

import anyio

from ..events import utc_now
from ..services import Outbox
from .verdict import Verdict

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
class ApprovalRequest:
    """One open question: which call, why it needs a person, and (once given) the answer."""

    id: str
    session: str
    tool: str
    summary: str
    reasons: tuple[str, ...]
    created: datetime = field(default_factory=utc_now)
    answered: anyio.Event = field(default_factory=anyio.Event)
    verdict: Verdict | None = None

    def question(self) -> str:
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

    def question(self) -> str:
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
    """Open requests to a person (approvals and input requests), asked through the outbox and
    answered by the user's reply; one id space, one timeout."""

    def __init__(
        self,
        outbox: Outbox,
        *,
        timeout_seconds: float = 900.0,
        handler: ApprovalHandler | None = None,
    ) -> None:
        self.outbox = outbox
        self.timeout_seconds = timeout_seconds
        self.handler = handler
        self._open: dict[str, ApprovalRequest | InputRequest] = {}

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

    def _new_id(self) -> str:
        request_id = secrets.token_hex(2)
        while request_id in self._open:
            request_id = secrets.token_hex(3)
        return request_id

    async def ask(self, session: str, tool: str, summary: str, reasons: tuple[str, ...]) -> Verdict:
        """Wait for a person's answer about one call; no answer in time is a deny."""
        request = ApprovalRequest(self._new_id(), session, tool, summary, reasons)
        if self.handler is not None:
            verdict = await self.handler(request)
            return Verdict(verdict.decision, verdict.reasons, "human")
        self._open[request.id] = request
        try:
            await self.outbox.send(session, request.question(), urgency="high")
            with anyio.move_on_after(self.timeout_seconds):
                await request.answered.wait()
        finally:
            self._open.pop(request.id, None)
        if request.verdict is None:
            return Verdict(
                "deny",
                (
                    f"Nobody answered the approval request [{request.id}] within "
                    f"{self.timeout_seconds:g} s, so the call was not run. Ask the user directly "
                    "if it is still needed.",
                ),
                "human",
            )
        return request.verdict

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
        self._open[request.id] = request
        try:
            await self.outbox.send(session, request.question(), urgency="high")
            with anyio.move_on_after(self.timeout_seconds):
                while request.outcome is None:
                    await request.changed.wait()
                    request.changed = anyio.Event()
                    notes, request.notes = request.notes, []
                    for note in notes:
                        await self.outbox.send(session, note, urgency="high")
        finally:
            self._open.pop(request.id, None)
        if request.outcome is None:
            return InputOutcome(
                "decline",
                reason=(
                    f"nobody answered the input request [{request.id}] within "
                    f"{self.timeout_seconds:g} s, so it was declined"
                ),
            )
        return request.outcome

    def answer_input(self, request_id: str, answer: str | dict[str, Any]) -> InputReply:
        """Answer an open input request with typed text (`date=2026-12-24 guests=4`) or with
        values (from code). A bad answer is not taken: the reply says why, and the request
        stays open."""
        request = self._open.get(request_id.lower())
        if not isinstance(request, InputRequest) or request.outcome is not None:
            return InputReply(False, _no_input_request(request_id))
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
        """Decline an open input request; False when there is no such request (any more)."""
        request = self._open.get(request_id.lower())
        if not isinstance(request, InputRequest) or request.outcome is not None:
            return False
        why = f"the user declined: {reason}" if reason else "the user declined"
        request.outcome = InputOutcome("decline", reason=why)
        request.changed.set()
        return True

    def resolve(self, request_id: str, approve: bool, reason: str = "") -> bool:
        """Answer an open approval request; False when there is no such request (any more)."""
        request = self._open.get(request_id)
        if not isinstance(request, ApprovalRequest) or request.verdict is not None:
            return False
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
        consumed too, and the person is told what was wrong (the request stays open)."""
        inputs = _INPUT_COMMAND.match(text)
        if inputs is not None:
            request = self._open.get(inputs.group("id").lower())
            if not isinstance(request, InputRequest) or request.session != session:
                return False
            if inputs.group("verb").lower() == "decline":
                return self.decline_input(request.id, inputs.group("rest").strip())
            reply = self.answer_input(request.id, inputs.group("rest"))
            if not reply.accepted:
                request.note(reply.text)
            return True
        match = _COMMAND.match(text)
        if match is not None:
            request = self._open.get(match.group("id").lower())
            if not isinstance(request, ApprovalRequest) or request.session != session:
                return False
            approve = match.group("verb").lower() == "approve"
            return self.resolve(request.id, approve, match.group("why").strip())
        word = text.strip().strip(".!。！").lower()
        if word not in _YES and word not in _NO:
            return False
        open_here = self.pending(session)
        if len(open_here) != 1:
            return False
        return self.resolve(open_here[0].id, word in _YES)


def _no_input_request(request_id: str) -> str:
    return (
        f"No input request is open with id {request_id}: it was answered, declined or timed "
        "out. /approvals lists what is waiting for you."
    )
