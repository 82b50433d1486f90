"""The messages to the user in the SQLite store: the read-only view the CLI uses and the upgrade of
a version 3 file; and the outbox without a store. What every backend does with messages (their
deliveries per channel, one read state, paging, restarts) is in test_conformance_messages.py."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from store_records import message

from wakeful.core.records import OutboundMessage
from wakeful.events import user_input
from wakeful.services import MemoryMessages, Outbox
from wakeful.store.schema import MIGRATIONS, apply_migrations
from wakeful.store.sqlite import Store

pytestmark = pytest.mark.anyio


async def test_the_read_only_view_counts_what_the_store_kept_unread(tmp_path: Path) -> None:
    path = tmp_path / "wakeful.db"
    async with await Store.open(path) as store:
        outbox = Outbox(messages=store.messages)
        read = await outbox.send("main", "first")
        await outbox.send("main", "second")
        await outbox.mark_read([read.id], channel="web")
    with Store.read_only(path) as reader:
        assert reader.unread_message_count("main") == 1
        assert reader.unread_message_count() == 1
        [stored] = reader.user_messages("main", unread_only=True)
        assert stored.text == "second"


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
