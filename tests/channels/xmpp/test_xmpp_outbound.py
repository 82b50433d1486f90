"""Messages to the user over XMPP, against a real Prosody with a second client as the user's
phone: the text arrives byte for byte on the user's account (or in the session's room when it
may), cards with numbered buttons whose numbered answer is a `user.action`, attachments named;
the user's receipts and read markers reach the outbox, a stranger's forged ones do not."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import anyio
import pytest
from slixmpp.xmlstream.handler import Callback
from slixmpp.xmlstream.matcher import MatchXPath
from xmpp_harness import (
    AGENT,
    ROOM,
    USER,
    Peer,
    RecordingInbox,
    opened_store,
    peer,
    running_channel,
)

from servers.prosody import ProsodyServer
from wakeful.channels.xmpp import XmppChannel, XmppUnsendable
from wakeful.core.channel import UserReach
from wakeful.core.records import MessageAttachment, OutboundMessage
from wakeful.services import Outbox

# The agent's and the peers' accounts on Prosody (conftest.py).
pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("accounts")]

RECEIPTS = "urn:xmpp:receipts"
MARKERS = "urn:xmpp:chat-markers:0"


def wired(outbox: Outbox, channel: XmppChannel) -> Outbox:
    """The outbox hands the messages it sends on the channel's name to the channel."""
    assert isinstance(channel, UserReach)
    outbox.deliveries[channel.name] = channel.send_to_user
    return outbox


def copy_id(message: OutboundMessage) -> str:
    [delivery] = message.deliveries
    assert delivery.state == "sent", delivery.error
    assert delivery.channel_message_id
    return delivery.channel_message_id


async def stored(outbox: Outbox, message_id: str) -> OutboundMessage:
    found = await outbox.messages.get(message_id)
    assert found is not None
    return found


async def until(outbox: Outbox, message_id: str, check: Callable[[OutboundMessage], bool]) -> None:
    with anyio.fail_after(10):
        while not check(await stored(outbox, message_id)):  # noqa: ASYNC110
            await anyio.sleep(0.02)


def marker(to: str, kind: str, marked: str) -> str:
    namespace = RECEIPTS if kind == "receipt" else MARKERS
    element = "received" if kind == "receipt" else kind
    return (
        f"<message to='{to}' type='chat'><{element} xmlns='{namespace}' id='{marked}'/>"
        "<store xmlns='urn:xmpp:hints'/></message>"
    )


def bodies(person: Peer) -> list[str]:
    return [str(message["body"]) for message in person.received]


# Attacks and faults first.


async def test_a_contacts_or_strangers_forged_marker_marks_nothing(
    prosody: ProsodyServer, tmp_path: Path
) -> None:
    async with opened_store(tmp_path / "w.db") as store:
        recorder, outbox = RecordingInbox(store), Outbox()
        async with (
            running_channel(prosody, recorder, tmp_path / "ws", reads=outbox) as channel,
            peer(prosody, "alice") as alice,
        ):
            message = await wired(outbox, channel).send(
                "main", "Your code is 4711.", channel="xmpp:test"
            )
            copy = copy_id(message)
            await alice.wait_received(1)
            async with (
                peer(prosody, "bob") as bob,
                peer(prosody, "mallory", resource="alice@localhost") as mallory,
            ):
                for forger in (bob, mallory):
                    for kind in ("displayed", "acknowledged", "received", "receipt"):
                        forger.send_raw(marker(f"{AGENT}/wakeful", kind, copy))
                bob.say(AGENT, "did you see my markers?")
                mallory.say(AGENT, "and mine?")
                await recorder.wait_for(2)
            # The user's own receipt comes after the forged ones, and is the only one counted.
            alice.send_raw(marker(f"{AGENT}/wakeful", "receipt", copy))
            await until(outbox, message.id, lambda m: m.deliveries[0].state == "delivered")
            await anyio.sleep(0.3)
            after = await stored(outbox, message.id)
    assert not after.read and after.deliveries[0].state == "delivered"
    assert [event.kind for event in recorder.handed] == ["im.message", "im.message"]
    assert sorted(event.source.id for event in recorder.handed) == [
        "bob@localhost",
        "mallory@localhost",
    ]


