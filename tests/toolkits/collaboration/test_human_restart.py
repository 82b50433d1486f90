"""The agent's requests to a person across a restart of a real runtime (on each store backend):
the request is listed and answerable again, its answer reaches the agent as one `human.answer`
event, a default that fell due while the runtime was down applies at the start and says so, and
the gate's question whose call ended with the stop is ended, which a late answer is told."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any

import anyio
import pytest
from pydantic import Field

from line_channels import until
from servers.postgres import RuntimeStoreUnderTest
from wakeful.events import HUMAN_ANSWER, Event, user_input
from wakeful.messages import UserMessage
from wakeful.models import ScriptedModel, call, say, use
from wakeful.runtime import Runtime
from wakeful.safety.commands import CommandPolicy, PolicySettings
from wakeful.safety.decisions import HumanDecision
from wakeful.safety.gate import CallGate
from wakeful.safety.sidecar import RuleSidecar, SidecarSettings
from wakeful.toolkits.collaboration.human import HUMAN_TOOLS
from wakeful.tools.spec import tool

pytestmark = pytest.mark.anyio


@tool
async def pretend_shell(command: Annotated[str, Field(description="e.g. 'ls'")]) -> str:
    """Runs nothing."""
    return f"ran {command}"


@asynccontextmanager
async def running(
    tmp_path: Path, store: RuntimeStoreUnderTest, model: ScriptedModel
) -> AsyncIterator[Runtime]:
    settings = SidecarSettings(shell_tools={"pretend_shell": "command"})
    gate = CallGate(
        sidecar=RuleSidecar(settings, CommandPolicy(PolicySettings(workspace=tmp_path)))
    )
    async with Runtime(
        model=model,
        tools=[pretend_shell, *HUMAN_TOOLS],
        with_timers=False,
        workdir=tmp_path,
        gate=gate,
        **store.options,
    ) as rt:
        yield rt


def asks(**arguments: Any) -> ScriptedModel:
    return ScriptedModel(
        [
            use(call("request_human_approval", question="Pay 4,200 EUR to ACME?", **arguments)),
            say("I asked the approver; I will pay once they agree."),
        ]
    )


async def asked(rt: Runtime, model: ScriptedModel) -> str:
    await rt.submit(user_input("Pay ACME's invoice."))
    await until(lambda: len(model.requests) >= 2)
    with anyio.fail_after(10):
        await rt.wait_idle()
    assert rt.approvals is not None
    (request,) = rt.approvals.pending("main")
    return request.id


def last_user_text(model: ScriptedModel) -> str:
    message = model.requests[-1].messages[-1]
    assert isinstance(message, UserMessage)
    return str(message.content)


async def human_answers(where: RuntimeStoreUnderTest) -> list[Event]:
    async with where.open() as store:
        stored = await store.events.recent(200)
    return [s.event for s in stored if s.event.kind == HUMAN_ANSWER]


async def test_an_answer_after_a_restart_reaches_the_agent_once(
    tmp_path: Path, runtime_store: RuntimeStoreUnderTest
) -> None:
    first = asks(timeout_seconds=3600, priority="high")
    async with running(tmp_path, runtime_store, first) as rt:
        request_id = await asked(rt, first)
    second = ScriptedModel([say("Paid.")])
    async with running(tmp_path, runtime_store, second) as rt:
        assert rt.approvals is not None
        # Listed again, and answerable the usual way.
        (request,) = rt.approvals.pending("main")
        assert (request.id, request.summary) == (request_id, "Pay 4,200 EUR to ACME?")
        assert second.requests == []  # nothing to do until the person answers
        await rt.submit(user_input(f"/approve {request_id} it matches the order"))
        await until(lambda: len(second.requests) == 1)
        with anyio.fail_after(10):
            await rt.wait_idle()
        assert last_user_text(second) == (
            f"[HUMAN_ANSWER {request_id}] The approver answered request [{request_id}] "
            '("Pay 4,200 EUR to ACME?"): approve. Their reason: "it matches the order".\n'
            'This decision is recorded as case 1; cite it as "as decided in case 1".'
        )
        assert rt.approvals.pending() == []
    (event,) = await human_answers(runtime_store)
    assert event.context["request_id"] == request_id
    # A third start hands nothing over again.
    third = ScriptedModel([say("Nothing to do.")])
    async with running(tmp_path, runtime_store, third) as rt:
        with anyio.fail_after(10):
            await rt.wait_idle()
        assert third.requests == []
    assert len(await human_answers(runtime_store)) == 1


async def test_a_default_due_while_the_runtime_was_down_applies_at_the_start(
    tmp_path: Path, runtime_store: RuntimeStoreUnderTest
) -> None:
    first = asks(timeout_seconds=0.5, options=["pay", "do not pay"], default="do not pay")
    async with running(tmp_path, runtime_store, first) as rt:
        await rt.submit(user_input("Pay ACME's invoice."))
        await until(lambda: len(first.requests) >= 2)
        assert rt.approvals is not None
        (request,) = rt.approvals.pending_inputs("main")
        request_id = request.id
    await anyio.sleep(0.7)
    second = ScriptedModel([say("Not paid: nobody approved it in time.")])
    async with running(tmp_path, runtime_store, second) as rt:
        await until(lambda: len(second.requests) == 1)
        with anyio.fail_after(10):
            await rt.wait_idle()
    assert last_user_text(second) == (
        f"[HUMAN_ANSWER {request_id}] No answer to request [{request_id}] "
        '("Pay 4,200 EUR to ACME?") in 0.5 s. Applied the default: do not pay.\n'
        "Recorded as case 1 (no one decided: the default was applied after the timeout)."
    )
    assert len(await human_answers(runtime_store)) == 1


async def test_a_gate_question_open_at_the_stop_ends_and_a_later_answer_is_told(
    tmp_path: Path, runtime_store: RuntimeStoreUnderTest
) -> None:
    first = ScriptedModel([use(call("pretend_shell", command="rm -rf src")), say("done")])
    async with running(tmp_path, runtime_store, first) as rt:
        await rt.submit(user_input("remove the src directory"))
        await until(
            lambda: any(re.search(r"\[[0-9a-f]{4,12}\]", s["text"]) for s in rt.outbox.sent)
        )
        assert rt.approvals is not None
        (request,) = rt.approvals.pending("main")
        request_id = request.id
    second = ScriptedModel([say("The removal did not run; ask me again if you still want it.")])
    async with running(tmp_path, runtime_store, second) as rt:
        assert rt.approvals is not None and rt.approvals.pending() == []
        with anyio.fail_after(10):
            await rt.wait_idle()
        seen = len(rt.outbox.sent)
        await rt.submit(user_input(f"/approve {request_id}"))
        await until(lambda: len(rt.outbox.sent) > seen)
        assert rt.outbox.sent[-1]["text"] == (
            f"Your answer to [{request_id}] (approve) was recorded but not applied: it had "
            "already ended: the call it was for ended before an answer came (it was cancelled, "
            "or the runtime stopped). If it still matters, say so in a message of your own."
        )
        # The agent did not see the answer as a message.
        assert all(
            f"/approve {request_id}" not in str(m.content)
            for m in rt.sessions["main"].trajectory.messages
        )
    async with runtime_store.open() as store:
        record = await store.human_requests.get(request_id)
    assert record is not None and (record.status, record.delivered) == ("ended", True)


async def test_an_outcome_recorded_but_not_handed_over_reaches_the_agent_at_the_start(
    tmp_path: Path, runtime_store: RuntimeStoreUnderTest
) -> None:
    """A kill between recording how a request ended and handing it over: the next start hands
    it over once, and a later answer names the request that ended."""
    first = asks(timeout_seconds=3600)
    async with running(tmp_path, runtime_store, first) as rt:
        request_id = await asked(rt, first)
    decision = HumanDecision(
        request_id=request_id,
        session="main",
        kind="approval",
        question="Pay 4,200 EUR to ACME?",
        status="answered",
        waited_seconds=300.0,
        choice="deny",
        reason="the amount is wrong",
        default_words="deny",
    )
    async with runtime_store.open() as store:
        assert await store.human_requests.close(request_id, "answered", decision.to_json())
    second = ScriptedModel([say("Not paid: the approver says the amount is wrong.")])
    async with running(tmp_path, runtime_store, second) as rt:
        await until(lambda: len(second.requests) == 1)
        with anyio.fail_after(10):
            await rt.wait_idle()
        assert last_user_text(second) == (
            f"[HUMAN_ANSWER {request_id}] The approver answered request [{request_id}] "
            '("Pay 4,200 EUR to ACME?"): deny. Their reason: "the amount is wrong".'
        )
        seen = len(rt.outbox.sent)
        await rt.submit(user_input(f"/approve {request_id} actually fine"))
        await until(lambda: len(rt.outbox.sent) > seen)
        assert rt.outbox.sent[-1]["text"] == (
            f"Your answer to [{request_id}] (approve: actually fine) was recorded but not "
            "applied: it was already answered (deny: the amount is wrong); the first answer "
            "counts. If it still matters, say so in a message of your own."
        )
        assert len(second.requests) == 1  # the agent did not see the late answer
    assert len(await human_answers(runtime_store)) == 1
