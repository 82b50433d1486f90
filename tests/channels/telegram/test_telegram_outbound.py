"""The Telegram channel carrying messages to the user, against a loopback Bot API: which chat a
message goes to, text byte for byte and in parts, cards as inline keyboards whose presses come
back as `user.action`, attachments as photos or files within Telegram's limits, refusals said
plainly, the read reaction, and what the user does to a copy marking the stored message read
(what a contact or a stranger does never does)."""

from __future__ import annotations

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
from wakeful.channels.telegram import TelegramChannel, TelegramSendFailed
from wakeful.core.channel import UserReach
from wakeful.core.records import MessageAttachment, OutboundMessage
from wakeful.events import Event
from wakeful.services import Outbox
from wakeful.store.sqlite import Store
from wakeful.toolkits.comms.cards import Card, card_text

# The bot token the loopback Bot API knows, in its variable (conftest.py).
pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("token")]

SESSION = "main"
GROUP_ID = -100_555


def outbox_for(channel: TelegramChannel, store: Store) -> Outbox:
    """The runtime's outbox over the store, delivering through `channel` as the delivery policy
    will (by name, through UserReach)."""
    return Outbox(messages=store.messages, deliveries={channel.name: channel.send_to_user})


async def sent_copy(outbox: Outbox, session: str, text: str, **fields: Any) -> OutboundMessage:
    """Store `text` and deliver it on the Telegram channel; the stored message."""
    return await outbox.send(session, text, channel=CHANNEL, **fields)


def copy_of(message: OutboundMessage) -> str:
    [delivery] = [d for d in message.deliveries if d.channel == CHANNEL]
    assert delivery.state == "sent", delivery
    assert delivery.channel_message_id is not None
    return delivery.channel_message_id


async def wait_until_read(store: Store, message_id: str, *, seconds: float = 10) -> None:
    with anyio.fail_after(seconds):
        while True:
            stored = await store.messages.get(message_id)
            assert stored is not None
            if stored.read:
                return
            await anyio.sleep(0.02)


async def read_ids(store: Store, *messages: OutboundMessage) -> list[str]:
    found = [await store.messages.get(message.id) for message in messages]
    return [m.id for m in found if m is not None and m.read]


# --- where a message goes, and what it looks like -----------------------------------------------


async def test_text_goes_byte_for_byte_to_the_users_private_chat_and_names_its_copy(
    store: Store, tmp_path: Path
) -> None:
    text = "Done: *not bold* _nor italic_ <b>nor html</b> [x](y)\r\n  indented \u200b 🦉 €\n"
    async with bot_api() as (fake, url):
        channel = telegram_channel(url, store, tmp_path)
        assert isinstance(channel, UserReach)
        message = await sent_copy(outbox_for(channel, store), SESSION, text)
    [sent] = fake.sent
    assert sent["chat"]["id"] == USER_ID
    assert sent["text"] == text
    assert "reply_markup" not in sent
    assert "parse_mode" not in fake.calls_of("sendMessage")[0].params
    assert copy_of(message) == f"{USER_ID}:{sent['message_id']}"


async def test_a_message_of_a_chats_session_goes_to_that_chat(store: Store, tmp_path: Path) -> None:
    async with bot_api() as (fake, url):
        per_chat = telegram_channel(url, store, tmp_path)
        await sent_copy(outbox_for(per_chat, store), f"telegram:chat-{GROUP_ID}", "to the group")
        one = telegram_channel(url, store, tmp_path, sessions="one", session="telegram")
        await sent_copy(outbox_for(one, store), f"telegram:chat-{GROUP_ID}", "to me")
        other = telegram_channel(url, store, tmp_path)
        await sent_copy(outbox_for(other, store), "telegram:chat-general", "not a chat id")
    assert [(m["chat"]["id"], m["text"]) for m in fake.sent] == [
        (GROUP_ID, "to the group"),
        (USER_ID, "to me"),
        (USER_ID, "not a chat id"),
    ]


async def test_without_user_ids_the_send_fails_saying_to_set_them(
    store: Store, tmp_path: Path
) -> None:
    async with bot_api() as (fake, url):
        channel = telegram_channel(url, store, tmp_path, user_ids=[])
        stored = await sent_copy(outbox_for(channel, store), SESSION, "hello")
        with pytest.raises(TelegramSendFailed, match="set `user_ids`"):
            await channel.send_to_user(stored)
    [delivery] = stored.deliveries
    assert delivery.state == "failed"
    assert delivery.error is not None and "user_ids" in delivery.error
    assert fake.sent == []


