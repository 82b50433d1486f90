"""The outbox follows the messages it handed over to another worker (a channel that worker runs):
its listeners hear what that worker records in the shared store (sent with the copy's id, read
on the copy, failed) as if recorded here, each once, and it stops following once the delivery
there is settled."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import anyio
import pytest

from wakeful.core.channel import HandedOver
from wakeful.core.records import OutboundMessage
from wakeful.delivery import handed_over
from wakeful.services import Outbox

pytestmark = pytest.mark.anyio

FAR = "im:far"


class RunElsewhere:
    """The runtime's channels as a worker sees them where `FAR` runs on another worker: every
    message for it is handed over (a Reach, as RuntimeChannels is one)."""

    def reachable(self) -> list[str]:
        return [FAR]

    async def send_to_user(self, channel: str, message: OutboundMessage) -> str | None:
        raise HandedOver(f"{channel} runs on another worker; {message.id} was handed over.")

    async def send_digest_to_user(
        self, channel: str, digest: OutboundMessage, parts: Sequence[str]
    ) -> str | None:
        raise HandedOver(f"{channel} runs on another worker; the digest was handed over.")

    async def show_read(self, channel: str, message: OutboundMessage, copy_id: str) -> bool:
        return False


class Heard:
    def __init__(self, outbox: Outbox) -> None:
        self.deliveries: list[tuple[str, str, str | None]] = []
        self.reads: list[tuple[list[str], str]] = []
        outbox.delivery_listeners.append(self.on_deliveries)
        outbox.read_listeners.append(self.on_read)

    async def on_deliveries(self, message: OutboundMessage) -> None:
        self.deliveries += [(d.channel, d.state, d.channel_message_id) for d in message.deliveries]

    async def on_read(self, ids: list[str], channel: str) -> None:
        self.reads.append((ids, channel))


@asynccontextmanager
async def following(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[Outbox, Heard]]:
    monkeypatch.setattr(handed_over, "HANDED_OVER_POLL_SECONDS", 0.01)
    monkeypatch.setattr(handed_over, "HANDED_OVER_SENT_POLL_SECONDS", 0.02)
    outbox = Outbox(reach=RunElsewhere())
    heard = Heard(outbox)
    async with anyio.create_task_group() as tg:
        tg.start_soon(outbox.follow_handed_over)
        yield outbox, heard
        tg.cancel_scope.cancel()


async def settle() -> None:
    await anyio.sleep(0.1)  # several looks


async def test_what_the_other_worker_records_is_told_here_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with following(monkeypatch) as (outbox, heard):
        message = await outbox.send("s", "Your flight moved.", channel=FAR)
        assert [(d.channel, d.state) for d in message.deliveries] == [(FAR, "queued")]
        # The other worker writes to the shared store, not through this outbox.
        await outbox.messages.record_delivery(message.id, FAR, "sent", channel_message_id="c1")
        await settle()
        assert heard.deliveries == [(FAR, "sent", "c1")]
        await outbox.messages.mark_read([message.id], channel=FAR)  # the user read the copy
        await settle()
        assert heard.reads == [([message.id], FAR)]
        assert heard.deliveries == [(FAR, "sent", "c1"), (FAR, "read", "c1")]
        # Settled: a later change there is not followed any more.
        await outbox.messages.record_delivery(message.id, FAR, "failed", error="late")
        await settle()
        assert heard.deliveries == [(FAR, "sent", "c1"), (FAR, "read", "c1")]


async def test_a_message_read_here_is_not_told_read_again_and_a_failure_there_is(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with following(monkeypatch) as (outbox, heard):
        message = await outbox.send("s", "Hi.", channel=FAR)
        assert await outbox.mark_read([message.id]) == [message.id]  # read in the console
        assert heard.reads == [([message.id], "console")]
        await settle()
        await outbox.messages.record_delivery(message.id, FAR, "failed", error="blocked")
        await settle()
        assert heard.reads == [([message.id], "console")]
        assert heard.deliveries[-1] == (FAR, "failed", None)


async def test_a_handed_over_digest_is_followed_part_by_part(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from wakeful.delivery.dispatcher import digest_message

    async with following(monkeypatch) as (outbox, heard):
        parts = [await outbox.send("s", f"Update {n}", channel="console") for n in (1, 2)]
        assert await outbox.deliver_digest(parts, FAR, digest_message(parts))
        for part in parts:
            stored = await outbox.messages.get(part.id)
            assert stored is not None
            assert [(d.channel, d.state) for d in stored.deliveries] == [
                ("console", "queued"),
                (FAR, "queued"),
            ]
        for part in parts:
            await outbox.messages.record_delivery(part.id, FAR, "sent", channel_message_id="d1")
        await settle()
        assert heard.deliveries.count((FAR, "sent", "d1")) == 2
