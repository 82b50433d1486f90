"""request_human_approval and request_human_input with real services: the request id at once and
the answer as a `human.answer` event (async, from the served queue), or the answer in the call
(wait), defaults on timeout, and the refusals of bad input."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from anyio import wait_all_tasks_blocked

from tool_services import Events, call, refused, tool_services
from wakeful.events import HUMAN_ANSWER, TOOL_RESULT, render_event
from wakeful.safety.approvals import Approvals
from wakeful.services import Services
from wakeful.toolkits.collaboration.human import (
    HUMAN_TOOLS,
    approvals_of,
    request_human_approval,
    request_human_input,
)
from wakeful.toolkits.collaboration.settings import CollaborationSettings
from wakeful.tools.lint import lint_tool
from wakeful.tools.spec import ToolResult

pytestmark = pytest.mark.anyio

DATE_FORM: dict[str, Any] = {
    "type": "object",
    "properties": {"date": {"type": "string", "format": "date"}, "guests": {"type": "integer"}},
    "required": ["date"],
}


def test_the_tools_meet_the_description_standard() -> None:
    for each in HUMAN_TOOLS:
        assert lint_tool(each) == []
        assert each.spec.annotations.idempotent is False


def question_sent(services: Services) -> dict[str, Any]:
    return services.outbox.sent[-1]


@asynccontextmanager
async def served(services: Services, events: Events) -> AsyncIterator[Approvals]:
    """The services' queue, served as a runtime serves it: outcomes go to `events`."""
    approvals = approvals_of(services)
    async with anyio.create_task_group() as tg:
        await tg.start(approvals.serve, events.emit)
        yield approvals
        tg.cancel_scope.cancel()


async def test_by_default_the_call_returns_at_once_and_the_answer_arrives_as_an_event() -> None:
    async with tool_services() as (services, events), served(services, events) as approvals:
        result = await call(
            services, request_human_approval, question="Send the invoice?", priority="high"
        )
        started = json.loads(result.content)
        request_id = started["request_id"]
        assert started == {
            "request_id": request_id,
            "status": "waiting",
            "note": (
                "The approver was asked (priority high). Their answer, or after 5 min the "
                f"default (deny), will arrive as a human.answer event for request [{request_id}]. "
                "Go on with other work meanwhile; do not take the step until the answer arrives."
            ),
        }
        assert question_sent(services)["urgency"] == "high"
        assert f"[{request_id}]" in question_sent(services)["text"]
        await wait_all_tasks_blocked()
        assert events.seen == [] and services.tasks.list() == []  # no task waits for it
        assert approvals.answer_from_text("main", f"/approve {request_id} checked")
        answer = await events.first(lambda e: e.kind == HUMAN_ANSWER)
        await wait_all_tasks_blocked()
        assert not approvals.busy()
    assert [e.kind for e in events.seen] == [HUMAN_ANSWER]
    assert answer.context["request_id"] == request_id
    assert answer.context["call_id"] == "call_1"
    assert answer.context["choice"] == "approve"
    assert answer.session == "main"
    text = (
        f'The approver answered request [{request_id}] ("Send the invoice?"): approve. Their '
        'reason: "checked".'
    )
    assert answer.text == text
    assert render_event(answer) == f"[HUMAN_ANSWER {request_id}] {text}"


async def test_without_a_served_queue_not_waiting_is_refused_before_anyone_is_asked() -> None:
    async with tool_services() as (services, _):
        got = await refused(services, request_human_approval, question="Send the invoice?")
        assert got == (
            "Nothing here can hand the answer over later as an event (the queue of requests to "
            "a person is not served: a runtime serves it). Ask again with wait=true to wait "
            "for the answer in this call."
        )
        assert services.outbox.sent == [] and approvals_of(services).pending() == []


async def test_wait_true_answers_in_the_call() -> None:
    async with tool_services() as (services, events):
        results: list[ToolResult] = []

        async def ask() -> None:
            results.append(
                await call(
                    services,
                    request_human_approval,
                    question="The release has 2 failing tests. What now?",
                    options=["ship anyway", "wait for a fix", "cancel the release"],
                    default="Wait for a fix",
                    wait=True,
                )
            )

        async with anyio.create_task_group() as tg:
            tg.start_soon(ask)
            await wait_all_tasks_blocked()
            (request,) = approvals_of(services).pending_inputs("main")
            assert question_sent(services)["text"] == (
                f'Choice requested [{request.id}] by the agent: "The release has 2 failing '
                'tests. What now?"\nchoice (one of: ship anyway, wait for a fix, cancel the '
                "release, required)\nWith no answer in 5 min: wait for a fix (the agent's "
                f"default).\nReply /answer {request.id} <option> to choose, or /decline "
                f"{request.id}."
            )
            assert approvals_of(services).answer_from_text(
                "main", f"/answer {request.id} cancel the release"
            )
        assert events.of_kind(TOOL_RESULT) == []
    assert results[0].structured["choice"] == "cancel the release"
    assert results[0].content.endswith(": cancel the release.")


