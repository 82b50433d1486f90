"""`request_human_approval` and `request_human_input`: the agent asks a person, with a timeout,
a default and a priority.

Both go through the runtime's one queue of requests to a person
(:class:`~wakeful.safety.approvals.Approvals`, where the safety gate's approvals and MCP servers'
input requests wait too), so they are listed and answered the same ways: `/approve ID`, `/deny
ID why`, `/answer ID …`, `/decline ID`, the web console, or code. The question goes out with the
request's priority as its urgency, and the delivery policy decides from it how the person is
reached (urgent: every channel in turn until read; normal: one channel).

By default the call does not block the agent: it returns the request id at once, and the
queue itself follows the request: its outcome arrives as a `human.answer` event of the session
(the request is stored, so it survives a restart, and its outcome is handed over once). That
needs the queue to be served (the runtime does; see `Approvals.serve`). `wait=true` waits
inline, as any call does, so an interrupt can still send it to the background (rule 3); a
restart ends such a request with its call. No answer within the timeout applies the default and
the result says so; an answer after that is recorded on the request, not applied, and the
person is told.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from ...errors import ToolError
from ...mcp.elicitation import ElicitationForm, UnsupportedForm
from ...safety.approvals import Approvals
from ...safety.decisions import HumanDecision, duration_words
from ...safety.human_requests import ApprovalRequest, InputRequest, InvalidAnswer
from ...services import Services, settings_of
from ...tools.spec import Tool, ToolAnnotations, ToolContext, ToolResult, tool
from .settings import CollaborationSettings

__all__ = [
    "HUMAN_TOOLS",
    "approvals_of",
    "request_human_approval",
    "request_human_input",
]

_YES_WORDS = frozenset({"approve", "yes", "allow", "ok", "go", "proceed", "send", "confirm"})
_NO_WORDS = frozenset({"deny", "no", "reject", "stop", "cancel", "hold", "refuse", "decline"})
CHOICE_FIELD = "choice"
MAX_TIMEOUT_SECONDS = 7 * 24 * 3600

_ASKED = ToolAnnotations(read_only=False, destructive=False, idempotent=False, open_world=False)

Question = Annotated[
    str,
    Field(
        min_length=1,
        max_length=2000,
        description="What the person decides, with what they need to know, e.g. 'Send the "
        "invoice of 4,200 EUR to ACME now? It was checked against the order.'",
    ),
]
Timeout = Annotated[
    float,
    Field(
        gt=0,
        le=MAX_TIMEOUT_SECONDS,
        description="How long to wait for an answer, in seconds, before the default applies, "
        "e.g. 300 (5 minutes).",
    ),
]
PriorityField = Annotated[
    Literal["low", "normal", "high", "urgent"],
    Field(
        description="How the person is reached: 'urgent' on every channel in turn until read, "
        "'high' where they are plus a push, 'normal' one channel, 'low' may wait for a digest, "
        "e.g. 'normal'."
    ),
]
Wait = Annotated[
    bool,
    Field(
        description="false (the default): return the request id at once, the answer arrives "
        "as a human.answer event; true: wait for the answer in this call, e.g. false."
    ),
]


def approvals_of(services: Services) -> Approvals:
    """The runtime's queue of requests to a person (`services.state[Approvals]`, the safety
    gate's own); without one, a queue of these services over their outbox."""
    found = services.state.get(Approvals)
    if isinstance(found, Approvals):
        return found
    approvals = Approvals(services.outbox)
    services.state[Approvals] = approvals
    return approvals


