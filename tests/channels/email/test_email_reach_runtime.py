"""The email channel reaching the user inside a runtime, against a real Dovecot and an SMTP relay
into it: the agent's answer to the user's mail goes back in its thread (and never wakes the
agent when it lands in the watched mailbox), and is read when the user opens it in their mail
program."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from email_harness import PASSWORD_ENV, MailProgram, deliver, in_thread, message

from wakeful.channels.email import KIND
from wakeful.channels.registry import ChannelSpec
from wakeful.core.records import OutboundMessage
from wakeful.demo.mail_servers import DovecotServer, SmtpRelay
from wakeful.models import ScriptedModel, call, say, use
from wakeful.runtime import Runtime

pytestmark = pytest.mark.anyio

CHANNEL = "email:work"
# The user's own address: another domain, delivered by the test's mail system to the same
# mailbox the channel watches (Dovecot keeps the local part), as a forwarding would.
ME = "secretary@home.net"
PASSED = "mx.home.net; spf=pass smtp.mailfrom=home.net; dmarc=pass header.from=home.net"


@pytest.fixture(autouse=True)
def imap_password(dovecot: DovecotServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PASSWORD_ENV, dovecot.password)


@asynccontextmanager
async def running(
    dovecot: DovecotServer, relay: SmtpRelay, tmp_path: Path, model: ScriptedModel
) -> AsyncIterator[Runtime]:
    spec = ChannelSpec(
        kind="email",
        name="work",
        settings={
            "host": dovecot.host,
            "port": dovecot.port,
            "tls": "plain",
            "username": dovecot.user,
            "password_env": PASSWORD_ENV,
            "smtp_port": relay.port,
            "from_address": "secretary@example.com",
            "user_addresses": [ME],
        },
    )
    async with Runtime(
        model=model,
        with_timers=False,
        store_path=tmp_path / "wakeful.db",
        channels=[spec],
        channel_kinds={"email": KIND},
    ) as runtime:
        with anyio.fail_after(20):
            while runtime.channels[CHANNEL].state != "running":  # noqa: ASYNC110
                await anyio.sleep(0.02)
        yield runtime


async def only_message(runtime: Runtime) -> OutboundMessage | None:
    messages = await runtime.outbox.messages.list()
    assert len(messages) <= 1, messages
    return messages[0] if messages else None


@pytest.mark.slow
async def test_the_answer_to_the_users_mail_goes_back_in_its_thread_and_is_read_when_opened(
    dovecot: DovecotServer, smtp_relay: SmtpRelay, tmp_path: Path
) -> None:
    model = ScriptedModel(
        [use(call("reply_to_user", text="Booked: the 9:12 to Lyon.")), say(""), say("")]
    )
    asked = message(
        "Train to Lyon",
        sender=f"Me <{ME}>",
        text="Book me the first train to Lyon tomorrow.",
        headers={"Authentication-Results": PASSED},
        message_id="<ask-1@home.net>",
    )
    async with running(dovecot, smtp_relay, tmp_path, model) as runtime:
        await deliver(dovecot, asked)
        with anyio.fail_after(30):
            while (sent := await only_message(runtime)) is None or not any(  # noqa: ASYNC110
                d.channel == CHANNEL and d.state == "sent" for d in sent.deliveries
            ):
                await anyio.sleep(0.05)
            await runtime.wait_idle()
        copies = {d.channel: d.channel_message_id for d in sent.deliveries}
        copy_id = copies[CHANNEL]
        assert copy_id is not None
        answer = await in_thread(MailProgram(dovecot).read, copy_id)
        # The copy landed in the watched mailbox; give the channel time to see it (it must not
        # wake the agent), then the user opens it.
        await anyio.sleep(1.0)
        await runtime.wait_idle()
        unread_before = not (await runtime.outbox.messages.get(sent.id)).read  # type: ignore[union-attr]
        await in_thread(MailProgram(dovecot).open, copy_id)
        with anyio.fail_after(20):
            while not (read := await runtime.outbox.messages.get(sent.id)).read:  # type: ignore[union-attr]  # noqa: ASYNC110
                await anyio.sleep(0.05)
        assert runtime.store is not None
        events = await runtime.store.events.recent(limit=100)

    assert answer["To"] == ME and answer["From"] == "secretary@example.com"
    assert answer["Subject"] == "Re: Train to Lyon"
    assert answer["In-Reply-To"] == "<ask-1@home.net>"
    assert answer["References"] == "<ask-1@home.net>"
    assert answer.get_content() == "Booked: the 9:12 to Lyon."
    assert unread_before
    assert read.read_on == CHANNEL  # type: ignore[union-attr]
    # One mail woke the agent: the user's. Its own answer, in the same mailbox, did not.
    assert [e.event.content["subject"] for e in events] == ["Train to Lyon"]  # type: ignore[index]
    assert len(model.requests) == 2
