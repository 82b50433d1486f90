"""The agent's requests to a person in a real runtime: the priority decides how the person is
reached (the delivery policy with the file-driven "phone" channels of tests/line_channels.py),
the answer comes back as an event the agent reads, and a late answer is told to the person."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio import wait_all_tasks_blocked

from line_channels import PHONE_KIND, lines, until
from wakeful.channels.registry import ChannelSpec
from wakeful.clock import FakeClock
from wakeful.delivery.settings import DeliverySettings
from wakeful.events import USER_INPUT, Event, Source, user_input
from wakeful.messages import ToolMessage, UserMessage
from wakeful.models import ScriptedModel, call, say, use
from wakeful.runtime import Runtime
from wakeful.safety.approvals import Approvals
from wakeful.toolkits.collaboration.human import HUMAN_TOOLS

pytestmark = pytest.mark.anyio

START = datetime(2026, 12, 1, 12, 0, 30, tzinfo=UTC)
PHONES = ("me", "tablet")


def sent_to(root: Path, phone: str) -> list[str]:
    return [line["text"] for line in lines(root / f"{phone}.out") if "copy" in line]


@asynccontextmanager
async def running(tmp_path: Path, clock: FakeClock, model: ScriptedModel) -> AsyncIterator[Runtime]:
    for phone in PHONES:
        (tmp_path / f"{phone}.in").touch()
    specs = [
        ChannelSpec(
            "phone",
            phone,
            {"path": str(tmp_path / f"{phone}.in"), "sent_path": str(tmp_path / f"{phone}.out")},
        )
        for phone in PHONES
    ]
    delivery = {"channels": ["console", "phone:me", "phone:tablet"], "escalate_after_minutes": 5}
    async with Runtime(
        model=model,
        tools=HUMAN_TOOLS,
        with_timers=False,
        store_path=tmp_path / "w.db",
        clock=clock,
        channels=specs,
        channel_kinds={"phone": PHONE_KIND},
        delivery=DeliverySettings.model_validate(delivery),
    ) as rt:
        await until(lambda: all(h.state == "running" for h in rt.channels.values()))
        assert rt.approvals is not None
        # What the runtime is to do itself (see the report): the tools use the gate's queue.
        rt.services.state[Approvals] = rt.approvals
        yield rt


async def elapse(clock: FakeClock, minutes: float) -> None:
    clock.advance(timedelta(minutes=minutes))
    await wait_all_tasks_blocked()


def last_user_text(model: ScriptedModel) -> str:
    message = model.requests[-1].messages[-1]
    assert isinstance(message, UserMessage)
    return str(message.content)


async def asked(rt: Runtime, model: ScriptedModel, text: str) -> str:
    await rt.submit(user_input(text))
    await until(lambda: len(model.requests) >= 2)
    with anyio.fail_after(10):
        await rt.wait_idle(include_tasks=False)
    assert rt.approvals is not None
    (request,) = rt.approvals.pending("main")
    return request.id


def approval_turns(priority: str, **arguments: Any) -> ScriptedModel:
    return ScriptedModel(
        [
            use(
                call(
                    "request_human_approval",
                    question="Pay 4,200 EUR to ACME?",
                    priority=priority,
                    **({"timeout_seconds": 3600} | arguments),
                )
            ),
            say("I asked the approver; I will pay once they agree."),
            say("Paid."),
        ]
    )


async def test_an_urgent_request_reaches_every_channel_in_turn_and_the_answer_the_agent(
    tmp_path: Path,
) -> None:
    clock = FakeClock(START)
    model = approval_turns("urgent")
    async with running(tmp_path, clock, model) as rt:
        request_id = await asked(rt, model, "Pay ACME's invoice.")
        question = f'Approval requested [{request_id}] by the agent: "Pay 4,200 EUR to ACME?"'
        # The user wrote at the console: urgent goes there first…
        messages = await rt.outbox.messages.list("main")
        (sent,) = [m for m in messages if f"[{request_id}]" in m.text]
        assert [d.channel for d in sent.deliveries] == ["console"]
        assert sent.urgency == "urgent"
        # …then, left unread, to each next channel in turn.
        await elapse(clock, 5.1)
        await until(lambda: len(sent_to(tmp_path, "me")) == 1)
        assert sent_to(tmp_path, "me")[0].startswith(question)
        assert sent_to(tmp_path, "tablet") == []
        await elapse(clock, 5.1)
        await until(lambda: len(sent_to(tmp_path, "tablet")) == 1)
        assert sent_to(tmp_path, "tablet")[0].startswith(question)

        await rt.submit(user_input(f"/approve {request_id} it matches the order"))
        await until(lambda: len(model.requests) >= 3)
        with anyio.fail_after(10):
            await rt.wait_idle()
        assert (
            f'The approver answered request [{request_id}] ("Pay 4,200 EUR to ACME?"): approve. '
            'Their reason: "it matches the order".'
        ) in last_user_text(model)


async def test_a_normal_request_goes_to_one_channel(tmp_path: Path) -> None:
    clock = FakeClock(START)
    model = approval_turns("normal")
    async with running(tmp_path, clock, model) as rt:
        request_id = await asked(rt, model, "Pay ACME's invoice.")
        messages = await rt.outbox.messages.list("main")
        (question,) = [m for m in messages if f"[{request_id}]" in m.text]
        assert [d.channel for d in question.deliveries] == ["console"]
        await elapse(clock, 30)
        assert sent_to(tmp_path, "me") == sent_to(tmp_path, "tablet") == []
        await rt.submit(user_input(f"/deny {request_id}"))
        await until(lambda: len(model.requests) >= 3)
        assert "): deny." in last_user_text(model)


async def test_an_answer_after_the_timeout_is_told_to_the_person_not_the_agent(
    tmp_path: Path,
) -> None:
    clock = FakeClock(START)
    model = approval_turns("high", timeout_seconds=0.2)
    async with running(tmp_path, clock, model) as rt:
        assert rt.approvals is not None
        await rt.submit(user_input("Pay ACME's invoice."))
        await until(lambda: len(model.requests) >= 3)
        assert last_user_text(model).endswith(
            "Applied the default: deny.\nRecorded as case 1 (no one decided: the default was "
            "applied after the timeout)."
        )
        (request,) = rt.approvals.closed("main")
        await rt.submit(user_input(f"/approve {request.id}"))
        await until(lambda: any("recorded but not applied" in e["text"] for e in rt.outbox.sent))
        assert len(model.requests) == 3  # the agent did not see the late answer
        assert request.late[0].answer == "approve"


async def test_a_waiting_request_goes_to_the_background_when_an_event_interrupts_it(
    tmp_path: Path,
) -> None:
    clock = FakeClock(START)
    model = ScriptedModel(
        [
            use(
                call(
                    "request_human_approval",
                    question="Restart the database?",
                    wait=True,
                    timeout_seconds=3600,
                )
            ),
            say("It is noon; the restart still waits for the approver."),
            say("Restarting now."),
        ]
    )
    async with running(tmp_path, clock, model) as rt:
        await rt.submit(user_input("Restart the database."))
        assert rt.approvals is not None
        approvals = rt.approvals
        await until(lambda: len(approvals.pending("main")) == 1)
        (request,) = approvals.pending("main")
        request_id, await_request = request.id, request
        # Rule 3: an urgent event catches the call waiting; it goes on in the background.
        urgent = Event(
            kind=USER_INPUT,
            source=Source(type="user", id="user"),
            content="What time is it?",
            urgency="urgent",
        )
        await rt.submit(urgent)
        await until(lambda: len(model.requests) >= 2)
        placeholder = [m for m in model.requests[1].messages if isinstance(m, ToolMessage)]
        assert [m.status for m in placeholder] == ["placeholder"]
        assert approvals.pending("main") == [await_request]
        await rt.submit(user_input(f"/approve {request_id}"))
        await until(lambda: len(model.requests) >= 3)
        assert f"The approver answered request [{request_id}]" in last_user_text(model)
