"""The messages to the user in the store: deliveries per channel, one read state per message,
paging, restarts, and the upgrade of a version 3 file."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from wakeful.core.records import MessageAttachment, MessageDelivery, OutboundMessage
from wakeful.errors import UserError
from wakeful.events import user_input
from wakeful.services import MemoryMessages, Outbox
from wakeful.store.schema import MIGRATIONS, apply_migrations
from wakeful.store.sqlite import Store

pytestmark = pytest.mark.anyio


def message(
    message_id: str, session: str = "main", channels: tuple[str, ...] = ("console",)
) -> OutboundMessage:
    now = "2026-12-01T10:00:00Z"
    return OutboundMessage(
        id=message_id,
        session=session,
        created_at=now,
        urgency="normal",
        kind="text",
        text=f"text of {message_id}\nsecond line",
        deliveries=tuple(MessageDelivery(message_id, name, "queued", now) for name in channels),
    )


async def test_a_message_read_on_one_channel_is_read_everywhere(tmp_path: Path) -> None:
    async with await Store.open(tmp_path / "wakeful.db") as store:
        await store.messages.add(message("msg_1", channels=("web", "telegram")))
        await store.messages.record_delivery("msg_1", "telegram", "sent", channel_message_id="77")
        assert await store.messages.unread_count("main") == 1

        assert await store.messages.mark_read(["msg_1"], channel="telegram") == ["msg_1"]

        stored = await store.messages.get("msg_1")
        assert stored is not None and stored.read and stored.read_on == "telegram"
        states = {d.channel: d.state for d in stored.deliveries}
        assert states == {"web": "queued", "telegram": "read"}
        assert await store.messages.unread_count("main") == 0
        assert await store.messages.list("main", unread_only=True) == []
        # Read again on the web: already read, nothing new; the web copy is recorded as read.
        assert await store.messages.mark_read(["msg_1"], channel="web") == []
        again = await store.messages.get("msg_1")
        assert again is not None and again.read_on == "telegram"
        assert {d.channel: d.state for d in again.deliveries} == {"web": "read", "telegram": "read"}
        found = await store.messages.by_channel_id("telegram", "77")
        assert found is not None and found.id == "msg_1"


async def test_a_delivery_never_moves_back_and_a_read_report_marks_the_message(
    tmp_path: Path,
) -> None:
    async with await Store.open(tmp_path / "wakeful.db") as store:
        await store.messages.add(message("msg_1"))
        await store.messages.record_delivery("msg_1", "console", "read")
        await store.messages.record_delivery("msg_1", "console", "sent")
        stored = await store.messages.get("msg_1")
        assert stored is not None and stored.read_on == "console"
        assert [d.state for d in stored.deliveries] == ["read"]
        await store.messages.record_delivery("msg_1", "email", "failed", error="SMTP 550")
        failed = await store.messages.get("msg_1")
        assert failed is not None
        assert failed.deliveries[1][:3] == ("msg_1", "email", "failed")
        assert failed.deliveries[1].error == "SMTP 550"


async def test_bad_repository_calls_are_refused_with_the_way_out(tmp_path: Path) -> None:
    async with await Store.open(tmp_path / "wakeful.db") as store:
        await store.messages.add(message("msg_1"))
        with pytest.raises(UserError, match="msg_1 is stored already"):
            await store.messages.add(message("msg_1"))
        with pytest.raises(UserError, match="No message msg_nope is stored"):
            await store.messages.record_delivery("msg_nope", "console", "sent")
        with pytest.raises(UserError, match="Unknown delivery state 'seen'"):
            await store.messages.record_delivery("msg_1", "console", "seen")  # type: ignore[arg-type]


async def test_listing_pages_back_newest_first_and_marks_read_up_to_a_message(
    tmp_path: Path,
) -> None:
    async with await Store.open(tmp_path / "wakeful.db") as store:
        for i in range(5):
            await store.messages.add(message(f"msg_{i}"))
        await store.messages.add(message("msg_other", session="other"))
        first = await store.messages.list("main", limit=2)
        assert [m.id for m in first] == ["msg_4", "msg_3"]
        second = await store.messages.list("main", limit=2, before="msg_3")
        assert [m.id for m in second] == ["msg_2", "msg_1"]
        assert first[0].first_line == "text of msg_4"

        newly = await store.messages.mark_read_through("main", "msg_2", channel="web")
        assert newly == ["msg_0", "msg_1", "msg_2"]
        assert [m.id for m in await store.messages.list("main", unread_only=True)] == [
            "msg_4",
            "msg_3",
        ]
        assert await store.messages.unread_count() == 3  # msg_3, msg_4 and the other session's
        # A message of another session is no bound for this one.
        assert await store.messages.mark_read_through("main", "msg_other", channel="web") == []


async def test_messages_and_their_read_state_survive_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "wakeful.db"
    attachment = MessageAttachment(str(tmp_path / "a.pdf"), "a.pdf", 12, "application/pdf")
    async with await Store.open(path) as store:
        outbox = Outbox(messages=store.messages)
        read = await outbox.send("main", "first")
        await outbox.send("main", "second", attachments=[attachment], urgency="high")
        await outbox.mark_read([read.id], channel="web")
    async with await Store.open(path) as store:
        [unread] = await Outbox(messages=store.messages).unread("main")
        assert (unread.text, unread.urgency, unread.attachments) == (
            "second",
            "high",
            (attachment,),
        )
        old = await store.messages.get(read.id)
        assert old is not None and old.read_on == "web"
    with Store.read_only(path) as reader:
        assert reader.unread_message_count("main") == 1


async def test_a_version_3_store_is_upgraded_keeping_its_events(tmp_path: Path) -> None:
    path = tmp_path / "wakeful.db"
    event = user_input("from before messages were stored")
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        assert apply_migrations(conn, path, MIGRATIONS[:3]) == 3
        conn.execute(
            "INSERT INTO events (id, session, kind, ts, status, data) VALUES (?, ?, ?, ?, ?, ?)",
            (event.id, event.session, event.kind, event.ts.isoformat(), "pending", event.to_json()),
        )
    finally:
        conn.close()
    async with await Store.open(path) as store:
        assert await store.pending_events() == [event]
        await store.messages.add(message("msg_1"))
        assert await store.messages.unread_count() == 1
    with Store.read_only(path) as reader:
        assert reader.schema_version() == len(MIGRATIONS) >= 4


async def test_the_outbox_without_a_store_keeps_the_same_read_state() -> None:
    outbox = Outbox()
    assert isinstance(outbox.messages, MemoryMessages)
    shown: list[str] = []

    async def console(sent: dict[str, object]) -> None:
        shown.append(str(sent["id"]))

    outbox.listeners.append(console)
    first = await outbox.send("main", "one")
    second = await outbox.send("main", "two")
    assert shown == [first.id, second.id]
    assert [d.state for d in second.deliveries] == ["sent"]
    assert await outbox.mark_read([first.id], channel="console") == [first.id]
    assert [m.id for m in await outbox.unread("main")] == [second.id]
    assert await outbox.messages.mark_read_through("main", second.id, channel="web") == [second.id]
    assert await outbox.unread("main") == []


async def test_a_failing_channel_is_recorded_and_the_others_still_get_the_message() -> None:
    async def telegram(sent: OutboundMessage) -> str:
        raise ConnectionError("api.telegram.org unreachable")

    async def email(sent: OutboundMessage) -> str:
        return "<m1@example.org>"

    outbox = Outbox(
        deliveries={"telegram": telegram, "email": email},
        route=lambda message, channel: ["telegram", "email"],
    )
    stored = await outbox.send("main", "the build is red", urgency="urgent")
    by_channel = {d.channel: d for d in stored.deliveries}
    assert by_channel["telegram"].state == "failed"
    assert by_channel["telegram"].error == "ConnectionError: api.telegram.org unreachable"
    assert (by_channel["email"].state, by_channel["email"].channel_message_id) == (
        "sent",
        "<m1@example.org>",
    )