async def test_a_long_text_goes_in_parts_and_its_copy_is_the_first(
    store: Store, tmp_path: Path
) -> None:
    text = "".join(chr(ord("a") + i % 26) for i in range(9000))
    async with bot_api() as (fake, url):
        channel = telegram_channel(url, store, tmp_path)
        message = await sent_copy(outbox_for(channel, store), SESSION, text)
    assert [len(m["text"]) for m in fake.sent] == [4096, 4096, 808]
    assert "".join(m["text"] for m in fake.sent) == text
    assert copy_of(message) == f"{USER_ID}:{fake.sent[0]['message_id']}"


async def test_a_notification_has_its_title_on_the_first_line(store: Store, tmp_path: Path) -> None:
    async with bot_api() as (fake, url):
        channel = telegram_channel(url, store, tmp_path)
        await sent_copy(
            outbox_for(channel, store),
            SESSION,
            "The nightly backup finished in 4 minutes.",
            kind="notification",
            title="Backup done",
        )
    assert fake.sent[0]["text"] == "Backup done\nThe nightly backup finished in 4 minutes."


# --- cards -------------------------------------------------------------------------------------


INVOICE = Card.model_validate(
    {
        "title": "Invoice 2026-117 is due",
        "fields": [{"label": "Amount", "value": "420 €"}],
        "actions": [
            {"id": "pay", "label": "Pay now", "style": "primary"},
            {"id": "later", "label": "Remind me tomorrow"},
        ],
    }
)


async def send_card(outbox: Outbox, card: Card, session: str = SESSION) -> OutboundMessage:
    stored = card.model_dump(exclude_none=True)
    return await sent_copy(outbox, session, card_text(card), kind="card", card=stored)


async def test_a_cards_buttons_are_an_inline_keyboard_and_a_press_is_a_user_action(
    store: Store, tmp_path: Path
) -> None:
    handed: list[Event] = []
    outbox = Outbox(messages=store.messages)
    async with bot_api() as (fake, url), anyio.create_task_group() as group:
        channel = telegram_channel(
            url, store, tmp_path, inbox=runtime_inbox(store, handed), reads=outbox
        )
        outbox.deliveries[CHANNEL] = channel.send_to_user
        card = await send_card(outbox, INVOICE)
        [sent] = fake.sent
        await group.start(channel.run)
        fake.button_press(f"{card.id}:pay", user_id=USER_ID, on=sent)
        [row] = await wait_for_events(store, 1)
        await wait_until_read(store, card.id)
        group.cancel_scope.cancel()
    assert sent["text"] == "[Invoice 2026-117 is due]\nAmount: 420 €"
    assert sent["reply_markup"] == {
        "inline_keyboard": [
            [
                {"text": "Pay now", "callback_data": f"{card.id}:pay"},
                {"text": "Remind me tomorrow", "callback_data": f"{card.id}:later"},
            ]
        ]
    }
    event = row.event
    assert (event.kind, event.source.type) == ("user.action", "user")
    assert isinstance(event.content, dict)
    # The agent sees the payload a press of the button in the web console gives.
    assert {k: event.content[k] for k in ("card_id", "action_id", "message_id")} == {
        "card_id": card.id,
        "action_id": "pay",
        "message_id": card.id,
    }
    assert event.context["message"]["message_id"] == sent["message_id"]
    assert [e.id for e in handed] == [event.id]
    assert fake.answered == [event.context["callback_query_id"]]


async def test_a_card_with_a_page_says_the_full_view_is_in_the_web_console(
    store: Store, tmp_path: Path
) -> None:
    page = INVOICE.model_copy(update={"html": "<table><tr><td>420 €</td></tr></table>"})
    async with bot_api() as (fake, url):
        channel = telegram_channel(url, store, tmp_path)
        await send_card(outbox_for(channel, store), page)
    text = fake.sent[0]["text"]
    assert text.startswith("[Invoice 2026-117 is due]\nAmount: 420 €\n")
    assert "web console" in text and "<table>" not in text
    assert len(fake.sent[0]["reply_markup"]["inline_keyboard"][0]) == 2


# --- attachments -------------------------------------------------------------------------------


def workspace_file(folder: Path, name: str, size: int, kind: str) -> MessageAttachment:
    """A file of `size` bytes (sparse: large ones cost no disk), as a message attachment."""
    path = folder / name
    with path.open("wb") as file:
        file.write(b"\x89PNG\r\n\x1a\n" if kind.startswith("image/") else b"%PDF-1.7\n")
        file.truncate(size)
    return MessageAttachment(path=str(path), name=name, size=size, type=kind)


