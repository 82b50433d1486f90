"""The delivery policy at work in a runtime: escalation while unread, digests, quiet hours,
replies where the user wrote from, failures, read receipts and restarts.

The user's second channel is a real channel kind driven by files (tests/line_channels.py's
"phone"): what it delivers is appended to a file, and a line in its input file is the user
reading a copy. Time is a FakeClock, so ten minutes pass in a microsecond.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio import wait_all_tasks_blocked

from line_channels import PHONE_KIND, append, lines, until
from wakeful.channels.registry import ChannelSpec
from wakeful.clock import FakeClock
from wakeful.delivery.settings import DeliverySettings
from wakeful.events import TOOL_RESULT, Event, Source
from wakeful.messages import UserMessage
from wakeful.models import ScriptedModel, call, say, use
from wakeful.models.base import Model
from wakeful.runtime import Runtime

pytestmark = pytest.mark.anyio

START = datetime(2026, 12, 1, 12, 0, 30, tzinfo=UTC)


class Phones:
    """Two phone channels of the user ("phone:me" first, "phone:tablet" second)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        for name in ("me", "tablet"):
            (root / f"{name}.in").touch()

    def specs(self) -> list[ChannelSpec]:
        return [
            ChannelSpec(
                "phone",
                name,
                {
                    "path": str(self.root / f"{name}.in"),
                    "sent_path": str(self.root / f"{name}.out"),
                },
            )
            for name in ("me", "tablet")
        ]

    def sent(self, name: str = "me") -> list[dict[str, Any]]:
        return [line for line in lines(self.root / f"{name}.out") if "copy" in line]

    def shown_read(self, name: str = "me") -> list[str]:
        return [
            line["shown_read"] for line in lines(self.root / f"{name}.out") if "shown_read" in line
        ]

    def write(self, name: str, **fields: Any) -> None:
        append(self.root / f"{name}.in", fields)


@asynccontextmanager
async def running(
    tmp_path: Path,
    clock: FakeClock,
    *,
    model: Model | None = None,
    store: bool = True,
    **delivery: Any,
) -> AsyncIterator[Runtime]:
    phones = Phones(tmp_path)
    settings = {"channels": ["console", "phone:me", "phone:tablet"], **delivery}
    async with Runtime(
        model=model or ScriptedModel([]),
        with_timers=False,
        store_path=tmp_path / "w.db" if store else None,
        clock=clock,
        channels=phones.specs(),
        channel_kinds={"phone": PHONE_KIND},
        delivery=DeliverySettings.model_validate(settings),
    ) as rt:
        await until(
            lambda: (
                len(rt.channels) == 2 and all(h.state == "running" for h in rt.channels.values())
            )
        )
        yield rt


async def elapse(clock: FakeClock, minutes: float) -> None:
    clock.advance(timedelta(minutes=minutes))
    await wait_all_tasks_blocked()


def states(message: Any) -> dict[str, str]:
    return {d.channel: d.state for d in message.deliveries}


async def test_an_urgent_message_left_unread_reaches_the_next_channel(tmp_path: Path) -> None:
    clock, phones = FakeClock(START), Phones(tmp_path)
    async with running(tmp_path, clock, escalate_after_minutes=5) as rt:
        rt.activity.touch("web")  # the user is at the web console
        sent = await rt.outbox.send("main", "The server is down.", urgency="urgent")
        assert states(sent) == {"console": "queued"}  # no console open in this test
        await elapse(clock, 4.9)
        assert phones.sent("me") == []
        await elapse(clock, 0.2)
        assert [line["message"] for line in phones.sent("me")] == [sent.id]
        assert phones.sent("tablet") == []
        await elapse(clock, 5)
        assert [line["message"] for line in phones.sent("tablet")] == [sent.id]
        stored = await rt.outbox.messages.get(sent.id)
        assert stored is not None and states(stored)["phone:me"] == "sent"