async def test_no_answer_in_time_applies_the_default_and_the_result_says_so() -> None:
    async with tool_services() as (services, _):
        result = await call(
            services,
            request_human_approval,
            question="Send the newsletter to 12,000 people?",
            options=["send", "do not send"],
            default="do not send",
            timeout_seconds=0.05,
            wait=True,
        )
    assert result.structured["applied_default"] is True
    assert result.content.startswith("No answer to request [")
    assert result.content.endswith("Applied the default: do not send.")


async def test_input_is_checked_against_the_schema_and_given_to_the_agent() -> None:
    async with tool_services() as (services, events), served(services, events):
        started = json.loads(
            (
                await call(
                    services,
                    request_human_input,
                    question="Which date for the board meeting?",
                    schema=DATE_FORM,
                    default={"date": "2027-01-08"},
                )
            ).content
        )
        approvals = approvals_of(services)
        reply = approvals.answer_input(started["request_id"], "date=2026-12-24 guests=four")
        assert not reply.accepted and "guests must be a whole number" in reply.text
        assert approvals.answer_input(started["request_id"], "date=2026-12-24 guests=4").accepted
        answer = await events.first(lambda e: e.kind == HUMAN_ANSWER)
    assert answer.text.endswith(": date=2026-12-24 guests=4.")
    assert answer.context["values"] == {"date": "2026-12-24", "guests": 4}
    assert events.of_kind(TOOL_RESULT) == []


async def test_the_runtime_s_queue_is_used_when_there_is_one() -> None:
    async with tool_services() as (services, events):
        theirs = Approvals(services.outbox)
        services.state[Approvals] = theirs
        async with served(services, events) as approvals:
            assert approvals is theirs
            await call(services, request_human_approval, question="Go?")
            assert [r.summary for r in theirs.pending("main")] == ["Go?"]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (
            {"options": ["approve", "deny"], "default": "maybe"},
            "The default 'maybe' is not one of the options ['approve', 'deny']. Make it one of "
            "them (the one that is safe when nobody answers).",
        ),
        (
            {"options": ["ship", "wait"]},
            "No default was given for the options ['ship', 'wait']: name the one applied when "
            "nobody answers in time (the conservative one), e.g. default='wait'.",
        ),
        (
            {"options": ["ship", "Ship"], "default": "ship"},
            "The option 'Ship' is given twice; give each option once.",
        ),
    ],
)
async def test_bad_approval_requests_are_refused_before_anyone_is_asked(
    arguments: dict[str, Any], message: str
) -> None:
    async with tool_services() as (services, _):
        got = await refused(services, request_human_approval, question="Ship?", **arguments)
        assert got == message
        assert services.outbox.sent == []


@pytest.mark.parametrize(
    ("arguments", "fragment"),
    [
        (
            {"schema": {"type": "object", "properties": {"address": {"type": "object"}}}},
            "The schema cannot be put to a person: property 'address'",
        ),
        ({"schema": {"type": "array"}}, "The schema cannot be put to a person: the requested"),
        ({"schema": {"type": "object", "properties": {}}}, "The schema has no properties"),
        (
            {"schema": DATE_FORM, "default": {"date": "soon"}},
            "The default does not fit the schema: date must be a date like 2026-12-24, not 'soon'.",
        ),
    ],
)
async def test_bad_input_requests_are_refused_before_anyone_is_asked(
    arguments: dict[str, Any], fragment: str
) -> None:
    async with tool_services() as (services, _):
        got = await refused(services, request_human_input, question="When?", **arguments)
        assert got.startswith(fragment), got
        assert services.outbox.sent == []


async def test_a_timeout_over_the_configured_limit_is_refused() -> None:
    async with tool_services() as (services, _):
        services.settings[CollaborationSettings] = CollaborationSettings(max_timeout_seconds=600)
        got = await refused(services, request_human_approval, question="Go?", timeout_seconds=3600)
        assert got == (
            "timeout_seconds 3600 is over the limit of 600 s ([tools.collaboration] "
            "max_timeout_seconds). Ask with a shorter timeout."
        )
        assert services.outbox.sent == []