async def test_a_text_xmpp_cannot_carry_is_refused_and_the_connection_stays(
    prosody: ProsodyServer, tmp_path: Path
) -> None:
    async with opened_store(tmp_path / "w.db") as store:
        recorder, outbox = RecordingInbox(store), Outbox()
        async with (
            running_channel(prosody, recorder, tmp_path / "ws", reads=outbox) as channel,
            peer(prosody, "alice") as alice,
        ):
            wired(outbox, channel)
            coloured = await outbox.send("main", "\x1b[31mFAILED\x1b[0m", channel="xmpp:test")
            with pytest.raises(XmppUnsendable, match="U\\+001B"):
                await channel.send_to_user(coloured)
            await outbox.send("main", "The build failed.", channel="xmpp:test")
            await alice.wait_received(1)
            await anyio.sleep(0.3)
            health = channel.health()
    [delivery] = coloured.deliveries
    assert delivery.state == "failed"
    assert "holds the character U+001B (at character 0)" in (delivery.error or "")
    assert "remove the control characters" in (delivery.error or "")
    assert bodies(alice) == ["The build failed."]
    assert health.state == "running"


# What the user receives.


async def test_the_user_receives_the_text_byte_for_byte_asking_for_a_receipt(
    prosody: ProsodyServer, tmp_path: Path
) -> None:
    text = "Résumé ready 📄\n\n  indented <b>not html</b> & 'quotes'  \n\ttab\r\nend "
    async with opened_store(tmp_path / "w.db") as store:
        recorder, outbox = RecordingInbox(store), Outbox()
        async with (
            running_channel(prosody, recorder, tmp_path / "ws", reads=outbox) as channel,
            peer(prosody, "alice") as alice,
        ):
            message = await wired(outbox, channel).send("main", text, channel="xmpp:test")
            [received] = await alice.wait_received(1)
    assert str(received["body"]) == text.replace("\r\n", "\n")  # XML normalises line ends
    assert received["from"].bare == AGENT and received["type"] == "chat"
    assert received["id"] == copy_id(message)
    assert received.xml.find(f"{{{RECEIPTS}}}request") is not None
    assert received.xml.find(f"{{{MARKERS}}}markable") is not None


async def test_a_notification_has_its_title_first_and_attachments_are_named(
    prosody: ProsodyServer, tmp_path: Path
) -> None:
    files = [
        MessageAttachment(
            str(tmp_path / "ws/report.pdf"), "report.pdf", 1_234_567, "application/pdf"
        ),
        MessageAttachment(str(tmp_path / "ws/chart.png"), "chart.png", 48_213, "image/png"),
    ]
    async with opened_store(tmp_path / "w.db") as store:
        recorder, outbox = RecordingInbox(store), Outbox()
        async with (
            running_channel(prosody, recorder, tmp_path / "ws", reads=outbox) as channel,
            peer(prosody, "alice") as alice,
        ):
            wired(outbox, channel)
            await outbox.send(
                "main",
                "The quarterly report is done.",
                kind="notification",
                title="Report ready",
                attachments=files,
                channel="xmpp:test",
            )
            await alice.wait_received(1)
    assert bodies(alice) == [
        "Report ready\nThe quarterly report is done.\n\n"
        "📎 report.pdf (1.2 MB) — in the web console\n"
        "📎 chart.png (48 KB) — in the web console"
    ]


async def test_messages_of_a_room_session_go_to_the_room_only_where_allowed(
    prosody: ProsodyServer, tmp_path: Path
) -> None:
    rooms = [{"jid": ROOM, "nick": "assistant", "reply_in_room": True}]
    async with opened_store(tmp_path / "w.db") as store:
        recorder, outbox = RecordingInbox(store), Outbox()
        async with (
            running_channel(
                prosody, recorder, tmp_path / "ws", reads=outbox, rooms=rooms
            ) as channel,
            peer(prosody, "alice") as alice,
            peer(prosody, "bob") as bob,
        ):
            await bob.join(ROOM, "bob", with_occupant="assistant")
            wired(outbox, channel)
            await outbox.send(f"im:{ROOM}", "The deploy is done.", channel="xmpp:test")
            # A contact's conversation never gets a message meant for the user: the user does.
            await outbox.send(
                "im:bob@localhost", "Bob asked for the keys; allow?", channel="xmpp:test"
            )
            await alice.wait_received(1)
            await bob.wait_received(1)
            await anyio.sleep(0.3)
    [in_room] = [m for m in bob.received if str(m["body"]) == "The deploy is done."]
    assert in_room["type"] == "groupchat" and in_room["from"].bare == ROOM
    assert "Bob asked for the keys; allow?" not in bodies(bob)
    assert bodies(alice) == ["Bob asked for the keys; allow?"]


