"""The layers around every tool call, composed: validation → sidecar → breaker → person →
reviewer → run → verification → audit.

A :class:`CallGate` wraps execution the way a safety policy wraps a toolset: the session (or the
MCP bridge) hands it the call and a function that runs it, and the gate decides whether that
function is called at all. The order follows the chapter: the sidecar's verdict (begun while the
model was still streaming) gates the call; repeated denials trip the breaker and go to a person;
an "ask" goes to a person; irreversible tools go to the reviewer model unless a person already
approved them; after a successful run the verification hooks add their findings; every call,
run or refused, is written to the audit log with the path of decisions it took.

In the tool-call pipeline (:mod:`wakeful.tools.pipeline`) the gate is a layer: `guard` puts it
around the executor below. A gate is immutable: a runtime (or an MCP connection) that needs to
add its approvals, audit log or asker makes its own copy with `dataclasses.replace`, so one gate
can serve any number of runtimes, one after the other or at the same time.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

import anyio
from anyio.abc import TaskGroup

from ..core.executor import RecentMessages, ToolExecutor
from ..events import utc_now
from ..messages import Message, ToolCall
from ..tools.spec import Tool, ToolContext, ToolResult, ToolSpec
from .approvals import Approvals
from .breaker import DenialBreaker
from .paths import leaves_root
from .reviewer import Reviewer
from .sidecar import ModelSidecar, RuleSidecar, SidecarChecks
from .verdict import Verdict
from .verification import VerifyRule, verify

if TYPE_CHECKING:
    from .audit import AuditLog

Status = Literal["ok", "error", "denied", "cancelled", "timeout"]
Asker = Callable[[ToolCall, str, tuple[str, ...]], Awaitable[Verdict]]
"""Asks a person about one call — `(call, summary, reasons)` → allow or deny — in place of the
gate's approvals (e.g. an MCP server asking its client's user through elicitation)."""


class ApprovalDeferred(Exception):
    """Raised by an asker that will get the person's answer in a later round (MCP's
    input-required results): nothing ran, and the call will come again with the answer."""


def _no_messages() -> Sequence[Message]:
    return ()


@dataclass(frozen=True)
class CallGate:
    """The safety stack of one runtime (or one MCP server); immutable once made."""

    sidecar: RuleSidecar = field(default_factory=RuleSidecar)
    model_sidecar: ModelSidecar | None = None
    breaker: DenialBreaker = field(default_factory=DenialBreaker)
    approvals: Approvals | None = None
    reviewer: Reviewer | None = None
    verify_rules: Sequence[VerifyRule] = ()
    audit: AuditLog | None = None
    # How long a person has to answer when the runtime creates the approvals.
    approval_timeout_seconds: float = 900.0
    # Who answers an "ask" in place of the approvals (an MCP client's user); None: approvals.
    ask: Asker | None = None
    # The sidecar's checks per session, begun as calls stream in; a `replace` copy has none.
    _checks: dict[str, SidecarChecks] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def guard(self, inner: ToolExecutor, recent: RecentMessages) -> GatedExecutor:
        """`inner` behind this gate (see :class:`~wakeful.core.executor.CallChecks`)."""
        return GatedExecutor(self, inner, recent)

    def checks(self, session: str) -> SidecarChecks:
        found = self._checks.get(session)
        if found is None:
            found = self._checks[session] = SidecarChecks(self.sidecar, self.model_sidecar)
        return found

    def begin(
        self, session: str, call: ToolCall, spec: ToolSpec | None, tg: TaskGroup | None
    ) -> None:
        """Start the sidecar on a call the model has just emitted (it may still be streaming)."""
        self.checks(session).begin(call, spec, tg)

    def discard(self, session: str) -> None:
        """The turn was thrown away: its calls will never run."""
        self.checks(session).forget()

    def forget_session(self, session: str) -> None:
        """Drop the checks of a session unloaded while idle (none is pending then); its next
        call starts afresh. The breaker's count of refusals is kept."""
        self._checks.pop(session, None)

    async def run(
        self,
        tool: Tool | None,
        call: ToolCall,
        ctx: ToolContext,
        execute: Callable[[ToolContext], Awaitable[ToolResult]],
        *,
        recent: RecentMessages = _no_messages,
        ask: Asker | None = None,
    ) -> ToolResult:
        """Decide, then run (or refuse) the call; the audit log records either way."""
        started = time.perf_counter()
        path: list[Verdict] = []
        status: Status = "cancelled"
        result: ToolResult | None = None
        try:
            result = await self._decide_and_run(tool, call, ctx, execute, recent, ask, path)
            status = _status_of(result, path)
            return result
        except ApprovalDeferred:
            path.clear()  # not a call yet: the one with the answer is audited
            raise
        finally:
            if self.audit is not None and path:
                with anyio.CancelScope(shield=True):
                    await self._audit(call, ctx, path, status, result, started)

    async def _decide_and_run(
        self,
        tool: Tool | None,
        call: ToolCall,
        ctx: ToolContext,
        execute: Callable[[ToolContext], Awaitable[ToolResult]],
        recent: RecentMessages,
        ask: Asker | None,
        path: list[Verdict],
    ) -> ToolResult:
        spec = tool.spec if tool is not None else None
        session = ctx.session
        invalid = _outside_root(spec, call, ctx)
        if invalid is not None:  # input validation, the outermost layer: nobody is asked
            path.append(invalid)
            return _refused(call, invalid)
        verdict = await self.checks(session).verdict(call, spec)
        path.append(verdict)
        if verdict.decision == "deny":
            verdict = self.breaker.after_denial(session, verdict)
            if verdict.layer == "breaker":
                path.append(verdict)
            else:
                return _refused(call, verdict)
        approved = False
        person: Verdict | None = None  # a person's yes
        if verdict.decision == "ask":
            verdict = await self._ask_person(session, call, verdict, ask)
            path.append(verdict)
            self.breaker.reset(session)
            if verdict.decision != "allow":
                return _refused(call, verdict)
            approved = True
            person = verdict
        else:
            self.breaker.reset(session)
        needs_review = (
            tool is not None and self.reviewer is not None and self.reviewer.reviews(call.name)
        )
        if needs_review and not approved:
            assert self.reviewer is not None
            review = await self.reviewer.review(call, spec, recent())
            path.append(review)
            if review.decision == "deny":
                return _refused(call, review)
            if review.decision == "ask":
                answer = await self._ask_person(session, call, review, ask)
                path.append(answer)
                if answer.decision != "allow":
                    return _refused(call, answer)
                person = answer
            approved = True
        if approved:
            ctx.approved = True
        result = await execute(ctx)
        if self.verify_rules and not result.is_error:
            result = await verify(self.verify_rules, call, _arguments(call), result, ctx)
        if person is not None and self.approvals is not None and self.approvals.cases is not None:
            # The person's yes and the case it was kept as ("as decided in case 12").
            result = replace(result, content=f"{result.content}\n\n{' '.join(person.reasons)}")
        return result

    async def _ask_person(
        self, session: str, call: ToolCall, verdict: Verdict, ask: Asker | None
    ) -> Verdict:
        ask = ask or self.ask
        if ask is not None:
            answer = await ask(call, _summary(call), verdict.reasons)
            return Verdict(answer.decision, answer.reasons, "human")
        if self.approvals is None:
            return Verdict(
                "deny",
                (
                    *verdict.reasons,
                    "It needs a person's approval and there is no one to ask here (no approval "
                    "channel is connected), so it was not run.",
                ),
                "human",
            )
        return await self.approvals.ask(session, call.name, _summary(call), verdict.reasons)

    async def _audit(
        self,
        call: ToolCall,
        ctx: ToolContext,
        path: list[Verdict],
        status: Status,
        result: ToolResult | None,
        started: float,
    ) -> None:
        from .audit import AuditRecord

        assert self.audit is not None
        error = None
        if result is not None and result.is_error:
            error = result.content[:500]
        await self.audit.record(
            AuditRecord(
                time=utc_now(),
                session=ctx.session,
                tool=call.name,
                call_id=call.id,
                arguments=_arguments(call),
                decisions=[
                    {
                        "layer": v.layer or "sidecar",
                        "decision": v.decision,
                        "reasons": list(v.reasons),
                    }
                    for v in path
                ],
                status=status,
                duration_ms=(time.perf_counter() - started) * 1000,
                error=error,
            )
        )