async def test_reading_a_message_cancels_its_escalation(tmp_path: Path) -> None:
    clock, phones = FakeClock(START), Phones(tmp_path)
    async with running(tmp_path, clock, escalate_after_minutes=5) as rt:
        rt.activity.touch("console")
        sent = await rt.outbox.send("main", "Deploy finished with errors.", urgency="urgent")
        await elapse(clock, 2)
        await rt.outbox.mark_read([sent.id], channel="console")
        await elapse(clock, 30)
        assert phones.sent("me") == phones.sent("tablet") == []
        assert rt.delivery is not None and rt.delivery.pending() == []


async def test_a_read_receipt_on_the_phone_reads_the_message_everywhere(tmp_path: Path) -> None:
    clock, phones = FakeClock(START), Phones(tmp_path)
    async with running(tmp_path, clock, escalate_after_minutes=5) as rt:
        sent = await rt.outbox.send("main", "Sign the contract today.", urgency="urgent")
        # The user is away: urgent starts on the phone, then the console, then the tablet.
        copy = phones.sent("me")[0]["copy"]
        phones.write("me", read=copy)
        await until(lambda: rt.delivery is not None and rt.delivery.pending() == [])
        stored = await rt.outbox.messages.get(sent.id)
        assert stored is not None and stored.read and stored.read_on == "phone:me"
        await elapse(clock, 60)
        assert phones.sent("tablet") == []


async def test_a_message_read_on_the_console_shows_read_on_the_phone_copy(tmp_path: Path) -> None:
    clock, phones = FakeClock(START), Phones(tmp_path)
    async with running(tmp_path, clock) as rt:
        heard: list[dict[str, str]] = []  # what an open console page is told

        async def listener(message: Any) -> None:
            heard.append(states(message))

        rt.outbox.delivery_listeners.append(listener)
        rt.activity.touch("console")
        sent = await rt.outbox.send("main", "Your train is delayed.", urgency="high")
        assert states(sent) == {"console": "queued", "phone:me": "sent"}
        copy = phones.sent("me")[0]["copy"]
        await rt.outbox.mark_read([sent.id], channel="console")
        await until(lambda: phones.shown_read("me") == [copy])

        async def reflected() -> bool:
            stored = await rt.outbox.messages.get(sent.id)
            return stored is not None and states(stored)["phone:me"] == "read"

        with anyio.fail_after(5):
            while True:
                if await reflected():
                    break
                await anyio.sleep(0.01)
        # The page hears of it too, or its chip would say "sent" until reloaded.
        assert heard[-1] == {"console": "read", "phone:me": "read"}


async def test_a_channel_that_fails_is_recorded_and_the_next_one_tried(tmp_path: Path) -> None:
    clock, phones = FakeClock(START), Phones(tmp_path)
    model = ScriptedModel(
        [use(call("send_user_notification", text="Backup failed.", urgency="high")), say("")]
    )
    async with running(tmp_path, clock, model=model) as rt:
        phones.write("me", refuse="the phone's network is down")
        await anyio.sleep(0.1)  # the channel reads its control line
        rt.activity.touch("console")
        await rt.submit(
            Event(kind="user.input", source=Source(type="user", id="user"), content="go")
        )
        await until(lambda: len(model.requests) == 2)
        result = model.requests[1].messages[-1].content
        assert "phone:me failed (ConnectionError: the phone's network is down)" in result
        assert "it reached console, phone:tablet" in result
        assert len(phones.sent("tablet")) == 1


async def test_a_reply_goes_back_to_the_channel_the_user_wrote_from(tmp_path: Path) -> None:
    clock, phones = FakeClock(START), Phones(tmp_path)
    model = ScriptedModel([use(call("reply_to_user", text="pong")), say("")])
    async with running(tmp_path, clock, model=model):
        phones.write("tablet", user=True, text="ping")
        await until(lambda: len(phones.sent("tablet")) == 1)
        assert phones.sent("tablet")[0]["text"] == "pong"
        assert phones.sent("me") == []