async def test_images_go_as_photos_other_files_as_documents_and_too_large_ones_are_named(
    store: Store, tmp_path: Path
) -> None:
    chart = workspace_file(tmp_path, "chart.png", 20_000, "image/png")
    report = workspace_file(tmp_path, "report.pdf", 300_000, "application/pdf")
    drawing = workspace_file(tmp_path, "drawing.svg", 2_000, "image/svg+xml")
    scan = workspace_file(tmp_path, "scan.png", 11 * 1024 * 1024, "image/png")
    video = workspace_file(tmp_path, "meeting.mp4", 60 * 1024 * 1024, "video/mp4")
    async with bot_api() as (fake, url):
        channel = telegram_channel(url, store, tmp_path)
        message = await sent_copy(
            outbox_for(channel, store),
            SESSION,
            "Here is the month.",
            attachments=[chart, report, drawing, scan, video],
        )
    uploads = [(u["method"], u["name"], u["size"]) for u in fake.uploads]
    assert uploads == [
        ("sendPhoto", "chart.png", 20_000),
        ("sendDocument", "report.pdf", 300_000),
        ("sendDocument", "drawing.svg", 2_000),
        ("sendDocument", "scan.png", 11 * 1024 * 1024),
    ]
    text = fake.sent[0]["text"]
    assert text.startswith("Here is the month.\n[Not attached: meeting.mp4 is 60 MB, too large")
    assert str(tmp_path / "meeting.mp4") in text
    assert {u["chat_id"] for u in fake.uploads} == {USER_ID}
    assert copy_of(message) == f"{USER_ID}:{fake.sent[0]['message_id']}"


async def test_an_image_telegram_refuses_as_a_photo_goes_as_a_document(
    store: Store, tmp_path: Path
) -> None:
    panorama = workspace_file(tmp_path, "panorama.jpg", 5_000, "image/jpeg")
    async with bot_api() as (fake, url):
        channel = telegram_channel(url, store, tmp_path)
        fake.fail_next("sendPhoto", 400)
        message = await sent_copy(outbox_for(channel, store), SESSION, "", attachments=[panorama])
    assert [(u["method"], u["name"]) for u in fake.uploads] == [("sendDocument", "panorama.jpg")]
    assert copy_of(message) == f"{USER_ID}:{fake.uploads[0]['message_id']}"


# --- refusals ----------------------------------------------------------------------------------


async def test_a_refused_send_raises_saying_why_and_how_much_went(
    store: Store, tmp_path: Path
) -> None:
    report = workspace_file(tmp_path, "report.pdf", 1_000, "application/pdf")
    async with bot_api() as (fake, url):
        channel = telegram_channel(url, store, tmp_path)
        outbox = outbox_for(channel, store)
        fake.fail_next("sendMessage", 403)
        blocked = await sent_copy(outbox, SESSION, "hello")
        fake.fail_next("sendMessage", 500, after=1)
        halfway = await sent_copy(outbox, SESSION, "x" * 5000)
        fake.fail_next("sendDocument", 413)
        no_file = await sent_copy(outbox, SESSION, "see the report", attachments=[report])
        with pytest.raises(TelegramSendFailed) as caught:
            fake.fail_next("sendMessage", 403)
            await channel.send_to_user(blocked)
    errors = [m.deliveries[0].error or "" for m in (blocked, halfway, no_file)]
    assert [m.deliveries[0].state for m in (blocked, halfway, no_file)] == ["failed"] * 3
    assert "TelegramSendFailed" in errors[0]
    assert f"to chat {USER_ID}: Forbidden: bot was blocked by the user." in errors[0]
    assert "Nothing was sent." in errors[0]
    assert "1 of 2 part(s) were sent" in errors[1]
    assert "the file report.pdf" in errors[2] and "1 of 2 part(s) were sent" in errors[2]
    assert "bot was blocked by the user" in str(caught.value)
    assert FakeBotApi.token not in "".join(errors) + str(caught.value)


async def test_a_refused_token_is_a_failed_send_naming_the_variable(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOKEN_ENV, "1:revoked-token-that-the-server-refuses")
    async with bot_api() as (fake, url):
        channel = telegram_channel(url, store, tmp_path)
        stored = await sent_copy(outbox_for(channel, store), SESSION, "hello")
    error = stored.deliveries[0].error or ""
    assert TOKEN_ENV in error and "revoked-token" not in error
    assert fake.sent == []


# --- read elsewhere ----------------------------------------------------------------------------


