"""The duplicate-aware event writes the channels rely on: redeliveries recognised by id, filtered
events stored but never pending, and a store of the previous schema upgraded in place. The
channel tables' own behaviours (cursors, connected channels) run on both backends in
test_conformance_safety.py."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from wakeful.core.channel import source_event_id
from wakeful.errors import UserError
from wakeful.events import Event, Source, user_input
from wakeful.store.schema import MIGRATIONS, apply_migrations
from wakeful.store.sqlite import Store

pytestmark = pytest.mark.anyio


def mail(source_id: str, text: str = "hello") -> Event:
    return Event(
        id=source_event_id("email:work", source_id),
        kind="email.received",
        source=Source(type="contact", id="bob@example.com"),
        channel="email:work",
        content={"from": "bob@example.com", "subject": "hi", "text": text},
    )


async def test_a_redelivered_event_is_recognised_and_left_as_it_was(tmp_path: Path) -> None:
    async with await Store.open(tmp_path / "w.db") as store:
        first = mail("<m1@x>")
        assert await store.events.add_new(first) is True
        await store.events.mark([first.id], "consumed")
        again = mail("<m1@x>", text="changed on the way")
        assert await store.events.add_new(again) is False
        [stored] = await store.events.recent()
        assert stored.status == "consumed" and stored.event == first


async def test_a_burst_stores_the_new_events_and_names_the_duplicates(tmp_path: Path) -> None:
    async with await Store.open(tmp_path / "w.db") as store:
        await store.events.add_new(mail("<old@x>"))
        burst = [
            (mail("<a@x>"), "pending"),
            (mail("<old@x>"), "pending"),
            (mail("<b@x>"), "filtered"),
            (mail("<a@x>"), "pending"),  # twice in one burst: the second is a duplicate
        ]
        assert await store.events.add_new_many(burst) == [True, False, True, False]  # type: ignore[arg-type]
        assert await store.events.count() == {"pending": 2, "filtered": 1}
        pending_ids = [e.id for e in await store.events.pending()]
        assert pending_ids == [mail("<old@x>").id, mail("<a@x>").id]
        filtered = await store.events.recent(status="filtered")
        assert [s.event.id for s in filtered] == [mail("<b@x>").id]


async def test_a_bad_status_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    async with await Store.open(tmp_path / "w.db") as store:
        with pytest.raises(UserError, match="'pending', 'consumed' or 'filtered', got 'lost'"):
            await store.events.add_new_many([(mail("<a@x>"), "pending"), (mail("<b@x>"), "lost")])  # type: ignore[list-item]
        assert await store.events.count() == {}


async def test_a_version_2_store_is_upgraded_keeping_events_and_their_order(
    tmp_path: Path,
) -> None:
    path = tmp_path / "w.db"
    events = [user_input(f"before {i}") for i in range(3)]
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        assert apply_migrations(conn, path, MIGRATIONS[:2]) == 2
        for i, event in enumerate(events):
            conn.execute(
                "INSERT INTO events (id, session, kind, ts, status, data) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (event.id, "main", event.kind, event.ts.isoformat(), "pending", event.to_json()),
            )
            if i == 0:
                conn.execute("UPDATE events SET status = 'consumed' WHERE id = ?", (event.id,))
        # The last row was deleted: its seq must not be handed out again after the upgrade.
        conn.execute("DELETE FROM events WHERE id = ?", (events[2].id,))
        with pytest.raises(sqlite3.IntegrityError):
            conn.execute("UPDATE events SET status = 'filtered'")
    finally:
        conn.close()

    async with await Store.open(path) as store:
        assert await store.pending_events() == [events[1]]
        later = user_input("after")
        assert await store.events.add_new(later, "filtered")
        stored = await store.events.recent()
    assert [(s.rowid, s.status) for s in stored] == [
        (1, "consumed"),
        (2, "pending"),
        (4, "filtered"),
    ]
    conn = sqlite3.connect(path)
    indexes = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='index'")}
    version = conn.execute("SELECT max(version) FROM schema_version").fetchone()[0]
    conn.close()
    assert {"events_by_status", "events_by_session"} <= indexes
    assert version == len(MIGRATIONS)