async def test_low_messages_go_out_together_in_one_digest(tmp_path: Path) -> None:
    clock, phones = FakeClock(START), Phones(tmp_path)
    async with running(
        tmp_path, clock, model=ScriptedModel([say("")]), digest_every_minutes=30
    ) as rt:
        phones.write("me", user=True, text="I'm out, keep me posted")
        await until(lambda: rt.activity.last_channel == "phone:me")
        ids = [
            (await rt.outbox.send("main", text, urgency="low")).id
            for text in ("Newsletter filed.", "Two spam mails deleted.", "Calendar synced.")
        ]
        assert phones.sent("me") == []
        await elapse(clock, 30)
        digest = phones.sent("me")
        assert len(digest) == 1
        assert digest[0]["text"] == (
            "3 updates while you were away:\n• Newsletter filed.\n• Two spam mails deleted.\n"
            "• Calendar synced."
        )
        phones.write("me", read=digest[0]["copy"])
        await until(lambda: rt.delivery is not None and not rt.delivery._reads)
        with anyio.fail_after(5):
            while True:
                if not await rt.outbox.unread("main"):
                    break
                await anyio.sleep(0.01)
        assert sorted(ids) == sorted(m.id for m in await rt.outbox.messages.list("main"))


async def test_quiet_hours_hold_a_high_message_until_they_end(tmp_path: Path) -> None:
    clock, phones = FakeClock(datetime(2026, 12, 1, 23, 0, tzinfo=UTC)), Phones(tmp_path)
    quiet = {"start": "22:00", "end": "07:00"}
    async with running(tmp_path, clock, quiet_hours=quiet, timezone="UTC") as rt:
        await rt.outbox.send("main", "The invoice was paid.", urgency="high")
        await elapse(clock, 7 * 60 + 59)
        assert phones.sent("me") == []
        await elapse(clock, 1)
        assert [line["text"] for line in phones.sent("me")] == ["The invoice was paid."]


async def test_a_restart_keeps_an_escalation_and_never_sends_it_twice(tmp_path: Path) -> None:
    clock, phones = FakeClock(START), Phones(tmp_path)
    async with running(tmp_path, clock, escalate_after_minutes=5) as rt:
        rt.activity.touch("console")
        sent = await rt.outbox.send("main", "Disk almost full.", urgency="urgent")
    clock.advance(timedelta(minutes=6))  # the runtime was down when the escalation was due
    async with running(tmp_path, clock, escalate_after_minutes=5):
        await wait_all_tasks_blocked()
        assert [line["message"] for line in phones.sent("me")] == [sent.id]
    async with running(tmp_path, clock, escalate_after_minutes=5):
        await elapse(clock, 1)
        assert len(phones.sent("me")) == 1  # not again
        await elapse(clock, 5)
        assert [line["message"] for line in phones.sent("tablet")] == [sent.id]


async def test_day_old_messages_are_not_pushed_after_a_long_stop(tmp_path: Path) -> None:
    clock, phones = FakeClock(START), Phones(tmp_path)
    async with running(tmp_path, clock, max_age_hours=12) as rt:
        rt.activity.touch("console")
        await rt.outbox.send("main", "Lunch menu posted.", urgency="urgent")
    clock.advance(timedelta(hours=13))
    async with running(tmp_path, clock, max_age_hours=12):
        await elapse(clock, 60)
    assert phones.sent("me") == phones.sent("tablet") == []


async def test_a_background_result_while_the_user_is_away_prompts_a_notification(
    tmp_path: Path,
) -> None:
    clock = FakeClock(START)
    model = ScriptedModel([say(""), say("")])

    def result(task: str) -> Event:
        return Event(
            kind=TOOL_RESULT,
            source=Source(type="tool", id=task),
            content="The quarterly report is ready: report.pdf",
            context={"task_id": task, "tool": "build_report", "state": "completed"},
        )

    async with running(tmp_path, clock, model=model, active_minutes=10) as rt:
        rt.activity.touch("console")
        await rt.submit(result("task_1"))
        await until(lambda: len(model.requests) == 1)
        await elapse(clock, 25)
        await rt.submit(result("task_2"))
        await until(lambda: len(model.requests) == 2)
    present, away = (
        str(request.messages[-1].content)
        for request in model.requests
        if isinstance(request.messages[-1], UserMessage)
    )
    assert "send_user_notification" not in present
    assert (
        "the user is away (last seen 25 min ago, on console): if a result above is one the user "
        "asked for, tell them with send_user_notification" in away
    )
