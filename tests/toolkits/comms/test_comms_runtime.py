"""The user-communication tools in a real runtime with a real store: a card shown in the console
as text (and read there), notifications, and the agent's list of what the user has not read."""

from __future__ import annotations

import io
from pathlib import Path

import anyio
import pytest
from rich.console import Console

from servers.postgres import RuntimeStoreUnderTest
from tool_services import tool_services
from wakeful.channels.console import ConsoleChannel
from wakeful.models import ScriptedModel, call, say, use
from wakeful.runtime import Runtime
from wakeful.toolkits.comms.listing import list_user_messages
from wakeful.toolkits.comms.notifications import send_user_notification
from wakeful.toolkits.comms.reply import reply_to_user
from wakeful.tools.spec import ToolContext

pytestmark = pytest.mark.anyio

CARD = {
    "title": "Deploy v2?",
    "fields": [{"label": "Tests", "value": "412 passed"}],
    "actions": [{"id": "go", "label": "Deploy", "style": "primary"}, {"id": "no", "label": "No"}],
}


def screen() -> Console:
    return Console(file=io.StringIO(), width=200, highlight=False)


async def test_the_console_shows_a_card_as_text_and_marks_it_read(
    tmp_path: Path, runtime_store: RuntimeStoreUnderTest
) -> None:
    console = screen()
    model = ScriptedModel(
        [
            use(
                call("send_card_to_user", card=CARD),
                call("send_user_notification", text="Backup done.", title="Backup"),
            ),
            say(""),
        ]
    )
    async with Runtime(
        model=model, workdir=tmp_path, with_timers=False, **runtime_store.options
    ) as rt:
        with anyio.fail_after(10):
            await ConsoleChannel(rt, stream=io.StringIO("deploy?\n"), console=console).run()
        assert rt.store is not None
        shown = console.file.getvalue()  # type: ignore[attr-defined]
        assert (
            "wakeful> [Deploy v2?]\nTests: 412 passed\nButtons: [Deploy] [No]\n"
            "wakeful (notice: Backup)> Backup done." in shown
        )
        stored = await rt.store.messages.list("main")
        assert [(m.kind, m.read_on) for m in stored] == [
            ("notification", "console"),
            ("card", "console"),
        ]
        assert [d.state for d in stored[1].deliveries] == ["read"]
        assert await rt.store.messages.unread_count("main") == 0
    # Stored: the messages and their read state are there for the next run.
    async with runtime_store.open() as store:
        assert [(m.kind, m.read_on) for m in await store.messages.list("main")] == [
            ("notification", "console"),
            ("card", "console"),
        ]


async def test_the_agent_lists_what_the_user_has_not_read() -> None:
    async with tool_services() as (services, _):
        ctx = ToolContext("main", "call_1", "list_user_messages", services)
        assert (await list_user_messages.run({}, ctx)).content == (
            "No unread messages: the user has read everything you sent."
        )
        read = await services.outbox.send("main", "Your flight is at 9:40.")
        await services.outbox.mark_read([read.id], channel="web")
        await reply_to_user.run(
            {"text": "The report is ready.\nIt has 12 pages."},
            ToolContext("main", "call_2", "reply_to_user", services),
        )
        notified = await send_user_notification.run(
            {"text": "Disk almost full.", "urgency": "urgent"},
            ToolContext("main", "call_3", "send_user_notification", services),
        )
        await services.outbox.send("other", "not this session's")
        [notice, report] = await services.outbox.unread("main")
        assert notified.content == f"notified ({notice.id})"

        listed = (await list_user_messages.run({}, ctx)).content
        assert listed.splitlines() == [
            "2 unread message(s); newest first:",
            f"{notice.id} {notice.created_at} urgent notification unread: Disk almost full.",
            f"{report.id} {report.created_at} normal text unread: The report is ready.",
        ]
        everything = (await list_user_messages.run({"unread_only": False}, ctx)).content
        assert f"{read.id} {read.created_at} normal text read " in everything
        assert "on web: Your flight is at 9:40." in everything
        assert "not this session's" not in everything