class GatedExecutor:
    """An executor behind a gate: the sidecar starts on `begin`, and each call is judged, then
    run by the executor below or refused, and audited either way."""

    def __init__(self, gate: CallGate, wrapped: ToolExecutor, recent: RecentMessages) -> None:
        self.gate = gate
        self.wrapped = wrapped
        self.recent = recent

    def tool_for(self, call: ToolCall) -> Tool | None:
        return self.wrapped.tool_for(call)

    def begin(self, session: str, call: ToolCall, tg: TaskGroup | None) -> None:
        tool = self.wrapped.tool_for(call)
        self.gate.begin(session, call, tool.spec if tool is not None else None, tg)
        self.wrapped.begin(session, call, tg)

    def discard(self, session: str) -> None:
        self.gate.discard(session)
        self.wrapped.discard(session)

    async def execute(self, call: ToolCall, ctx: ToolContext) -> ToolResult:
        async def run(checked: ToolContext) -> ToolResult:
            return await self.wrapped.execute(call, checked)

        return await self.gate.run(self.wrapped.tool_for(call), call, ctx, run, recent=self.recent)


def _outside_root(spec: ToolSpec | None, call: ToolCall, ctx: ToolContext) -> Verdict | None:
    """A deny when a path the tool confines to its root leaves it (see ToolSpec.root_paths)."""
    root = ctx.services.workdir
    if spec is None or not spec.root_paths or root is None:
        return None
    try:
        arguments = json.loads(call.arguments or "{}")
    except (ValueError, RecursionError):
        return None  # the tool's own validation reports it
    if not isinstance(arguments, dict):
        return None
    for name in spec.root_paths:
        value = arguments.get(name)
        values = value if isinstance(value, list) else [value]
        for item in values:
            if isinstance(item, str) and "\x00" not in item:
                reason = leaves_root(root, item)
                if reason is not None:
                    return Verdict("deny", (reason,), "validation")
    return None