@tool(
    annotations=_ASKED,
    examples=(
        {
            "question": "Send the invoice of 4,200 EUR to ACME now?",
            "timeout_seconds": 300,
            "priority": "high",
        },
        {
            "question": "The release has 2 failing tests. What now?",
            "options": ["ship anyway", "wait for a fix", "cancel the release"],
            "default": "wait for a fix",
            "priority": "urgent",
            "timeout_seconds": 900,
        },
    ),
)
async def request_human_approval(
    ctx: ToolContext,
    question: Question,
    options: Annotated[
        list[Annotated[str, Field(min_length=1, max_length=80)]],
        Field(
            min_length=2,
            max_length=10,
            description="The answers the person chooses from, e.g. ['approve', 'deny'] (the "
            "default) or ['ship anyway', 'wait for a fix'].",
        ),
    ] = ["approve", "deny"],  # noqa: B006 (pydantic copies defaults)
    timeout_seconds: Timeout = 300,
    default: Annotated[
        str | None,
        Field(
            description="The option applied when nobody answers in time: the conservative one, "
            "e.g. 'deny'. Required with options of your own; with yes/no options, the no.",
        ),
    ] = None,
    priority: PriorityField = "normal",
    wait: Wait = False,
) -> ToolResult:
    """Ask a person (an approver) to decide before a step you should not take alone.

    Use it before an irreversible, expensive or ambiguous step, or one outside your authority.
    The person is reached by priority. Returns {"request_id", "status": "waiting"} at once,
    and the decision ("The approver answered request [id] …: deny.", with `choice`) arrives
    later as a human.answer event: do other work meanwhile, and do not take the step until it
    arrives. No answer within timeout_seconds applies `default`, and the result says so.
    It cannot reach anyone but the configured approver, and does not ask for data (use
    request_human_input).
    Cost: instant (or, with wait=true, as long as the person takes); about 200 characters.
    """
    _check_timeout(ctx, timeout_seconds)
    chosen = _options(options)
    fallback = _default_option(chosen, default)
    approvals = _queue_for(ctx, wait=wait)
    opened: ApprovalRequest | InputRequest
    if len(chosen) == 2 and chosen[0].lower() in _YES_WORDS and chosen[1].lower() in _NO_WORDS:
        opened = await approvals.open_approval(
            ctx.session,
            question,
            options=(chosen[0], chosen[1]),
            default=fallback,
            priority=priority,
            timeout_seconds=timeout_seconds,
            tool=ctx.tool_name,
            call_id=ctx.call_id,
            answered_in="call" if wait else "event",
        )
    else:
        schema = {
            "type": "object",
            "properties": {CHOICE_FIELD: {"type": "string", "enum": chosen}},
            "required": [CHOICE_FIELD],
        }
        opened = await approvals.open_input(
            ctx.session,
            question,
            ElicitationForm.from_schema(schema),
            default={CHOICE_FIELD: fallback},
            priority=priority,
            timeout_seconds=timeout_seconds,
            choice_field=CHOICE_FIELD,
            tool=ctx.tool_name,
            schema=schema,
            call_id=ctx.call_id,
            answered_in="call" if wait else "event",
        )
    return await _answer_or_follow(approvals, opened, fallback, wait=wait)


@tool(
    annotations=_ASKED,
    examples=(
        {
            "question": "Which date should the board meeting move to?",
            "schema": {
                "type": "object",
                "properties": {"date": {"type": "string", "format": "date"}},
                "required": ["date"],
            },
            "timeout_seconds": 3600,
        },
    ),
)
async def request_human_input(
    ctx: ToolContext,
    question: Question,
    # Named `schema` for the model (the alias): as a Python name it would shadow pydantic's.
    schema_: Annotated[
        dict[str, Any],
        Field(
            alias="schema",
            description="The form to fill in: a flat JSON schema object whose properties are "
            "strings (optionally with format date, date-time, email or uri, or an enum), "
            "numbers, integers, booleans or arrays of enum choices, e.g. {'type': 'object', "
            "'properties': {'date': {'type': 'string', 'format': 'date'}}, 'required': "
            "['date']}.",
        ),
    ],
    timeout_seconds: Timeout = 300,
    default: Annotated[
        dict[str, Any] | None,
        Field(
            description="The values applied when nobody answers in time (they must fit the "
            "schema), e.g. {'date': '2026-12-24'}; none: nothing is decided then."
        ),
    ] = None,
    priority: PriorityField = "normal",
    wait: Wait = False,
) -> ToolResult:
    """Ask a person (an approver, a collaborator) for information only they have.

    Use it when a value the task needs (a date, an amount, a name) can only come from a person.
    Their answer is checked against the schema before you get it. Returns {"request_id",
    "status": "waiting"} at once, and the values ("… answered request [id] …:
    date=2026-12-24.", with `values`) arrive later as a human.answer event; no answer within
    timeout_seconds applies `default` (or decides nothing), and the result says so. It cannot
    take nested schemas, and must not ask for passwords or other secrets; for a yes/no decision
    use request_human_approval.
    Cost: instant (or, with wait=true, as long as the person takes); about 200 characters.
    """
    _check_timeout(ctx, timeout_seconds)
    try:
        form = ElicitationForm.from_schema(schema_)
    except UnsupportedForm as exc:
        raise ToolError(
            f"The schema cannot be put to a person: {exc}. Use a flat object of string, "
            "number, integer or boolean properties (or enums), e.g. {'type': 'object', "
            "'properties': {'date': {'type': 'string', 'format': 'date'}}}."
        ) from exc
    if not form.fields:
        raise ToolError(
            "The schema has no properties, so there is nothing to ask. Name at least one, e.g. "
            "{'type': 'object', 'properties': {'amount': {'type': 'number'}}}."
        )
    checked: dict[str, Any] | None = None
    if default is not None:
        try:
            checked = form.check(dict(default))
        except InvalidAnswer as exc:
            raise ToolError(
                f"The default does not fit the schema: {exc} Give values the schema accepts, "
                "or no default."
            ) from exc
    approvals = _queue_for(ctx, wait=wait)
    opened = await approvals.open_input(
        ctx.session,
        question,
        form,
        default=checked,
        priority=priority,
        timeout_seconds=timeout_seconds,
        tool=ctx.tool_name,
        schema=schema_,
        call_id=ctx.call_id,
        answered_in="call" if wait else "event",
    )
    words = opened.default_words() or "nothing is decided"
    return await _answer_or_follow(approvals, opened, words, wait=wait)


