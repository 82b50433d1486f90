"""A receipt on a digest's copy (a reply, a read marker, a delivery receipt) counts for every
message the digest stands for, whatever their sessions: also when it arrives before the copy's
id is recorded, or while the parts are being recorded one after the other."""

from __future__ import annotations

import pytest

from wakeful.core.records import OutboundMessage
from wakeful.delivery.dispatcher import digest_message
from wakeful.services import Outbox

pytestmark = pytest.mark.anyio

COPY = "chat:7"


async def three_waiting(outbox: Outbox) -> list[OutboundMessage]:
    """Three low messages of two sessions, stored and sent nowhere yet (waiting for a digest)."""
    return [
        await outbox.send(session, text, urgency="low")
        for session, text in (
            ("mail", "Newsletter filed."),
            ("main", "Calendar synced."),
            ("mail", "Two spam mails deleted."),
        )
    ]


def quiet_outbox() -> tuple[Outbox, list[tuple[list[str], str]]]:
    """An outbox whose policy plans nothing now, and what its read listeners heard."""
    outbox = Outbox(route=lambda message, home: [])
    heard: list[tuple[list[str], str]] = []

    async def on_read(ids: list[str], channel: str) -> None:
        heard.append((ids, channel))

    outbox.read_listeners.append(on_read)
    return outbox, heard


async def states(outbox: Outbox, messages: list[OutboundMessage]) -> list[tuple[bool, str]]:
    found = [await outbox.messages.get(m.id) for m in messages]
    return [(m.read, m.deliveries[-1].state) for m in found if m is not None]


@pytest.mark.parametrize("through", [False, True])
async def test_a_read_on_a_digests_copy_reads_every_message_it_stands_for(through: bool) -> None:
    outbox, heard = quiet_outbox()

    async def phone(message: OutboundMessage) -> str:
        return COPY

    outbox.deliveries["im"] = phone
    parts = await three_waiting(outbox)
    assert await outbox.deliver_digest(parts, "im", digest_message(parts))

    ids = [m.id for m in parts]
    assert sorted(await outbox.copy_read("im", COPY, through=through)) == sorted(ids)
    assert await states(outbox, parts) == [(True, "read")] * 3
    assert sorted(i for got, _ in heard for i in got) == sorted(ids)
    assert {channel for _, channel in heard} == {"im"}
    assert await outbox.copy_read("im", COPY, through=through) == []  # read already


async def test_a_delivery_receipt_on_a_digests_copy_counts_for_every_part() -> None:
    outbox, _ = quiet_outbox()

    async def phone(message: OutboundMessage) -> str:
        return COPY

    outbox.deliveries["im"] = phone
    parts = await three_waiting(outbox)
    assert await outbox.deliver_digest(parts, "im", digest_message(parts))
    assert await outbox.copy_delivered("im", COPY)
    assert await states(outbox, parts) == [(False, "delivered")] * 3


@pytest.mark.parametrize(
    ("receipt", "expected"),
    [
        ("read", (True, "read")),
        ("read through", (True, "read")),
        ("delivered", (False, "delivered")),
    ],
)
async def test_a_receipt_before_a_digests_copy_id_is_recorded_counts_for_every_part(
    receipt: str, expected: tuple[bool, str]
) -> None:
    outbox, heard = quiet_outbox()

    async def fast_phone(message: OutboundMessage) -> str:
        # The user's device answers while the send is still returning: not known yet.
        if receipt == "delivered":
            assert await outbox.copy_delivered("im", COPY) is False
        else:
            assert await outbox.copy_read("im", COPY, through=receipt == "read through") == []
        return COPY

    outbox.deliveries["im"] = fast_phone
    parts = await three_waiting(outbox)
    assert await outbox.deliver_digest(parts, "im", digest_message(parts))
    assert await states(outbox, parts) == [expected] * 3
    if receipt != "delivered":
        assert sorted(i for got, _ in heard for i in got) == sorted(m.id for m in parts)


async def test_a_read_while_a_digests_parts_are_being_recorded_reads_them_all() -> None:
    outbox, heard = quiet_outbox()

    async def phone(message: OutboundMessage) -> str:
        return COPY

    read_midway: list[list[str]] = []

    async def on_delivery(message: OutboundMessage) -> None:
        # The receipt comes in right after the first part is recorded "sent" with the copy's
        # id, before the other two are.
        sent = [d for d in message.deliveries if d.channel == "im" and d.state == "sent"]
        if sent and not read_midway:
            read_midway.append(await outbox.copy_read("im", COPY))

    outbox.deliveries["im"] = phone
    parts = await three_waiting(outbox)
    outbox.delivery_listeners.append(on_delivery)
    assert await outbox.deliver_digest(parts, "im", digest_message(parts))
    assert read_midway == [[parts[0].id]]
    assert await states(outbox, parts) == [(True, "read")] * 3
    assert sorted(i for got, _ in heard for i in got) == sorted(m.id for m in parts)
