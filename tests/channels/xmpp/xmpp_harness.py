"""What the XMPP channel tests share: accounts on the test Prosody, a real Inbox over a real
store that records what it hands to sessions, the channel running in a task group, and peers
(real slixmpp clients) who write to the agent."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import anyio
import slixmpp

from servers.prosody import MUC_DOMAIN, ProsodyServer
from wakeful.agent.router import Decision
from wakeful.channels.xmpp import KIND, XmppChannel
from wakeful.core.channel import ChannelContext, ChannelHealth, ReadReceipts
from wakeful.events import DEFAULT_MAX_EVENT_BYTES, Event
from wakeful.runtime.inbox import RuntimeInbox
from wakeful.store.sqlite import Store

PASSWORD_ENV = "WAKEFUL_TEST_XMPP_PASSWORD"
AGENT = "agent@localhost"
USER = "alice@localhost"
ROOM = f"team@{MUC_DOMAIN}"
PASSWORDS = {"agent": "agent-pw", "alice": "alice-pw", "bob": "bob-pw", "carol": "carol-pw"}
PASSWORDS["mallory"] = "mallory-pw"


def add_accounts(server: ProsodyServer) -> None:
    """The agent (bob on its roster), the user alice, contacts bob and carol, and mallory."""
    for user, password in PASSWORDS.items():
        roster = ("bob@localhost",) if user == "agent" else ()
        server.add_user(user, password, roster=roster)


def channel_settings(server: ProsodyServer, **overrides: Any) -> dict[str, Any]:
    return {
        "jid": f"{AGENT}/wakeful",
        "password_env": PASSWORD_ENV,
        "host": "127.0.0.1",
        "port": server.port,
        "tls": "plain",
        "user_jids": [USER],
        "contacts": ["carol@localhost"],
        "timeout_seconds": 10,
        "min_backoff_seconds": 0.2,
        "max_backoff_seconds": 1.0,
        **overrides,
    }


@dataclass
class RecordingInbox:
    """The runtime's Inbox over a real store, recording the events it hands to sessions."""

    store: Store
    handed: list[Event] = field(default_factory=list)

    def __post_init__(self) -> None:
        async def hand(event: Event) -> Decision:
            self.handed.append(event)
            return cast(Decision, None)

        self.inbox = RuntimeInbox(
            store=self.store,
            hand=hand,
            answers_approval=lambda event: False,
            max_event_bytes=DEFAULT_MAX_EVENT_BYTES,
        )

    async def wait_for(self, count: int, *, within: float = 15) -> list[Event]:
        """The handed events once there are at least `count`."""
        with anyio.fail_after(within):
            while len(self.handed) < count:  # noqa: ASYNC110
                await anyio.sleep(0.02)
        return self.handed


@asynccontextmanager
async def opened_store(path: Path) -> AsyncIterator[Store]:
    store = await Store.open(path)
    try:
        yield store
    finally:
        await store.close()


async def wait_state(channel: XmppChannel, state: str, *, within: float = 15) -> ChannelHealth:
    with anyio.fail_after(within):
        while channel.health().state != state:  # noqa: ASYNC110
            await anyio.sleep(0.02)
    return channel.health()


@asynccontextmanager
async def running_channel(
    server: ProsodyServer,
    recorder: RecordingInbox,
    workspace: Path,
    *,
    wait_running: bool = True,
    reads: ReadReceipts | None = None,
    **overrides: Any,
) -> AsyncIterator[XmppChannel]:
    """The XMPP channel for `channel_settings(server, **overrides)`, running until the block
    ends; it reports the user's receipts to `reads`."""
    settings = KIND.settings_model.model_validate(channel_settings(server, **overrides))
    context = ChannelContext(
        name="xmpp:test",
        inbox=recorder.inbox,
        cursors=recorder.store.channel_cursors,
        workspace=workspace,
        reads=reads,
    )
    channel = KIND.build(settings, context)
    async with anyio.create_task_group() as group:
        await group.start(channel.run)
        if wait_running:
            await wait_state(channel, "running")
        yield channel
        group.cancel_scope.cancel()


@dataclass
class Peer:
    """A person's XMPP client, logged in."""

    client: Any
    received: list[Any] = field(default_factory=list)

    def say(self, to: str, text: str, **extra: Any) -> Any:
        message = self.client.make_message(mto=to, mbody=text, mtype=extra.pop("mtype", "chat"))
        for name, value in extra.items():
            message[name] = value
        message.send()
        return message

    def send_raw(self, xml: str) -> None:
        self.client.send_raw(xml)

    async def wait_received(self, count: int, *, within: float = 10) -> list[Any]:
        with anyio.fail_after(within):
            while len(self.received) < count:  # noqa: ASYNC110
                await anyio.sleep(0.02)
        return self.received

    async def join(self, room: str, nick: str, *, with_occupant: str | None = None) -> None:
        """Join `room` as `nick`; with `with_occupant`, also wait until that nick (the agent's)
        is in the room, so that what is said next reaches it."""
        muc = self.client.plugin["xep_0045"]
        await muc.join_muc_wait(room, nick, maxstanzas=0, timeout=10)
        if with_occupant is not None:
            with anyio.fail_after(10):
                while with_occupant not in muc.get_roster(room):  # noqa: ASYNC110
                    await anyio.sleep(0.02)


@asynccontextmanager
async def peer(server: ProsodyServer, user: str, resource: str = "phone") -> AsyncIterator[Peer]:
    """`user` logged in from `resource`, available, until the block ends."""
    client = slixmpp.ClientXMPP(f"{user}@localhost/{resource}", PASSWORDS[user])
    client.enable_plaintext, client.enable_starttls, client.enable_direct_tls = True, False, False
    client.register_plugin("xep_0045")
    client.plugin["feature_mechanisms"].unencrypted_plain = True
    person = Peer(client)
    started = anyio.Event()

    async def session_start(_: object) -> None:
        await client.get_roster()
        client.send_presence()
        started.set()

    client.add_event_handler("session_start", session_start)
    client.add_event_handler("message", person.received.append)
    client.connect("127.0.0.1", server.port)
    try:
        with anyio.fail_after(10):
            await started.wait()
        yield person
    finally:
        with anyio.CancelScope(shield=True), anyio.move_on_after(3):
            # Wait for what was sent to leave before closing.
            await client.disconnect(wait=1)
        client.abort()
        if client._run_out_filters is not None:
            client._run_out_filters.cancel()
