"""What the XMPP channel makes of a message to the user, without a server: where it goes, its
text, what XMPP cannot carry, which receipts count, what the channel remembers of the user's
conversation, and the clear error when the channel is not connected."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import pytest

from wakeful.channels.xmpp import KIND, XmppChannelSettings, XmppUnavailable, XmppUnsendable
from wakeful.channels.xmpp.inbound import CardAnswer, ReceivedMessage
from wakeful.channels.xmpp.outbound import (
    MAX_BODY_BYTES,
    CopyReceipt,
    UserConversation,
    check_sendable,
    human_size,
    message_body,
    receipts_in,
    recipient,
)
from wakeful.core.channel import ChannelContext, Inbox, UserReach
from wakeful.core.records import OutboundMessage
from wakeful.runtime.channels import MemoryCursors
from wakeful.services import Outbox

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def settings(**overrides: Any) -> XmppChannelSettings:
    return XmppChannelSettings.model_validate(
        {
            "jid": "assistant@example.org",
            "password_env": "XMPP_PASSWORD",
            "user_jids": ["me@example.org", "me@work.example"],
            "rooms": [
                {"jid": "team@conf.example.org", "reply_in_room": True},
                {"jid": "public@conf.example.org"},
            ],
            **overrides,
        }
    )


def outbound(text: str = "hi", **fields: Any) -> OutboundMessage:
    defaults: dict[str, Any] = {
        "id": "msg_0123456789abcdef",
        "session": "main",
        "created_at": "2026-12-01T09:00:00Z",
        "urgency": "normal",
        "kind": "text",
        "text": text,
    }
    return OutboundMessage(**(defaults | fields))


def stanza(xml: str) -> ET.Element:
    return ET.fromstring(xml)


@pytest.mark.parametrize(
    ("session", "user_jid", "expected"),
    [
        ("main", None, ("me@example.org", "chat")),
        ("main", "me@work.example", ("me@work.example", "chat")),
        ("main", "gone@example.org", ("me@example.org", "chat")),  # no longer one of theirs
        ("im:team@conf.example.org", None, ("team@conf.example.org", "groupchat")),
        ("im:public@conf.example.org", None, ("me@example.org", "chat")),  # not allowed there
        ("im:bob@example.org", None, ("me@example.org", "chat")),  # never to a contact
        ("team@conf.example.org", None, ("me@example.org", "chat")),  # not the channel's session
    ],
)
def test_where_a_message_for_the_user_goes(
    session: str, user_jid: str | None, expected: tuple[str, str]
) -> None:
    assert recipient(settings(), session, user_jid) == expected


def test_with_one_session_for_all_conversations_messages_go_to_the_user() -> None:
    assert recipient(settings(sessions="one"), "im", None) == ("me@example.org", "chat")


def test_sizes_read_as_people_say_them() -> None:
    sizes = [0, 812, 14_300, 1_234_567, 48_000_000, 3_100_000_000]
    assert [human_size(size) for size in sizes] == [
        "0 B",
        "812 B",
        "14 KB",
        "1.2 MB",
        "48 MB",
        "3.1 GB",
    ]


def test_a_card_in_a_room_names_its_buttons_without_a_numbered_answer() -> None:
    card = {"title": "Deploy?", "actions": [{"id": "go", "label": "Deploy"}]}
    message = outbound("[Deploy?]", kind="card", card=card)
    assert message_body(message, answerable=False) == (
        "[Deploy?]\nButtons (press them in the web console): [Deploy]"
    )


def test_a_card_stored_under_another_schema_sends_its_text() -> None:
    message = outbound("[Old card]\nsome text", kind="card", card={"heading": "Old card"})
    assert message_body(message, answerable=True) == "[Old card]\nsome text"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("ok\x00", "U+0000 (at character 2)"),
        ("\x07bell", "U+0007 (at character 0)"),
        ("a\ufffe", "U+FFFE"),
        ("x" * (MAX_BODY_BYTES + 1), f"{MAX_BODY_BYTES + 1:,} bytes, over the {MAX_BODY_BYTES:,}"),
    ],
)
def test_text_xmpp_cannot_carry_is_refused_with_the_reason(text: str, says: str) -> None:
    with pytest.raises(XmppUnsendable, match="was not sent") as caught:
        check_sendable(text, message_id="msg_1", channel="xmpp:personal")
    assert says in str(caught.value)
    assert "msg_1" in str(caught.value)


def test_tabs_newlines_and_every_language_are_sendable() -> None:
    check_sendable("a\tb\nc\r\n日本語 🎉 é", message_id="msg_1", channel="xmpp:personal")


@pytest.mark.parametrize(
    ("xml", "expected"),
    [
        (
            "<message from='me@example.org/phone' type='chat'>"
            "<received xmlns='urn:xmpp:receipts' id='c1'/></message>",
            [CopyReceipt("c1", "delivered")],
        ),
        (
            "<message from='Me@Example.org/laptop'>"
            "<displayed xmlns='urn:xmpp:chat-markers:0' id='c2'/></message>",
            [CopyReceipt("c2", "read")],
        ),
        (
            "<message from='me@work.example/x' type='chat'>"
            "<acknowledged xmlns='urn:xmpp:chat-markers:0' id='c3'/></message>",
            [CopyReceipt("c3", "read")],
        ),
        (  # a contact
            "<message from='bob@example.org/phone' type='chat'>"
            "<displayed xmlns='urn:xmpp:chat-markers:0' id='c2'/></message>",
            [],
        ),
        (  # a stranger whose resource is the user's address
            "<message from='mallory@evil.test/me@example.org' type='chat'>"
            "<displayed xmlns='urn:xmpp:chat-markers:0' id='c2'/></message>",
            [],
        ),
        (  # an occupant of a room whose nick is the user's address
            "<message from='team@conf.example.org/me@example.org' type='groupchat'>"
            "<displayed xmlns='urn:xmpp:chat-markers:0' id='c2'/></message>",
            [],
        ),
        (  # an error bounce
            "<message from='me@example.org' type='error'>"
            "<displayed xmlns='urn:xmpp:chat-markers:0' id='c2'/></message>",
            [],
        ),
        (  # an id no copy of ours could have
            "<message from='me@example.org/phone' type='chat'>"
            f"<displayed xmlns='urn:xmpp:chat-markers:0' id='{'x' * 500}'/></message>",
            [],
        ),
    ],
)
def test_only_the_users_own_receipts_count(xml: str, expected: list[CopyReceipt]) -> None:
    assert receipts_in(stanza(xml), settings()) == expected


def user_says(text: str, at: datetime, *, sent_at: datetime | None = None) -> ReceivedMessage:
    return ReceivedMessage("me@work.example/phone", "chat", text, received_at=at, sent_at=sent_at)


def test_the_user_conversation_reads_copies_and_answers_cards_once() -> None:
    card = {
        "title": "Pay?",
        "actions": [{"id": "pay", "label": "Pay"}, {"id": "no", "label": "No"}],
    }
    conversation = UserConversation()
    conversation.sent(outbound("a", id="msg_a", session="s1"), "copy-a", T0)
    conversation.sent(
        outbound("[Pay?]", id="msg_c", session="s2", kind="card", card=card), "copy-c", T0
    )
    # Written before the card was sent (an offline message): neither an answer nor a read.
    assert conversation.user_wrote(user_says("2", T0, sent_at=T0 - timedelta(minutes=1))) == (
        None,
        [],
    )
    answer, read = conversation.user_wrote(user_says("2", T0 + timedelta(seconds=5)))
    assert answer == CardAnswer("msg_c", "no", "s2")
    assert read == ["copy-a", "copy-c"]
    assert conversation.user_wrote(user_says("2", T0 + timedelta(seconds=6))) == (None, [])
    assert conversation.jid == "me@work.example"

    kept = UserConversation.from_json(conversation.to_json())
    assert kept == conversation


def test_a_card_survives_a_restart_and_garbage_is_forgotten() -> None:
    card = {"title": "Go?", "actions": [{"id": "go", "label": "Go"}]}
    conversation = UserConversation()
    conversation.sent(outbound("[Go?]", id="msg_g", kind="card", card=card), "copy-g", T0)
    kept = UserConversation.from_json(conversation.to_json())
    answer, read = kept.user_wrote(user_says("1", T0 + timedelta(hours=20)))
    assert (answer, read) == (CardAnswer("msg_g", "go", "main"), ["copy-g"])
    assert UserConversation.from_json("{not json") == UserConversation()
    assert UserConversation.from_json('{"copies": 3}') == UserConversation()


def not_connected_channel(tmp_path: Path) -> Any:
    context = ChannelContext(
        name="xmpp:test", inbox=cast(Inbox, None), cursors=MemoryCursors(), workspace=tmp_path
    )
    return KIND.build(settings(), context)


@pytest.mark.anyio
async def test_sending_while_not_connected_is_a_clear_error_and_a_failed_delivery(
    tmp_path: Path,
) -> None:
    channel = not_connected_channel(tmp_path)
    assert isinstance(channel, UserReach)
    outbox = Outbox(deliveries={"xmpp:test": channel.send_to_user})
    message = await outbox.send("main", "Are you there?", channel="xmpp:test")
    with pytest.raises(XmppUnavailable, match="xmpp:test is not connected"):
        await channel.send_to_user(message)
    [delivery] = message.deliveries
    assert delivery.state == "failed"
    assert "XmppUnavailable: The XMPP channel xmpp:test is not connected" in (delivery.error or "")
    assert "the message was not sent" in (delivery.error or "")


@pytest.mark.anyio
async def test_xmpp_cannot_show_a_read_on_the_users_copy(tmp_path: Path) -> None:
    channel = not_connected_channel(tmp_path)
    assert await channel.show_read(outbound(), "copy-1") is False
