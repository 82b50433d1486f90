"""Asking a person: approval requests that wait for a yes or no.

A call that needs a person's approval waits in :meth:`Approvals.ask`. The question reaches the
user through the outbox (the channel they are on) with an id; their answer comes back as an
ordinary message (`/approve a3f9`, `/deny a3f9 not on a Friday`, or just `yes`/`no` while only
one question is open), which the runtime takes out of the event stream before the agent sees it
(:meth:`Approvals.answer_from_text`). Code can answer too (:meth:`resolve`), and a deployment may
replace the whole exchange with a handler (a web console, a chat bot's buttons). No answer within
the timeout is a no.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime

import anyio

from ..events import utc_now
from ..services import Outbox
from .verdict import Verdict

_COMMAND = re.compile(
    r"^\s*/?(?P<verb>approve|deny|reject)\s+(?P<id>[0-9a-f]{4,12})\b\s*(?P<why>.*)$",
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


class Approvals:
    """Open approval requests, asked through the outbox and answered by the user's reply."""

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
        self._open: dict[str, ApprovalRequest] = {}

    def pending(self, session: str | None = None) -> list[ApprovalRequest]:
        return [r for r in self._open.values() if session is None or r.session == session]

    async def ask(self, session: str, tool: str, summary: str, reasons: tuple[str, ...]) -> Verdict:
        """Wait for a person's answer about one call; no answer in time is a deny."""
        request = ApprovalRequest(secrets.token_hex(2), session, tool, summary, reasons)
        while request.id in self._open:
            request.id = secrets.token_hex(3)
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

    def resolve(self, request_id: str, approve: bool, reason: str = "") -> bool:
        """Answer an open request; False when there is no such request (any more)."""
        request = self._open.get(request_id)
        if request is None or request.verdict is not None:
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
        Chinese) answers the one open request of the session, and only when there is one."""
        match = _COMMAND.match(text)
        if match is not None:
            request = self._open.get(match.group("id").lower())
            if request is None or request.session != session:
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