async def test_a_room_without_reply_in_room_sends_the_users_messages_to_the_user(
    prosody: ProsodyServer, tmp_path: Path
) -> None:
    rooms = [{"jid": ROOM, "nick": "assistant"}]
    async with opened_store(tmp_path / "w.db") as store:
        recorder, outbox = RecordingInbox(store), Outbox()
        async with (
            running_channel(
                prosody, recorder, tmp_path / "ws", reads=outbox, rooms=rooms
            ) as channel,
            peer(prosody, "alice") as alice,
        ):
            wired(outbox, channel)
            await outbox.send(
                f"im:{ROOM}", "Someone in the team room asked for you.", channel="xmpp:test"
            )
            [received] = await alice.wait_received(1)
    assert received["type"] == "chat"
    assert str(received["body"]) == "Someone in the team room asked for you."


async def test_a_room_the_channel_is_not_in_sends_the_users_messages_to_the_user(
    prosody: ProsodyServer, tmp_path: Path
) -> None:
    rooms = [{"jid": "team@nowhere.localhost", "nick": "assistant", "reply_in_room": True}]
    async with opened_store(tmp_path / "w.db") as store:
        recorder, outbox = RecordingInbox(store), Outbox()
        async with (
            running_channel(
                prosody, recorder, tmp_path / "ws", reads=outbox, rooms=rooms, timeout_seconds=1
            ) as channel,
            peer(prosody, "alice") as alice,
        ):
            wired(outbox, channel)
            message = await outbox.send(
                "im:team@nowhere.localhost", "The nightly job failed.", channel="xmpp:test"
            )
            [received] = await alice.wait_received(1)
    assert (received["type"], str(received["body"])) == ("chat", "The nightly job failed.")
    assert message.deliveries[0].state == "sent"


# Cards.


async def test_a_card_numbers_its_buttons_and_a_numbered_reply_presses_one_once(
    prosody: ProsodyServer, tmp_path: Path
) -> None:
    card = {
        "title": "Deploy v2.3?",
        "text": "All checks passed.",
        "fields": [{"label": "Changes", "value": "14"}],
        "actions": [{"id": "deploy", "label": "Deploy"}, {"id": "wait", "label": "Not yet"}],
    }
    async with opened_store(tmp_path / "w.db") as store:
        recorder, outbox = RecordingInbox(store), Outbox()
        async with (
            running_channel(prosody, recorder, tmp_path / "ws", reads=outbox) as channel,
            peer(prosody, "alice") as alice,
        ):
            wired(outbox, channel)
            sent = await outbox.send(
                "release", "[Deploy v2.3?]", kind="card", card=card, channel="xmpp:test"
            )
            await alice.wait_received(1)
            alice.say(AGENT, "7")  # no such button: ordinary text
            alice.say(AGENT, " 2 ")
            alice.say(AGENT, "2")  # the card is answered already: ordinary text
            await recorder.wait_for(3)
            await until(outbox, sent.id, lambda m: m.read)
    assert bodies(alice) == [
        "[Deploy v2.3?]\nAll checks passed.\nChanges: 14\n"
        "Reply with a number to choose:\n1. Deploy\n2. Not yet"
    ]
    typed, pressed, again = recorder.handed
    assert (typed.kind, typed.content, typed.session) == ("user.input", "7", "main")
    assert pressed.kind == "user.action"
    assert pressed.content == {"card_id": sent.id, "action_id": "wait", "message_id": sent.id}
    assert (pressed.session, pressed.source.type, pressed.source.id) == ("release", "user", USER)
    assert (again.kind, again.content) == ("user.input", "2")


async def test_a_card_with_a_page_says_the_page_is_in_the_web_console(
    prosody: ProsodyServer, tmp_path: Path
) -> None:
    card = {"title": "Q3 dashboard", "html": "<h1>Q3</h1><p>Revenue up 4%</p>"}
    async with opened_store(tmp_path / "w.db") as store:
        recorder, outbox = RecordingInbox(store), Outbox()
        async with (
            running_channel(prosody, recorder, tmp_path / "ws", reads=outbox) as channel,
            peer(prosody, "alice") as alice,
        ):
            wired(outbox, channel)
            await outbox.send("main", "[Q3 dashboard]", kind="card", card=card, channel="xmpp:test")
            [received] = await alice.wait_received(1)
    body = str(received["body"])
    assert body.startswith("[Q3 dashboard]\n")
    assert "open it in the web console" in body
    assert "<h1>" not in body


