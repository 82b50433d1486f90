"""The Telegram channel against a loopback Bot API: who is the user (by id, never by name),
nothing delivered twice or skipped across restarts and redeliveries, failures waited out as
the server asks, and what an event carries."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from telegram_harness import (
    CHANNEL,
    CONTACT_ID,
    STRANGER_ID,
    TOKEN_ENV,
    USER_ID,
    bot_api,
    runtime_inbox,
    telegram_channel,
    wait_for_events,
    wait_for_state,
)

from servers.telegram_api import FakeBotApi
from wakeful.channels.telegram import TelegramSendFailed
from wakeful.core.channel import Delivery
from wakeful.errors import StoreError
from wakeful.events import Event, render_event
from wakeful.runtime.inbox import FilteringInbox
from wakeful.store.sqlite import Store

# The bot token the loopback Bot API knows, in its variable (conftest.py).
pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("token")]


def events_of(rows: list[Any]) -> list[Event]:
    return [row.event for row in rows]


# --- who is the user ---------------------------------------------------------------------------


async def test_the_users_id_is_user_input_and_anyone_else_is_a_contact_or_stranger(
    store: Store, tmp_path: Path
) -> None:
    handed: list[Event] = []
    async with bot_api() as (fake, url), anyio.create_task_group() as group:
        channel = telegram_channel(url, store, tmp_path, inbox=runtime_inbox(store, handed))
        await group.start(channel.run)
        fake.message("yes", user_id=USER_ID, username="me", first_name="Me")
        fake.message("lunch on Friday?", user_id=CONTACT_ID, username="alice", first_name="Alice")
        fake.message("click this link", user_id=STRANGER_ID, username="mallory")
        rows = await wait_for_events(store, 3)
        group.cancel_scope.cancel()
    mine, alices, mallorys = events_of(rows)
    assert (mine.kind, mine.source.type, mine.content) == ("user.input", "user", "yes")
    assert mine.session == f"telegram:chat-{USER_ID}"
    assert mine.context["chat"]["id"] == USER_ID
    assert render_event(mine) == "yes"
    assert (alices.kind, alices.source.type) == ("im.message", "contact")
    assert render_event(alices).startswith(f"[FROM_CONTACT telegram:{CONTACT_ID}] (im.message)")
    assert alices.content["from"] == f"Alice (@alice, id {CONTACT_ID})"  # type: ignore[index]
    assert alices.content["text"] == "lunch on Friday?"  # type: ignore[index]
    assert mallorys.source.type == "stranger"
    assert render_event(mallorys).startswith(f"[FROM_STRANGER telegram:{STRANGER_ID}]")
    assert [e.id for e in handed] == [e.id for e in events_of(rows)]


async def test_a_stranger_using_the_users_name_and_username_is_still_a_stranger(
    store: Store, tmp_path: Path
) -> None:
    async with bot_api() as (fake, url), anyio.create_task_group() as group:
        channel = telegram_channel(url, store, tmp_path)
        await group.start(channel.run)
        fake.message("It's me, wire the money", user_id=STRANGER_ID, username="me", first_name="Me")
        [row] = await wait_for_events(store, 1)
        group.cancel_scope.cancel()
    event = row.event
    assert (event.kind, event.source.type) == ("im.message", "stranger")
    assert render_event(event).startswith(f"[FROM_STRANGER telegram:{STRANGER_ID}] (im.message)")
    assert event.content["from"] == f"Me (@me, id {STRANGER_ID})"  # type: ignore[index]


# --- nothing twice, nothing skipped ------------------------------------------------------------


async def test_an_update_the_server_sends_again_after_a_restart_is_one_event(
    store: Store, tmp_path: Path
) -> None:
    async with bot_api() as (fake, url):
        first = fake.message("one", user_id=CONTACT_ID)
        fake.message("two", user_id=CONTACT_ID)
        unconfirmed = [dict(update) for update in fake.updates]
        async with anyio.create_task_group() as group:
            await group.start(telegram_channel(url, store, tmp_path).run)
            await wait_for_events(store, 2)
            group.cancel_scope.cancel()
        # The server lost the confirmation and the cursor was never written (a crash right
        # after the Inbox stored the batch): both updates come again.
        fake.updates = unconfirmed
        await store.channel_cursors.put(CHANNEL, "offset", str(first))
        counts = runtime_inbox(store)
        async with anyio.create_task_group() as group:
            await group.start(telegram_channel(url, store, tmp_path, inbox=counts).run)
            fake.message("three", user_id=CONTACT_ID)
            await wait_for_events(store, 3)
            with anyio.fail_after(5):
                while counts.counts.duplicate < 2:  # noqa: ASYNC110
                    await anyio.sleep(0.02)
            group.cancel_scope.cancel()
    rows = await store.events.recent()
    assert sorted(row.event.content["text"] for row in rows) == ["one", "three", "two"]  # type: ignore[index]
    assert counts.counts.duplicate == 2 and counts.counts.stored == 1


class StopsAfterStoring:
    """The runtime's Inbox, after which the process 'dies' (hangs until cancelled) once a
    delivery of `after` events is stored: the cursor is never advanced for that batch."""

    def __init__(self, inbox: FilteringInbox, after: int) -> None:
        self._inbox = inbox
        self._after = after
        self.stored = anyio.Event()

    async def deliver(self, event: Event, *, filtered: str | None = None) -> Delivery:
        [delivery] = await self.deliver_many([(event, filtered)])
        return delivery

    async def deliver_many(self, events: Any) -> list[Delivery]:
        deliveries = await self._inbox.deliver_many(events)
        if self._inbox.counts.stored >= self._after:
            self.stored.set()
            await anyio.sleep_forever()
        return deliveries


async def test_a_restart_in_the_middle_of_a_batch_delivers_nothing_twice_and_skips_nothing(
    store: Store, tmp_path: Path
) -> None:
    async with bot_api() as (fake, url):
        for n in range(30):
            fake.message(f"m{n}", user_id=CONTACT_ID)
        dying = StopsAfterStoring(runtime_inbox(store), after=1)
        async with anyio.create_task_group() as group:
            await group.start(telegram_channel(url, store, tmp_path, inbox=dying).run)  # type: ignore[arg-type]
            with anyio.fail_after(10):
                await dying.stored.wait()
            group.cancel_scope.cancel()  # killed between storing the batch and the cursor
        assert await store.channel_cursors.get(CHANNEL, "offset") is None
        async with anyio.create_task_group() as group:
            await group.start(telegram_channel(url, store, tmp_path).run)
            for n in range(30, 40):
                fake.message(f"m{n}", user_id=CONTACT_ID)
            await wait_for_events(store, 40)
            await anyio.sleep(0.2)  # any late duplicate would be stored by now
            group.cancel_scope.cancel()
    rows = await store.events.recent(limit=100)
    texts = [row.event.content["text"] for row in sorted(rows, key=lambda r: r.rowid)]  # type: ignore[index]
    assert texts == [f"m{n}" for n in range(40)]


async def test_a_burst_of_500_updates_is_delivered_each_exactly_once_in_order(
    store: Store, tmp_path: Path
) -> None:
    async with bot_api() as (fake, url), anyio.create_task_group() as group:
        await group.start(telegram_channel(url, store, tmp_path).run)
        for n in range(500):
            fake.message(f"burst {n}", user_id=STRANGER_ID)
        await wait_for_events(store, 500, seconds=30)
        await anyio.sleep(0.2)
        group.cancel_scope.cancel()
    rows = sorted(await store.events.recent(limit=1000), key=lambda r: r.rowid)
    assert [row.event.content["text"] for row in rows] == [f"burst {n}" for n in range(500)]  # type: ignore[index]
    assert len({row.event.id for row in rows}) == 500
    assert await store.channel_cursors.get(CHANNEL, "offset") == str(fake.next_update_id)


# --- failures ----------------------------------------------------------------------------------


async def test_flood_control_is_obeyed_for_the_time_it_asks(store: Store, tmp_path: Path) -> None:
    async with bot_api() as (fake, url), anyio.create_task_group() as group:
        fake.fail_next("getUpdates", 429, retry_after=1)
        channel = telegram_channel(url, store, tmp_path)
        await group.start(channel.run)
        detail = await wait_for_state(channel, "degraded")
        assert "flood control" in detail and "1.0 s" in detail
        fake.message("after the pause", user_id=CONTACT_ID)
        await wait_for_events(store, 1)
        group.cancel_scope.cancel()
    polls = fake.calls_of("getUpdates")
    assert polls[1].at - polls[0].at >= 0.95


async def test_a_bad_token_backs_off_long_and_health_says_the_token_is_wrong(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wrong = "654321:WRONG-token-that-the-server-refuses-xx"
    monkeypatch.setenv(TOKEN_ENV, wrong)
    async with bot_api() as (fake, url), anyio.create_task_group() as group:
        channel = telegram_channel(url, store, tmp_path, auth_failure_backoff_seconds=600)
        await group.start(channel.run)
        detail = await wait_for_state(channel, "degraded")
        await anyio.sleep(0.5)
        group.cancel_scope.cancel()
    assert "refused the bot token" in detail and TOKEN_ENV in detail
    assert "10 minutes" in detail
    assert wrong not in detail
    assert len(fake.calls) == 1  # one getMe, then a long wait: never hammered


async def test_server_errors_are_retried_with_backoff_and_nothing_is_lost(
    store: Store, tmp_path: Path
) -> None:
    async with bot_api() as (fake, url), anyio.create_task_group() as group:
        fake.message("before", user_id=CONTACT_ID)
        fake.fail_next("getUpdates", 500, times=3)
        channel = telegram_channel(url, store, tmp_path)
        await group.start(channel.run)
        await wait_for_events(store, 1)
        assert channel.health().state == "running"
        group.cancel_scope.cancel()
    assert len(fake.calls_of("getUpdates")) >= 4


async def test_a_missing_token_variable_is_refused_when_the_channel_starts(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from wakeful.errors import ConfigError

    monkeypatch.delenv(TOKEN_ENV)
    channel = telegram_channel("http://127.0.0.1:9", store, tmp_path)
    with pytest.raises(ConfigError, match=f"environment variable {TOKEN_ENV}, which is not set"):
        await channel.run()


# --- what an event carries ---------------------------------------------------------------------


async def test_a_huge_text_is_cut_in_the_event_and_saved_whole(
    store: Store, tmp_path: Path
) -> None:
    text = "word " * 40_000
    async with bot_api() as (fake, url), anyio.create_task_group() as group:
        await group.start(telegram_channel(url, store, tmp_path, max_text_chars=1000).run)
        fake.message(text, user_id=STRANGER_ID)
        [row] = await wait_for_events(store, 1)
        group.cancel_scope.cancel()
    content = row.event.content
    assert isinstance(content, dict)
    assert len(content["text"]) < 1000 + 300  # the cut text and a line saying where the rest is
    assert "200,000 characters" in content["text"]
    saved = anyio.Path(content["text_path"])
    assert await saved.read_text(encoding="utf-8") == text
    assert saved.is_relative_to(tmp_path)


async def test_reply_chat_and_attachments_are_in_the_payload_and_files_are_not_fetched(
    store: Store, tmp_path: Path
) -> None:
    async with bot_api() as (fake, url), anyio.create_task_group() as group:
        await group.start(telegram_channel(url, store, tmp_path).run)
        fake.message(
            "",
            user_id=CONTACT_ID,
            chat_id=-100,
            chat_type="group",
            chat_title="Team",
            reply_to={
                "message_id": 5,
                "date": 0,
                "chat": {"id": -100, "type": "group", "title": "Team"},
                "from": {"id": USER_ID, "is_bot": False, "first_name": "Me"},
                "text": "Who has the invoice?",
            },
            extra={
                "caption": "here it is",
                "document": {
                    "file_id": "DOC1",
                    "file_unique_id": "u1",
                    "file_name": "invoice.pdf",
                    "mime_type": "application/pdf",
                    "file_size": 48_213,
                },
            },
        )
        [row] = await wait_for_events(store, 1)
        group.cancel_scope.cancel()
    content = row.event.content
    assert isinstance(content, dict)
    assert content["chat"] == {"id": -100, "type": "group", "title": "Team"}
    assert content["text"] == "here it is"
    assert content["reply_to"]["text"] == "Who has the invoice?"
    assert content["attachments"] == [
        {
            "type": "document",
            "file_id": "DOC1",
            "name": "invoice.pdf",
            "size": 48_213,
            "mime": "application/pdf",
        }
    ]
    assert row.event.session == "telegram:chat--100"
    assert {call.method for call in fake.calls} == {"getMe", "getUpdates"}


async def test_a_button_press_by_the_user_is_a_user_action_and_is_answered(
    store: Store, tmp_path: Path
) -> None:
    async with bot_api() as (fake, url), anyio.create_task_group() as group:
        await group.start(telegram_channel(url, store, tmp_path).run)
        fake.button_press("send_report:yes", user_id=USER_ID)
        fake.button_press("send_report:yes", user_id=STRANGER_ID)
        mine, theirs = await wait_for_events(store, 2)
        with anyio.fail_after(5):
            while len(fake.answered) < 2:  # noqa: ASYNC110
                await anyio.sleep(0.02)
        group.cancel_scope.cancel()
    assert (mine.event.kind, mine.event.source.type) == ("user.action", "user")
    assert mine.event.content["action"] == "send_report:yes"  # type: ignore[index]
    assert mine.event.content["message"]["text"] == "Send the report now?"  # type: ignore[index]
    assert (theirs.event.kind, theirs.event.source.type) == ("im.action", "stranger")


async def test_messages_in_a_chat_not_listed_are_stored_filtered_and_never_handed_over(
    store: Store, tmp_path: Path
) -> None:
    handed: list[Event] = []
    inbox = runtime_inbox(store, handed)
    async with bot_api() as (fake, url), anyio.create_task_group() as group:
        channel = telegram_channel(url, store, tmp_path, inbox=inbox, chats=[USER_ID])
        await group.start(channel.run)
        fake.message("spam", user_id=STRANGER_ID, chat_id=-500, chat_type="group", chat_title="X")
        fake.message("hello", user_id=USER_ID)
        rows = await wait_for_events(store, 2)
        group.cancel_scope.cancel()
    assert [row.status for row in rows] == ["filtered", "pending"]
    assert rows[0].event.context["filtered"] == "chat -500 is not in the channel's chats"
    assert [event.content for event in handed] == ["hello"]


async def test_send_delivers_a_message_in_parts_within_telegrams_limit(
    store: Store, tmp_path: Path
) -> None:
    async with bot_api() as (fake, url):
        channel = telegram_channel(url, store, tmp_path)
        ids = await channel.send(USER_ID, "a" * 5000)
    assert [len(m["text"]) for m in fake.sent] == [4096, 904]
    assert ids == [m["message_id"] for m in fake.sent]
    assert {m["chat"]["id"] for m in fake.sent} == {USER_ID}


async def test_the_token_never_reaches_the_logs(
    store: Store, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with bot_api() as (fake, url), anyio.create_task_group() as group:
        fake.fail_next("getUpdates", 500)
        await group.start(telegram_channel(url, store, tmp_path).run)
        fake.message("hi", user_id=CONTACT_ID)
        await wait_for_events(store, 1)
        group.cancel_scope.cancel()
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "/bot<token>/getUpdates" in logged  # httpx logs each request's URL, redacted
    assert FakeBotApi.token not in logged


async def test_a_second_reader_of_the_same_bot_is_named_in_health(
    store: Store, tmp_path: Path
) -> None:
    async with bot_api() as (fake, url), anyio.create_task_group() as group:
        fake.fail_next("getUpdates", 409, times=2)
        channel = telegram_channel(url, store, tmp_path, max_backoff_seconds=0.5)
        await group.start(channel.run)
        detail = await wait_for_state(channel, "degraded")
        fake.message("once it is free", user_id=CONTACT_ID)
        await wait_for_events(store, 1)
        group.cancel_scope.cancel()
    assert "Another program is reading this bot's updates" in detail
    assert "deleteWebhook" in detail


@pytest.mark.slow
async def test_kill_9_between_receipt_and_processing_loses_and_repeats_nothing(
    tmp_path: Path,
) -> None:
    state, workspace = tmp_path / "state.db", tmp_path / "ws"
    script = Path(__file__).with_name("run_telegram_channel.py")
    expected: list[str] = []

    def stored_texts() -> list[str]:
        try:
            with Store.read_only(state) as reader:
                rows = reader.recent_events(limit=10_000)
        except StoreError:  # not created yet, or its schema not yet written
            return []
        return [row.event.content["text"] for row in sorted(rows, key=lambda r: r.rowid)]  # type: ignore[index]

    def send_some(fake: FakeBotApi, count: int) -> None:
        for _ in range(count):
            expected.append(f"update {len(expected):03}")
            fake.message(expected[-1], user_id=STRANGER_ID)

    async with bot_api() as (fake, url):
        command = [sys.executable, str(script), str(state), str(workspace), url]
        send_some(fake, 40)
        for kill_after in (1, 45, 70):
            process = await anyio.open_process(command, stdout=None, stderr=None)
            try:
                send_some(fake, 15)
                with anyio.fail_after(30):
                    while len(stored_texts()) < kill_after:  # noqa: ASYNC110 - another process
                        await anyio.sleep(0.01)
            finally:
                process.kill()  # kill -9: no cleanup, whatever it was doing
                await process.wait()
        process = await anyio.open_process(command, stdout=None, stderr=None)
        try:
            with anyio.fail_after(30):
                while len(stored_texts()) < len(expected):  # noqa: ASYNC110 - another process
                    await anyio.sleep(0.05)
            await anyio.sleep(1)  # time for a stray second copy to show up, were there one
        finally:
            process.kill()
            await process.wait()
    assert stored_texts() == expected


async def test_send_waits_out_a_short_flood_pause_and_says_why_it_failed_otherwise(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with bot_api() as (fake, url):
        channel = telegram_channel(url, store, tmp_path)
        fake.fail_next("sendMessage", 429, retry_after=1)
        [sent] = await channel.send(USER_ID, "after the pause")
        fake.fail_next("sendMessage", 429, retry_after=3600)
        with pytest.raises(TelegramSendFailed, match="flood control refuses messages"):
            await channel.send(USER_ID, "too soon")
        monkeypatch.setenv(TOKEN_ENV, "1:revoked-token-that-the-server-refuses")
        refused = telegram_channel(url, store, tmp_path)
        with pytest.raises(TelegramSendFailed) as caught:
            await refused.send(USER_ID, "hello")
    assert [m["text"] for m in fake.sent] == ["after the pause"]
    assert sent == fake.sent[0]["message_id"]
    assert TOKEN_ENV in str(caught.value) and "revoked-token" not in str(caught.value)