def _refused(call: ToolCall, verdict: Verdict) -> ToolResult:
    reasons = " ".join(verdict.reasons) or "No reason was given."
    who = {
        "human": "The user did not approve this call",
        "reviewer": "The reviewer rejected this call",
        "breaker": "This call was refused",
        "validation": "This call's arguments are not valid",
    }.get(verdict.layer, "The safety checks refused this call")
    return ToolResult(
        f"{who}; {call.name} was not run. {reasons} Do not repeat the same call: change the "
        "approach, or ask the user.",
        is_error=True,
        structured={"refused": True, "layer": verdict.layer, "reasons": list(verdict.reasons)},
    )


def _status_of(result: ToolResult, path: list[Verdict]) -> Status:
    if isinstance(result.structured, dict) and result.structured.get("refused"):
        # Bad arguments are the caller's error, not a refusal by a safety layer.
        return "error" if result.structured.get("layer") == "validation" else "denied"
    if isinstance(result.structured, dict) and result.structured.get("timed_out"):
        return "timeout"
    return "error" if result.is_error else "ok"


def _arguments(call: ToolCall) -> dict[str, Any]:
    try:
        value = json.loads(call.arguments or "{}")
    except json.JSONDecodeError:
        return {"(unparsed)": call.arguments[:500]}
    return value if isinstance(value, dict) else {"(value)": value}


def _summary(call: ToolCall, limit: int = 300) -> str:
    arguments = _arguments(call)
    text = json.dumps(arguments, ensure_ascii=False)
    if "command" in arguments and isinstance(arguments["command"], str):
        text = f"`{arguments['command']}`"
    return text if len(text) <= limit else text[: limit - 1] + "…"
