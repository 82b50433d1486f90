"""Delivery against a real Prosody: every message exactly once through bursts, offline storage,
resends, restarts of the channel and of the server; a huge message cut with the whole text
saved; room messages filtered by keyword; `send` reaches the person."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest
from xmpp_harness import (
    AGENT,
    PASSWORD_ENV,
    ROOM,
    RecordingInbox,
    opened_store,
    peer,
    running_channel,
    wait_state,
)

from servers.prosody import ProsodyServer
from wakeful.channels.xmpp import XmppUnavailable
from wakeful.core.channel import Delivery
from wakeful.errors import StoreFull
from wakeful.events import Event

# The agent's and the peers' accounts on Prosody (conftest.py).
pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("accounts")]


def texts(recorder: RecordingInbox) -> list[str]:
    return [event.content["text"] for event in recorder.handed]  # type: ignore[index]


async def test_a_burst_of_200_messages_arrives_once_each_in_order(
    prosody: ProsodyServer, tmp_path: Path
) -> None:
    async with opened_store(tmp_path / "w.db") as store:
        recorder = RecordingInbox(store)
        async with running_channel(prosody, recorder, tmp_path / "ws"):
            async with peer(prosody, "bob") as bob:
                for number in range(200):
                    bob.say(AGENT, f"message {number}")
                await recorder.wait_for(200, within=30)
            await anyio.sleep(0.3)
        assert await store.events.count() == {"pending": 200}
    assert texts(recorder) == [f"message {number}" for number in range(200)]


async def test_a_huge_message_is_cut_and_saved_whole(
    prosody: ProsodyServer, tmp_path: Path
) -> None:
    huge = "".join(f"line {number}: some text of a very long paste\n" for number in range(25_000))
    async with opened_store(tmp_path / "w.db") as store:
        recorder = RecordingInbox(store)
        async with (
            running_channel(prosody, recorder, tmp_path / "ws"),
            peer(prosody, "bob") as bob,
        ):
            bob.say(AGENT, huge)
            [event] = await recorder.wait_for(1)
    text = event.content["text"]  # type: ignore[index]
    assert len(text) < 21_000
    assert text.startswith(f"[Cut: the message has {len(huge):,} characters; the first 20,000")
    saved = Path(event.context["full_text_path"])
    assert saved.is_relative_to(tmp_path / "ws")
    assert await anyio.Path(saved).read_text(encoding="utf-8") == huge
    assert event.context["cut"] is True


async def test_messages_sent_while_the_channel_was_away_arrive_once_and_a_restart_repeats_none(
    prosody: ProsodyServer, tmp_path: Path
) -> None:
    async with opened_store(tmp_path / "w.db") as store:
        recorder = RecordingInbox(store)
        async with peer(prosody, "bob") as bob:
            bob.say(AGENT, "sent while you were away")
            await anyio.sleep(0.2)
        async with running_channel(prosody, recorder, tmp_path / "ws"):
            [offline] = await recorder.wait_for(1)
        assert "sent_at" in offline.context  # held by the server, with when it was sent
        async with running_channel(prosody, recorder, tmp_path / "ws"):
            async with peer(prosody, "bob") as bob:
                bob.say(AGENT, "after the restart")
                await recorder.wait_for(2)
            await anyio.sleep(0.3)
        assert await store.events.count() == {"pending": 2}
    assert texts(recorder) == ["sent while you were away", "after the restart"]


async def test_a_message_resent_with_the_same_origin_id_is_one_event(
    prosody: ProsodyServer, tmp_path: Path
) -> None:
    resent = (
        "<message to='agent@localhost' type='chat' id='{id}'><body>Are you there?</body>"
        "<origin-id xmlns='urn:xmpp:sid:0' id='0f9e-resend'/></message>"
    )
    async with opened_store(tmp_path / "w.db") as store:
        recorder = RecordingInbox(store)
        async with running_channel(prosody, recorder, tmp_path / "ws"):
            async with peer(prosody, "bob") as bob:
                bob.send_raw(resent.format(id="first-try"))
                bob.send_raw(resent.format(id="second-try"))
                bob.say(AGENT, "done")
                await recorder.wait_for(2)
            await anyio.sleep(0.3)
        assert await store.events.count() == {"pending": 2}
    assert texts(recorder) == ["Are you there?", "done"]


async def test_the_channel_reconnects_after_the_server_comes_back(
    prosody: ProsodyServer, tmp_path: Path
) -> None:
    async with opened_store(tmp_path / "w.db") as store:
        recorder = RecordingInbox(store)
        async with running_channel(
            prosody, recorder, tmp_path / "ws", min_backoff_seconds=1.0, max_backoff_seconds=2.0
        ) as channel:
            async with peer(prosody, "bob") as bob:
                bob.say(AGENT, "before the outage")
                await recorder.wait_for(1)
            prosody.stop()
            health = await wait_state(channel, "degraded")
            assert "127.0.0.1" in health.detail and "retrying in" in health.detail
            with pytest.raises(XmppUnavailable, match="not connected"):
                await channel.send("bob@localhost", "hello?")
            await anyio.sleep(1.5)  # a failed attempt or two while the server is down
            await anyio.to_thread.run_sync(prosody.start)
            async with peer(prosody, "bob") as bob:
                bob.say(AGENT, "while you were reconnecting")
                await recorder.wait_for(2, within=20)
            await wait_state(channel, "running")
            async with peer(prosody, "bob") as bob:
                bob.say(AGENT, "after the outage")
                await recorder.wait_for(3)
            await anyio.sleep(0.3)
        assert await store.events.count() == {"pending": 3}
    assert texts(recorder) == [
        "before the outage",
        "while you were reconnecting",
        "after the outage",
    ]


async def test_room_messages_without_a_keyword_are_stored_but_do_not_wake_the_agent(
    prosody: ProsodyServer, tmp_path: Path
) -> None:
    rooms = [{"jid": ROOM, "nick": "assistant", "keywords": ["deploy"]}]
    async with opened_store(tmp_path / "w.db") as store:
        recorder = RecordingInbox(store)
        async with running_channel(prosody, recorder, tmp_path / "ws", rooms=rooms) as channel:
            async with peer(prosody, "bob") as bob:
                await bob.join(ROOM, "bob", with_occupant="assistant")
                bob.say(ROOM, "lunch anyone?", mtype="groupchat")
                bob.say(ROOM, "The deploy failed again", mtype="groupchat")
                bob.say(ROOM, "assistant, can you look?", mtype="groupchat")
                await channel.send(ROOM, "Looking now.")
                await recorder.wait_for(2)
                await bob.wait_received(4)
            await anyio.sleep(0.3)
        assert await store.events.count() == {"pending": 2, "filtered": 1}
        [filtered] = [row.event for row in await store.events.recent() if row.status == "filtered"]
    assert filtered.content["text"] == "lunch anyone?"  # type: ignore[index]
    assert "keywords (deploy)" in filtered.context["filtered"]
    assert texts(recorder) == ["The deploy failed again", "assistant, can you look?"]
    deploy = recorder.handed[0]
    # Bob is on the agent's roster, and the room told the agent who "bob" is.
    assert (deploy.source.type, deploy.source.id) == ("contact", f"{ROOM}/bob")
    assert "Looking now." in [str(message["body"]) for message in bob.received]


async def test_send_reaches_the_person(prosody: ProsodyServer, tmp_path: Path) -> None:
    async with opened_store(tmp_path / "w.db") as store:
        recorder = RecordingInbox(store)
        async with (
            running_channel(prosody, recorder, tmp_path / "ws") as channel,
            peer(prosody, "alice") as alice,
        ):
            await channel.send("alice@localhost", "Your meeting moved to 3 pm.")
            [message] = await alice.wait_received(1)
    assert str(message["body"]) == "Your meeting moved to 3 pm."
    assert message["from"].bare == AGENT


async def test_a_refused_login_backs_off_and_says_so(
    prosody: ProsodyServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(PASSWORD_ENV, "wrong password")
    async with opened_store(tmp_path / "w.db") as store:
        recorder = RecordingInbox(store)
        async with running_channel(
            prosody, recorder, tmp_path / "ws", wait_running=False
        ) as channel:
            health = await wait_state(channel, "degraded")
    assert "refused the login of agent@localhost/wakeful" in health.detail
    assert "Retrying in 900 s, not sooner" in health.detail


async def test_a_room_rejoined_after_a_restart_gives_what_was_said_meanwhile_once(
    prosody: ProsodyServer, tmp_path: Path
) -> None:
    rooms = [{"jid": ROOM, "nick": "assistant"}]
    async with opened_store(tmp_path / "w.db") as store:
        recorder = RecordingInbox(store)
        async with peer(prosody, "bob") as bob:
            async with running_channel(prosody, recorder, tmp_path / "ws", rooms=rooms):
                await bob.join(ROOM, "bob", with_occupant="assistant")
                bob.say(ROOM, "said while you listened", mtype="groupchat")
                await recorder.wait_for(1)
            bob.say(ROOM, "said while you were away", mtype="groupchat")
            await anyio.sleep(0.3)
            async with running_channel(prosody, recorder, tmp_path / "ws", rooms=rooms):
                await recorder.wait_for(2)
                await anyio.sleep(0.5)
        assert await store.events.count() == {"pending": 2}
    assert texts(recorder) == ["said while you listened", "said while you were away"]


async def test_a_room_that_cannot_be_joined_leaves_the_rest_working(
    prosody: ProsodyServer, tmp_path: Path
) -> None:
    rooms = [{"jid": "team@nowhere.localhost", "nick": "assistant"}]
    async with opened_store(tmp_path / "w.db") as store:
        recorder = RecordingInbox(store)
        async with running_channel(
            prosody, recorder, tmp_path / "ws", rooms=rooms, timeout_seconds=1
        ) as channel:
            health = await wait_state(channel, "degraded")
            async with peer(prosody, "bob") as bob:
                bob.say(AGENT, "still there?")
                await recorder.wait_for(1)
    assert "logged in as agent@localhost/wakeful, but could not join" in health.detail
    assert "team@nowhere.localhost" in health.detail
    assert texts(recorder) == ["still there?"]


@dataclass
class FullDiskInbox:
    """An Inbox whose store refuses every write, as with a full disk."""

    async def deliver(self, event: Event, *, filtered: str | None = None) -> Delivery:
        raise StoreFull("The disk holding the store is full.")

    async def deliver_many(self, events: Sequence[tuple[Event, str | None]]) -> list[Delivery]:
        raise StoreFull("The disk holding the store is full.")


async def test_a_message_the_store_could_not_keep_comes_again_from_the_archive_once(
    prosody: ProsodyServer, tmp_path: Path
) -> None:
    async with opened_store(tmp_path / "w.db") as store:
        recorder = RecordingInbox(store)
        async with running_channel(prosody, recorder, tmp_path / "ws"):
            pass  # the first start notes where the archive is read from next time
        refusing = RecordingInbox(store)
        refusing.inbox = FullDiskInbox()  # type: ignore[assignment]
        with pytest.RaisesGroup(StoreFull, flatten_subgroups=True):
            async with (
                running_channel(prosody, refusing, tmp_path / "ws"),
                peer(prosody, "bob") as bob,
            ):
                bob.say(AGENT, "did you get this?")
                await anyio.sleep_forever()  # until the channel fails on it
        for _ in range(2):  # started again, and once more: the message comes once
            async with running_channel(prosody, recorder, tmp_path / "ws"):
                await recorder.wait_for(1)
                await anyio.sleep(0.5)
        assert await store.events.count() == {"pending": 1}
    assert texts(recorder) == ["did you get this?"]