def _check_timeout(ctx: ToolContext, timeout_seconds: float) -> None:
    limit = settings_of(ctx.services, CollaborationSettings).max_timeout_seconds
    if timeout_seconds > limit:
        raise ToolError(
            f"timeout_seconds {timeout_seconds:g} is over the limit of {limit:g} s "
            "([tools.collaboration] max_timeout_seconds). Ask with a shorter timeout."
        )


def _options(options: list[str]) -> list[str]:
    chosen = [" ".join(option.split()) for option in options]
    seen: set[str] = set()
    for option in chosen:
        if not option:
            raise ToolError("An option is blank; give each option a few words, e.g. 'approve'.")
        if option.lower() in seen:
            raise ToolError(f"The option {option!r} is given twice; give each option once.")
        seen.add(option.lower())
    return chosen


def _default_option(options: list[str], default: str | None) -> str:
    """The option `default` names (case aside); with none, the no of a yes/no pair."""
    if default is None:
        if len(options) == 2 and options[1].lower() in _NO_WORDS:
            return options[1]
        raise ToolError(
            f"No default was given for the options {options}: name the one applied when "
            "nobody answers in time (the conservative one), e.g. default="
            f"{options[-1]!r}."
        )
    for option in options:
        if option.lower() == " ".join(default.split()).lower():
            return option
    raise ToolError(
        f"The default {default!r} is not one of the options {options}. Make it one of them "
        "(the one that is safe when nobody answers)."
    )


def _queue_for(ctx: ToolContext, *, wait: bool) -> Approvals:
    """The queue to ask in; without waiting, one that hands outcomes over as events."""
    approvals = approvals_of(ctx.services)
    if not wait and not approvals.answers_as_events:
        raise ToolError(
            "Nothing here can hand the answer over later as an event (the queue of requests to "
            "a person is not served: a runtime serves it). Ask again with wait=true to wait "
            "for the answer in this call."
        )
    return approvals


async def _answer_or_follow(
    approvals: Approvals,
    opened: ApprovalRequest | InputRequest,
    fallback: str,
    *,
    wait: bool,
) -> ToolResult:
    """Wait for the decision (`wait`), or say that it arrives as a `human.answer` event (the
    queue follows the request)."""
    if wait:
        return decision_result(await approvals.decision(opened))
    note = (
        f"The approver was asked (priority {opened.priority}). Their answer, or after "
        f"{duration_words(opened.timeout_seconds or 0)} the default ({fallback}), will arrive as a "
        f"human.answer event for request [{opened.id}]. Go on with other work meanwhile; do not "
        "take the step until the answer arrives."
    )
    return ToolResult.of({"request_id": opened.id, "status": "waiting", "note": note})


def decision_result(decision: HumanDecision) -> ToolResult:
    """The tool result of a decision: its words, and the decision as data."""
    return ToolResult(decision.text(), structured=decision.as_dict())


HUMAN_TOOLS: tuple[Tool, ...] = (request_human_approval, request_human_input)