async def test_show_read_puts_the_eyes_reaction_on_the_copy(store: Store, tmp_path: Path) -> None:
    async with bot_api() as (fake, url):
        channel = telegram_channel(url, store, tmp_path)
        message = await sent_copy(outbox_for(channel, store), SESSION, "x" * 5000)
        shown = await channel.show_read(message, copy_of(message))
        not_a_copy = await channel.show_read(message, "<abc@example.org>")
        gone = await channel.show_read(message, f"{USER_ID}:987654")
        fake.fail_next("setMessageReaction", 403)
        refused = await channel.show_read(message, copy_of(message))
    assert (shown, not_a_copy, gone, refused) == (True, False, False, False)
    assert fake.reactions == [
        {"chat_id": USER_ID, "message_id": fake.sent[0]["message_id"], "emoji": ["👀"]}
    ]


# --- read receipts from what the user does -----------------------------------------------------


async def test_a_reply_to_any_part_of_a_copy_marks_the_message_read(
    store: Store, tmp_path: Path
) -> None:
    outbox = Outbox(messages=store.messages)
    async with bot_api() as (fake, url), anyio.create_task_group() as group:
        channel = telegram_channel(url, store, tmp_path, reads=outbox)
        outbox.deliveries[CHANNEL] = channel.send_to_user
        long = await sent_copy(outbox, SESSION, "y" * 5000)
        await group.start(channel.run)
        fake.message("about this", user_id=USER_ID, reply_to=fake.sent[1])
        await wait_until_read(store, long.id)
        group.cancel_scope.cancel()
    stored = await store.messages.get(long.id)
    assert stored is not None and stored.read_on == CHANNEL
    [delivery] = stored.deliveries
    assert delivery.state == "read"


async def test_after_a_restart_a_reply_to_a_copy_still_marks_it_read(
    store: Store, tmp_path: Path
) -> None:
    outbox = Outbox(messages=store.messages)
    async with bot_api() as (fake, url):
        before = telegram_channel(url, store, tmp_path)
        outbox.deliveries[CHANNEL] = before.send_to_user
        first = await sent_copy(outbox, SESSION, "first")
        second = await sent_copy(outbox, SESSION, "second")
        async with anyio.create_task_group() as group:
            after = telegram_channel(url, store, tmp_path, reads=outbox)
            await group.start(after.run)
            fake.message("ok", user_id=USER_ID, reply_to=fake.sent[0])
            await wait_until_read(store, first.id)
            group.cancel_scope.cancel()
    # The restarted channel does not know the newest copy in the chat; the reply names one.
    assert await read_ids(store, first, second) == [first.id]


async def test_a_button_press_marks_its_card_and_the_earlier_messages_of_its_session_read(
    store: Store, tmp_path: Path
) -> None:
    outbox = Outbox(messages=store.messages)
    async with bot_api() as (fake, url), anyio.create_task_group() as group:
        channel = telegram_channel(url, store, tmp_path, reads=outbox)
        outbox.deliveries[CHANNEL] = channel.send_to_user
        earlier = await sent_copy(outbox, SESSION, "the invoice arrived")
        card = await send_card(outbox, INVOICE)
        other = await sent_copy(outbox, "other", "unrelated")
        later = await sent_copy(outbox, SESSION, "one more thing")
        await group.start(channel.run)
        fake.button_press(f"{card.id}:later", user_id=USER_ID, on=fake.sent[1])
        await wait_until_read(store, card.id)
        group.cancel_scope.cancel()
    assert await read_ids(store, earlier, card, other, later) == [earlier.id, card.id]


async def test_a_long_cards_keyboard_is_under_its_last_part_and_a_press_there_reads_it(
    store: Store, tmp_path: Path
) -> None:
    long_card = INVOICE.model_copy(
        update={"text": "t" * 4000, "items": [f"line {i}: " + "i" * 60 for i in range(40)]}
    )
    outbox = Outbox(messages=store.messages)
    async with bot_api() as (fake, url), anyio.create_task_group() as group:
        channel = telegram_channel(url, store, tmp_path, reads=outbox)
        outbox.deliveries[CHANNEL] = channel.send_to_user
        card = await send_card(outbox, long_card)
        first, last = fake.sent
        await group.start(channel.run)
        fake.button_press(f"{card.id}:pay", user_id=USER_ID, on=last)
        await wait_until_read(store, card.id)
        group.cancel_scope.cancel()
    assert "reply_markup" not in first
    assert [b["callback_data"] for b in last["reply_markup"]["inline_keyboard"][0]] == [
        f"{card.id}:pay",
        f"{card.id}:later",
    ]
    assert copy_of(card) == f"{USER_ID}:{first['message_id']}"


