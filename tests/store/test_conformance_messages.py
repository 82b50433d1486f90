"""Messages to the user, subagents and cases behave the same on every backend: each test runs on
the SQLite store (a file) and on the PostgreSQL store (a fresh database on a real server, see
tests/servers/postgres.py; skipped where PostgreSQL is missing). The requests to a person have
theirs in test_human_requests_store.py (same fixture); their races between workers and a
hand-edited row are here.

Moved here from the SQLite-only tests (same behaviours, now on both backends): from
test_user_messages.py a message read on one channel is read everywhere, deliveries never move
back, bad calls refused with the way out, paging and marking read up to a message, messages and
their read state across a restart; from test_cases_store.py the store's numbering and whole
records, and cases across a restart. What reads SQLite's files (the CLI's read-only view, the
upgrade of old files) stays in those files. The races (one message read by two readers at once,
one child ended or delivered from two places at once) run within one store on both backends,
and between two workers (two stores on one database) on PostgreSQL, the backend workers share.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from store_records import OpenStore, WriteRaw, case, human_request, message, unreadable

from wakeful.core.records import (
    DeliveryState,
    HumanRequestStatus,
    MessageAttachment,
    SubagentRecord,
    SubagentStatus,
)
from wakeful.errors import StoreError, UserError
from wakeful.services import Outbox

pytestmark = pytest.mark.anyio


def child(subagent_id: str, parent: str = "main", **changes: Any) -> SubagentRecord:
    made = SubagentRecord(
        id=subagent_id,
        parent=parent,
        parent_call=f"call_{subagent_id}",
        root="main",
        depth=1,
        agent="researcher",
        task="find the invoice «2026-12» 請求書",
        mode="async",
        status="running",
        created_at="2026-12-01T10:00:00+00:00",
        context_strategy="summary",
    )
    return made._replace(**changes)


# --- messages to the user ------------------------------------------------------------------------


async def test_a_message_read_on_one_channel_is_read_everywhere(open_store: OpenStore) -> None:
    async with open_store() as store:
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
        assert [m.id for m in await store.messages.all_by_channel_id("telegram", "77")] == ["msg_1"]
        assert await store.messages.all_by_channel_id("telegram", "78") == []
        assert await store.messages.all_by_channel_id("web", "77") == []


async def test_every_message_a_digests_copy_stands_for_is_found_by_the_copys_id(
    open_store: OpenStore,
) -> None:
    async with open_store() as store:
        # A digest's three parts, in two sessions, share the copy "d:1" on telegram; another
        # message has a copy of its own there, and one has "d:1" on another channel.
        for message_id, session in (("msg_1", "mail"), ("msg_2", "main"), ("msg_3", "mail")):
            await store.messages.add(message(message_id, session))
            await store.messages.record_delivery(
                message_id, "telegram", "sent", channel_message_id="d:1"
            )
        await store.messages.add(message("msg_4"))
        await store.messages.record_delivery("msg_4", "telegram", "sent", channel_message_id="s:2")
        await store.messages.add(message("msg_5"))
        await store.messages.record_delivery("msg_5", "xmpp", "sent", channel_message_id="d:1")

        parts = await store.messages.all_by_channel_id("telegram", "d:1")
        assert [(m.id, m.session) for m in parts] == [
            ("msg_1", "mail"),
            ("msg_2", "main"),
            ("msg_3", "mail"),
        ]
        assert all(
            [(d.channel, d.channel_message_id) for d in m.deliveries][-1] == ("telegram", "d:1")
            for m in parts
        )
        assert [m.id for m in await store.messages.all_by_channel_id("telegram", "s:2")] == [
            "msg_4"
        ]
        assert [m.id for m in await store.messages.all_by_channel_id("xmpp", "d:1")] == ["msg_5"]
        assert await store.messages.all_by_channel_id("telegram", "d:9") == []
        assert await store.messages.all_by_channel_id("email", "d:1") == []


async def test_a_delivery_never_moves_back_and_a_read_report_marks_the_message(
    open_store: OpenStore,
) -> None:
    async with open_store() as store:
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


async def test_a_delivery_keeps_its_channel_id_times_and_order(open_store: OpenStore) -> None:
    async with open_store() as store:
        await store.messages.add(message("msg_1", channels=("web",)))
        await store.messages.record_delivery("msg_1", "telegram", "sent", channel_message_id="9")
        await store.messages.record_delivery("msg_1", "email", "failed", error="SMTP 421")
        # A retry that went through: failed → sent, and the id of the copy kept from then on.
        await store.messages.record_delivery(
            "msg_1", "email", "sent", channel_message_id="<m1@example.org>"
        )
        await store.messages.record_delivery("msg_1", "telegram", "delivered")
        stored = await store.messages.get("msg_1")
        assert stored is not None
        assert [d.channel for d in stored.deliveries] == ["web", "telegram", "email"]
        web, telegram, email = stored.deliveries
        assert (web.state, web.sent_at, web.read_at) == ("queued", None, None)
        assert (telegram.state, telegram.channel_message_id) == ("delivered", "9")
        assert telegram.sent_at is not None and telegram.read_at is None
        assert (email.state, email.channel_message_id) == ("sent", "<m1@example.org>")
        assert email.error == "SMTP 421"
        assert not stored.read


async def test_bad_repository_calls_are_refused_with_the_way_out(open_store: OpenStore) -> None:
    async with open_store() as store:
        await store.messages.add(message("msg_1"))
        with pytest.raises(UserError, match="msg_1 is stored already"):
            await store.messages.add(message("msg_1"))
        with pytest.raises(UserError, match="No message msg_nope is stored"):
            await store.messages.record_delivery("msg_nope", "console", "sent")
        with pytest.raises(UserError, match="Unknown delivery state 'seen'"):
            await store.messages.record_delivery("msg_1", "console", "seen")  # type: ignore[arg-type]
        # Nothing of the refused calls was stored; the first message is as it was.
        assert await store.messages.get("msg_1") == message("msg_1")
        assert [m.id for m in await store.messages.list()] == ["msg_1"]


async def test_listing_pages_back_newest_first_and_marks_read_up_to_a_message(
    open_store: OpenStore,
) -> None:
    async with open_store() as store:
        for i in range(5):
            await store.messages.add(message(f"msg_{i}"))
        await store.messages.add(message("msg_other", session="other"))
        first = await store.messages.list("main", limit=2)
        assert [m.id for m in first] == ["msg_4", "msg_3"]
        second = await store.messages.list("main", limit=2, before="msg_3")
        assert [m.id for m in second] == ["msg_2", "msg_1"]
        assert first[0].first_line == "text of msg_4"
        assert [m.id for m in await store.messages.list(limit=3)] == ["msg_other", "msg_4", "msg_3"]
        assert await store.messages.list("main", before="msg_unknown") == []

        newly = await store.messages.mark_read_through("main", "msg_2", channel="web")
        assert newly == ["msg_0", "msg_1", "msg_2"]
        assert [m.id for m in await store.messages.list("main", unread_only=True)] == [
            "msg_4",
            "msg_3",
        ]
        assert await store.messages.unread_count() == 3  # msg_3, msg_4 and the other session's
        # A message of another session is no bound for this one.
        assert await store.messages.mark_read_through("main", "msg_other", channel="web") == []
        # Those read already are not read again.
        assert await store.messages.mark_read_through("main", "msg_3", channel="web") == ["msg_3"]


async def test_messages_and_their_read_state_survive_a_restart(
    open_store: OpenStore, tmp_path: Path
) -> None:
    attachment = MessageAttachment(str(tmp_path / "a.pdf"), "a.pdf", 12, "application/pdf")
    card = {"title": "Deploy?", "actions": [{"id": "yes", "label": "Oui ✓"}]}
    async with open_store() as store:
        outbox = Outbox(messages=store.messages)
        read = await outbox.send("main", "first")
        await outbox.send("main", "second", attachments=[attachment], urgency="high")
        await outbox.mark_read([read.id], channel="web")
        carded = message("msg_card")._replace(kind="card", text="", card=card)
        await store.messages.add(carded)
    async with open_store() as store:
        [unread_card, unread] = await Outbox(messages=store.messages).unread("main")
        assert (unread.text, unread.urgency, unread.attachments) == (
            "second",
            "high",
            (attachment,),
        )
        assert unread_card == carded and unread_card.first_line == "Deploy?"
        old = await store.messages.get(read.id)
        assert old is not None and old.read_on == "web"
        assert await store.messages.unread_count("main") == 2


async def test_a_message_edited_by_hand_is_named_in_the_error(
    open_store: OpenStore, write_raw: WriteRaw
) -> None:
    async with open_store() as store:
        await store.messages.add(message("msg_1"))
        await store.messages.add(message("msg_2"))
    await write_raw("UPDATE messages SET body = %s WHERE id = %s", ("not json", "msg_1"))
    async with open_store() as store:
        with pytest.raises(StoreError, match=unreadable("message msg_1")):
            await store.messages.list()
        # The row is left as it is, and the others still read.
        assert await store.messages.get("msg_2") == message("msg_2")
        assert await store.messages.unread_count() == 2


async def test_two_readers_marking_one_message_read_at_once_see_it_newly_read_once(
    open_store: OpenStore,
) -> None:
    ids = [f"msg_{i}" for i in range(10)]
    newly: dict[str, list[str]] = {message_id: [] for message_id in ids}
    async with open_store() as store:
        for message_id in ids:
            await store.messages.add(message(message_id, channels=("web", "telegram")))

        async def read(channel: str, message_id: str) -> None:
            for found in await store.messages.mark_read([message_id], channel=channel):
                newly[found].append(channel)

        async with anyio.create_task_group() as group:
            for message_id in ids:
                group.start_soon(read, "web", message_id)
                group.start_soon(read, "telegram", message_id)
        for message_id in ids:
            stored = await store.messages.get(message_id)
            assert stored is not None
            assert newly[message_id] == [stored.read_on]
            assert [d.state for d in stored.deliveries] == ["read", "read"]


async def test_two_workers_marking_one_message_read_at_once_see_it_newly_read_once(
    postgres_url: str,
) -> None:
    from wakeful.store.postgres import PostgresStore

    ids = [f"msg_{i}" for i in range(30)]
    newly: dict[str, list[str]] = {message_id: [] for message_id in ids}
    async with (
        await PostgresStore.open(postgres_url) as worker_a,
        await PostgresStore.open(postgres_url) as worker_b,
    ):
        for message_id in ids:
            await worker_a.messages.add(message(message_id, channels=("web", "telegram")))

        async def read(store: PostgresStore, channel: str, message_id: str) -> None:
            for found in await store.messages.mark_read([message_id], channel=channel):
                newly[found].append(channel)

        async def read_through(store: PostgresStore, message_id: str) -> None:
            for found in await store.messages.mark_read_through(
                "main", message_id, channel="email"
            ):
                newly[found].append("email")

        async with anyio.create_task_group() as group:
            for message_id in ids:
                group.start_soon(read, worker_a, "web", message_id)
                group.start_soon(read, worker_b, "telegram", message_id)
            group.start_soon(read_through, worker_b, ids[-1])
        stored = await worker_b.messages.list(limit=len(ids))
        assert await worker_a.messages.unread_count() == 0
    assert all(len(channels) == 1 for channels in newly.values()), newly
    assert {m.id: [m.read_on] for m in stored} == newly


async def test_two_workers_reporting_one_delivery_at_once_never_move_it_back(
    postgres_url: str,
) -> None:
    """A "read" report and a late "sent" one, and a reader, all at once on two workers: the
    delivery ends "read" (never back to "sent"), and nothing deadlocks."""
    from wakeful.store.postgres import PostgresStore

    ids = [f"msg_{i}" for i in range(30)]
    async with (
        await PostgresStore.open(postgres_url) as worker_a,
        await PostgresStore.open(postgres_url) as worker_b,
    ):
        for message_id in ids:
            await worker_a.messages.add(message(message_id, channels=("telegram",)))

        async def report(store: PostgresStore, message_id: str, state: DeliveryState) -> None:
            await store.messages.record_delivery(message_id, "telegram", state)

        async def read(store: PostgresStore, message_id: str) -> None:
            await store.messages.mark_read([message_id], channel="telegram")

        async with anyio.create_task_group() as group:
            for message_id in ids:
                group.start_soon(report, worker_a, message_id, "read")
                group.start_soon(report, worker_b, message_id, "sent")
                group.start_soon(read, worker_b, message_id)
        stored = await worker_b.messages.list(limit=len(ids))
    assert len(stored) == len(ids)
    for found in stored:
        assert found.read_on == "telegram"
        [delivery] = found.deliveries
        assert delivery.state == "read" and delivery.sent_at is not None


async def test_two_workers_reading_in_opposite_orders_lose_no_write_to_a_deadlock(
    postgres_url: str,
) -> None:
    from wakeful.store.postgres import PostgresStore

    ids = [f"msg_{i}" for i in range(200)]
    newly: list[str] = []
    async with (
        await PostgresStore.open(postgres_url) as worker_a,
        await PostgresStore.open(postgres_url) as worker_b,
    ):
        for message_id in ids:
            await worker_a.messages.add(message(message_id))

        async def read(store: PostgresStore, message_id: str) -> None:
            newly.extend(await store.messages.mark_read([message_id], channel="web"))

        async with anyio.create_task_group() as group:
            for mine, theirs in zip(ids, reversed(ids), strict=True):
                group.start_soon(read, worker_a, mine)
                group.start_soon(read, worker_b, theirs)
        assert await worker_b.messages.unread_count() == 0
    assert sorted(newly) == sorted(ids)


# --- subagents -----------------------------------------------------------------------------------


async def test_a_child_is_read_back_whole_and_its_tree_listed(open_store: OpenStore) -> None:
    async with open_store() as store:
        await store.subagents.add(child("sub_1"))
        await store.subagents.add(child("sub_2", mode="sync", context_strategy="minimal"))
        await store.subagents.add(child("sub_3", parent="sub_1", depth=2, mode="stream"))
        await store.subagents.add(child("sub_4", parent="other", root="other"))
    async with open_store() as store:
        assert await store.subagents.get("sub_1") == child("sub_1")
        assert await store.subagents.get("sub_nope") is None
        assert [c.id for c in await store.subagents.children("main")] == ["sub_1", "sub_2"]
        [grandchild] = await store.subagents.children("sub_1")
        assert grandchild == child("sub_3", parent="sub_1", depth=2, mode="stream")
        assert await store.subagents.children("sub_3") == []
        with pytest.raises(UserError, match="sub_1 is stored already"):
            await store.subagents.add(child("sub_1", task="another task"))
        assert await store.subagents.get("sub_1") == child("sub_1")


async def test_the_first_ending_of_a_child_wins(open_store: OpenStore) -> None:
    async with open_store() as store:
        await store.subagents.add(child("sub_1"))
        assert await store.subagents.finish("sub_1", "done", result='{"total": 42}', tokens=900)
        assert not await store.subagents.finish("sub_1", "cancelled", error="too late")
        assert not await store.subagents.finish("sub_nope", "failed", error="no such child")
    async with open_store() as store:
        stored = await store.subagents.get("sub_1")
        assert stored is not None
        assert (stored.status, stored.result, stored.error, stored.tokens) == (
            "done",
            '{"total": 42}',
            None,
            900,
        )
        assert stored.finished_at is not None and stored.finished_at.startswith("20")
        assert await store.subagents.get("sub_nope") is None


async def test_tokens_only_rise_across_a_restart(open_store: OpenStore) -> None:
    async with open_store() as store:
        await store.subagents.add(child("sub_1"))
        await store.subagents.add(child("sub_2"))
        await store.subagents.record_tokens("sub_1", 1200)
        await store.subagents.record_tokens("sub_1", 800)  # an older count arriving late
        await store.subagents.record_tokens("sub_nope", 5)  # an unknown child: nothing to raise
    async with open_store() as store:
        stored = await store.subagents.get("sub_1")
        assert stored is not None and stored.tokens == 1200
        # The count at the end never lowers what was recorded meanwhile either.
        assert await store.subagents.finish("sub_1", "failed", error="over its tokens", tokens=3)
        ended = await store.subagents.get("sub_1")
        assert ended is not None and ended.tokens == 1200
        assert await store.subagents.finish("sub_2", "done", result='"ok"', tokens=70)
        other = await store.subagents.get("sub_2")
        assert other is not None and other.tokens == 70
        assert await store.subagents.get("sub_nope") is None


async def test_a_result_is_delivered_once_and_unsettled_is_what_a_restart_takes_up(
    open_store: OpenStore,
) -> None:
    async with open_store() as store:
        for subagent_id in ("sub_1", "sub_2", "sub_3", "sub_4"):
            await store.subagents.add(child(subagent_id))
        await store.subagents.finish("sub_1", "done", result='"a"')  # not yet delivered
        await store.subagents.finish("sub_2", "done", result='"b"')
        assert await store.subagents.mark_delivered("sub_2")
        assert not await store.subagents.mark_delivered("sub_2")
        assert not await store.subagents.mark_delivered("sub_nope")
        await store.subagents.finish("sub_4", "cancelled")
    async with open_store() as store:
        unsettled = await store.subagents.unsettled()
        assert [(c.id, c.status) for c in unsettled] == [
            ("sub_1", "done"),
            ("sub_3", "running"),
            ("sub_4", "cancelled"),
        ]
        delivered = await store.subagents.get("sub_2")
        assert delivered is not None and delivered.delivered


async def test_a_child_ended_from_two_places_at_once_ends_once(open_store: OpenStore) -> None:
    ids = [f"sub_{i}" for i in range(10)]
    endings: dict[str, list[SubagentStatus]] = {subagent_id: [] for subagent_id in ids}
    async with open_store() as store:
        for subagent_id in ids:
            await store.subagents.add(child(subagent_id))

        async def end(subagent_id: str, status: SubagentStatus) -> None:
            if await store.subagents.finish(subagent_id, status, result=f'"{status}"'):
                endings[subagent_id].append(status)

        async with anyio.create_task_group() as group:
            for subagent_id in ids:
                group.start_soon(end, subagent_id, "done")
                group.start_soon(end, subagent_id, "cancelled")
        for subagent_id in ids:
            stored = await store.subagents.get(subagent_id)
            assert stored is not None
            assert endings[subagent_id] == [stored.status]
            assert stored.result == f'"{stored.status}"'


async def test_two_workers_ending_and_delivering_one_child_at_once_do_it_once(
    postgres_url: str,
) -> None:
    from wakeful.store.postgres import PostgresStore

    ids = [f"sub_{i}" for i in range(30)]
    ended: dict[str, list[str]] = {subagent_id: [] for subagent_id in ids}
    delivered: dict[str, int] = dict.fromkeys(ids, 0)
    async with (
        await PostgresStore.open(postgres_url) as worker_a,
        await PostgresStore.open(postgres_url) as worker_b,
    ):
        for subagent_id in ids:
            await worker_a.subagents.add(child(subagent_id))

        async def end(store: PostgresStore, name: str, subagent_id: str) -> None:
            status: SubagentStatus = "done" if name == "a" else "cancelled"
            if await store.subagents.finish(subagent_id, status, result=f'"{name}"'):
                ended[subagent_id].append(name)

        async def deliver(store: PostgresStore, subagent_id: str) -> None:
            if await store.subagents.mark_delivered(subagent_id):
                delivered[subagent_id] += 1

        async with anyio.create_task_group() as group:
            for subagent_id in ids:
                group.start_soon(end, worker_a, "a", subagent_id)
                group.start_soon(end, worker_b, "b", subagent_id)
        async with anyio.create_task_group() as group:
            for subagent_id in ids:
                group.start_soon(deliver, worker_a, subagent_id)
                group.start_soon(deliver, worker_b, subagent_id)
        stored = {c.id: c for c in await worker_b.subagents.children("main")}
        assert await worker_a.subagents.unsettled() == []
    assert all(len(names) == 1 for names in ended.values()), ended
    assert all(count == 1 for count in delivered.values()), delivered
    for subagent_id, [name] in ended.items():
        assert stored[subagent_id].result == f'"{name}"'


# --- cases ---------------------------------------------------------------------------------------


async def test_cases_are_numbered_by_the_store_and_read_back_whole(open_store: OpenStore) -> None:
    async with open_store() as store:
        first = await store.cases.add(case("one", number=99))
        second = await store.cases.add(
            case(
                "two",
                kind="input",
                tool="",
                decision="answered",
                answer={"date": "2026-12-24", "guests": 4},
            )
        )
        third = await store.cases.add(
            case("three", decision="denied", timed_out=True, reason="no answer in 900 s")
        )
        # The number passed in is ignored: the store numbers cases in the order they come.
        assert (first.number, second.number, third.number) == (1, 2, 3)
        assert first.label == "case 1"
        assert await store.cases.get(2) == second
        assert second.answer == {"date": "2026-12-24", "guests": 4}
        stored = await store.cases.get(1)
        assert stored is not None and stored == first
        assert stored.reasons == ("send_email cannot be undone.", "第二個理由")
        assert await store.cases.get(3) == third and third.timed_out
        assert await store.cases.get(4) is None
        assert [c.number for c in await store.cases.recent()] == [3, 2, 1]
        assert [c.number for c in await store.cases.recent(1)] == [3]
        assert [c.number for c in await store.cases.recent(5, before=3)] == [2, 1]
        assert [c.number for c in await store.cases.all()] == [1, 2, 3]


async def test_cases_survive_a_restart_and_numbering_goes_on(open_store: OpenStore) -> None:
    async with open_store() as store:
        kept = await store.cases.add(case("before the restart"))
    async with open_store() as store:
        assert await store.cases.all() == [kept]
        after = await store.cases.add(case("after the restart"))
        assert after.number == 2


async def test_a_case_edited_by_hand_is_named_in_the_error(
    open_store: OpenStore, write_raw: WriteRaw
) -> None:
    async with open_store() as store:
        await store.cases.add(case("fine"))
        await store.cases.add(case("also fine"))
    await write_raw("UPDATE cases SET reasons = %s WHERE number = %s", ("not json", 1))
    async with open_store() as store:
        with pytest.raises(StoreError, match=unreadable("case 1")):
            await store.cases.all()
        assert [c.request for c in await store.cases.recent(1)] == ["also fine"]


async def test_two_workers_adding_cases_at_once_never_share_a_number(
    postgres_url: str,
) -> None:
    from wakeful.store.postgres import PostgresStore

    numbers: list[int] = []
    async with (
        await PostgresStore.open(postgres_url) as worker_a,
        await PostgresStore.open(postgres_url) as worker_b,
    ):

        async def add(store: PostgresStore, request: str) -> None:
            numbers.append((await store.cases.add(case(request))).number)

        async with anyio.create_task_group() as group:
            for i in range(20):
                group.start_soon(add, worker_a, f"a{i}")
                group.start_soon(add, worker_b, f"b{i}")
        stored = await worker_a.cases.all()
    assert sorted(numbers) == [c.number for c in stored] == list(range(1, 41))


# --- requests to a person: races between workers (the rest in test_human_requests_store.py) -----


async def test_late_answers_edited_by_hand_are_named_in_the_error(
    open_store: OpenStore, write_raw: WriteRaw
) -> None:
    async with open_store() as store:
        await store.human_requests.add(human_request("A3F9", kind="input", deadline=None))
        await store.human_requests.close("a3f9", "timed_out", "{}")
    await write_raw("UPDATE human_requests SET late = %s WHERE id = %s", ("not json", "a3f9"))
    async with open_store() as store:
        with pytest.raises(StoreError, match=unreadable("request a3f9")):
            await store.human_requests.add_late("A3F9", json.dumps("2026-12-24"))
        # Nothing changed: the row is as it was left, and the store goes on.
        stored = await store.human_requests.get("a3f9")
        assert stored is not None and stored.late == "not json"


async def test_two_workers_ending_one_request_at_once_end_it_once_and_keep_every_late_answer(
    postgres_url: str,
) -> None:
    from wakeful.store.postgres import PostgresStore

    ids = [f"{i:04x}" for i in range(20)]
    ended: dict[str, list[str]] = {request_id: [] for request_id in ids}
    async with (
        await PostgresStore.open(postgres_url) as worker_a,
        await PostgresStore.open(postgres_url) as worker_b,
    ):
        for request_id in ids:
            await worker_a.human_requests.add(human_request(request_id, deadline=None))

        async def close(store: PostgresStore, name: str, request_id: str) -> None:
            status: HumanRequestStatus = "answered" if name == "a" else "timed_out"
            if await store.human_requests.close(request_id, status, json.dumps({"by": name})):
                ended[request_id.lower()].append(name)

        async def answer_late(store: PostgresStore, request_id: str, answer: str) -> None:
            assert await store.human_requests.add_late(request_id, json.dumps(answer))

        async with anyio.create_task_group() as group:
            for request_id in ids:
                group.start_soon(close, worker_a, "a", request_id)
                group.start_soon(close, worker_b, "b", request_id.upper())
        async with anyio.create_task_group() as group:
            for request_id in ids:
                for n in range(3):
                    group.start_soon(answer_late, worker_a, request_id, f"a{n}")
                    group.start_soon(answer_late, worker_b, request_id, f"b{n}")
        stored = {r.id: r for r in await worker_b.human_requests.recent(len(ids))}
    assert all(len(names) == 1 for names in ended.values()), ended
    for request_id, [name] in ended.items():
        record = stored[request_id]
        assert json.loads(record.decision or "") == {"by": name}
        assert record.status == ("answered" if name == "a" else "timed_out")
        assert sorted(json.loads(record.late)) == ["a0", "a1", "a2", "b0", "b1", "b2"]