# Receipts and read markers.


async def test_a_receipt_marks_the_copy_delivered_and_a_displayed_marker_reads_through(
    prosody: ProsodyServer, tmp_path: Path
) -> None:
    async with opened_store(tmp_path / "w.db") as store:
        recorder, outbox = RecordingInbox(store), Outbox()
        async with (
            running_channel(prosody, recorder, tmp_path / "ws", reads=outbox) as channel,
            peer(prosody, "alice") as alice,
        ):
            wired(outbox, channel)
            first = await outbox.send("main", "The build is green.", channel="xmpp:test")
            second = await outbox.send("main", "The deploy is done.", channel="xmpp:test")
            await alice.wait_received(2)
            agent = str(alice.received[1]["from"])
            alice.send_raw(marker(agent, "receipt", copy_id(second)))
            await until(outbox, second.id, lambda m: m.deliveries[0].state == "delivered")
            assert not (await stored(outbox, first.id)).read
            alice.send_raw(marker(agent, "displayed", copy_id(second)))
            await until(outbox, first.id, lambda m: m.read)
            read = [await stored(outbox, m.id) for m in (first, second)]
            await anyio.sleep(0.3)
        assert await store.events.count() == {}
    assert [(m.read_on, m.deliveries[0].state) for m in read] == [("xmpp:test", "read")] * 2
    assert recorder.handed == []  # receipts and markers are never events for the agent


async def test_a_message_from_the_user_reads_the_copies_sent_before_it(
    prosody: ProsodyServer, tmp_path: Path
) -> None:
    async with opened_store(tmp_path / "w.db") as store:
        recorder, outbox = RecordingInbox(store), Outbox()
        async with (
            running_channel(prosody, recorder, tmp_path / "ws", reads=outbox) as channel,
            peer(prosody, "alice") as alice,
        ):
            wired(outbox, channel)
            before = await outbox.send("main", "Lunch is at noon.", channel="xmpp:test")
            await alice.wait_received(1)
            alice.say(AGENT, "Thanks!")
            await recorder.wait_for(1)
            await until(outbox, before.id, lambda m: m.read)
            after = await outbox.send("main", "You're welcome.", channel="xmpp:test")
            await alice.wait_received(2)
            await anyio.sleep(0.3)
            still = await stored(outbox, after.id)
    assert [event.content for event in recorder.handed] == ["Thanks!"]
    assert not still.read


def receipts_to(person: Peer) -> list[str]:
    """The ids of the delivery receipts `person` gets from now on."""
    got: list[str] = []
    path = "{jabber:client}message/{urn:xmpp:receipts}received"
    person.client.register_handler(
        Callback("receipts", MatchXPath(path), lambda stanza: got.append(stanza.xml[0].get("id")))
    )
    return got


def asking_for_a_receipt(message_id: str, text: str) -> str:
    return (
        f"<message to='{AGENT}' type='chat' id='{message_id}'><body>{text}</body>"
        f"<request xmlns='{RECEIPTS}'/></message>"
    )


async def test_the_users_messages_get_a_receipt_once_stored_and_a_strangers_none(
    prosody: ProsodyServer, tmp_path: Path
) -> None:
    async with opened_store(tmp_path / "w.db") as store:
        recorder = RecordingInbox(store)
        async with (
            running_channel(prosody, recorder, tmp_path / "ws"),
            peer(prosody, "alice") as alice,
            peer(prosody, "mallory") as mallory,
        ):
            to_alice, to_mallory = receipts_to(alice), receipts_to(mallory)
            mallory.send_raw(asking_for_a_receipt("m-1", "is this account alive?"))
            await recorder.wait_for(1)
            alice.send_raw(asking_for_a_receipt("a-1", "Book the train."))
            await recorder.wait_for(2)
            with anyio.fail_after(10):
                while not to_alice:  # noqa: ASYNC110
                    await anyio.sleep(0.02)
            await anyio.sleep(0.3)
    assert to_alice == ["a-1"]
    assert to_mallory == []