async def test_anything_the_user_writes_in_the_chat_marks_the_copies_sent_there_read(
    store: Store, tmp_path: Path
) -> None:
    outbox = Outbox(messages=store.messages)
    async with bot_api() as (fake, url), anyio.create_task_group() as group:
        channel = telegram_channel(url, store, tmp_path, reads=outbox)
        outbox.deliveries[CHANNEL] = channel.send_to_user
        mine = [await sent_copy(outbox, SESSION, f"note {i}") for i in range(3)]
        other = await sent_copy(outbox, "other", "from another session")
        group_copy = await sent_copy(outbox, f"telegram:chat-{GROUP_ID}", "in the group")
        await group.start(channel.run)
        fake.message("thanks", user_id=USER_ID)
        await wait_until_read(store, other.id)
        group.cancel_scope.cancel()
    everything = [*mine, other, group_copy]
    assert await read_ids(store, *everything) == [m.id for m in [*mine, other]]


async def test_a_contact_or_stranger_replying_to_a_copy_marks_nothing_read(
    store: Store, tmp_path: Path
) -> None:
    outbox = Outbox(messages=store.messages)
    group_session = f"telegram:chat-{GROUP_ID}"
    async with bot_api() as (fake, url), anyio.create_task_group() as group:
        channel = telegram_channel(url, store, tmp_path, reads=outbox)
        outbox.deliveries[CHANNEL] = channel.send_to_user
        card = await send_card(outbox, INVOICE, session=group_session)
        [sent] = fake.sent
        await group.start(channel.run)
        for person in (STRANGER_ID, CONTACT_ID):
            fake.message(
                "seen it", user_id=person, chat_id=GROUP_ID, chat_type="group", reply_to=sent
            )
            fake.button_press(f"{card.id}:pay", user_id=person, chat_id=GROUP_ID, on=sent)
        await wait_for_events(store, 4)
        unread_while_others_act = await read_ids(store, card)
        fake.message("ok", user_id=USER_ID, chat_id=GROUP_ID, chat_type="group")
        await wait_until_read(store, card.id)
        group.cancel_scope.cancel()
    assert unread_while_others_act == []
    rows = await store.events.recent(limit=10)
    kinds = sorted(row.event.kind for row in rows)
    assert kinds == ["im.action", "im.action", "im.message", "im.message", "user.input"]


async def test_a_forged_button_naming_another_card_marks_only_the_pressed_copy_and_the_channel_runs(
    store: Store, tmp_path: Path
) -> None:
    outbox = Outbox(messages=store.messages)
    async with bot_api() as (fake, url), anyio.create_task_group() as group:
        channel = telegram_channel(url, store, tmp_path, reads=outbox)
        outbox.deliveries[CHANNEL] = channel.send_to_user
        # Two sessions, so that reading one card's copy says nothing about the other.
        target = await send_card(outbox, INVOICE, session="bills")
        pressed = await send_card(outbox, INVOICE, session="chores")
        await group.start(channel.run)
        on = fake.sent[1]
        for data in (f"{target.id}:pay", "msg_:x", "msg_zz:" + "a" * 60, "::", "", "msg_\u0000:1"):
            fake.button_press(data, user_id=USER_ID, on=on)
        fake.button_press(f"{target.id}:pay", user_id=USER_ID, on={**on, "message_id": 424242})
        rows = await wait_for_events(store, 7)
        await wait_until_read(store, pressed.id)
        fake.message("still here", user_id=CONTACT_ID)
        await wait_for_events(store, 8)
        assert channel.health().state == "running"
        group.cancel_scope.cancel()
    assert await read_ids(store, target, pressed) == [pressed.id]
    forged = rows[0].event
    assert isinstance(forged.content, dict) and forged.content["card_id"] == target.id
    assert forged.context["message"]["message_id"] == on["message_id"]
    assert [row.event.kind for row in rows] == ["user.action"] * 7


async def test_without_read_receipts_the_users_messages_still_arrive(
    store: Store, tmp_path: Path
) -> None:
    async with bot_api() as (fake, url), anyio.create_task_group() as group:
        channel = telegram_channel(url, store, tmp_path)
        message = await sent_copy(outbox_for(channel, store), SESSION, "hello")
        await group.start(channel.run)
        await wait_for_state(channel, "running")
        fake.message("hi", user_id=USER_ID, reply_to=fake.sent[0])
        [row] = await wait_for_events(store, 1)
        group.cancel_scope.cancel()
    assert row.event.kind == "user.input"
    assert await read_ids(store, message) == []
