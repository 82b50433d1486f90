"""A receipt that arrives before its copy's id is recorded (a fast phone answers while the
channel's send is still returning) is applied once the id is recorded, not lost."""

from __future__ import annotations

import pytest

from wakeful.core.records import OutboundMessage
from wakeful.services import Outbox

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(("receipt", "state"), [("read", "read"), ("delivered", "delivered")])
async def test_a_receipt_before_the_copy_id_is_recorded_is_applied(
    receipt: str, state: str
) -> None:
    outbox = Outbox(route=lambda message, home: ["im"])

    async def fast_phone(message: OutboundMessage) -> str:
        copy = f"copy-of-{message.id}"
        if receipt == "read":
            assert await outbox.copy_read("im", copy, through=True) == []  # not known yet
        else:
            assert await outbox.copy_delivered("im", copy) is False
        return copy

    outbox.deliveries["im"] = fast_phone
    sent = await outbox.send("main", "Your parcel arrived.")
    [delivery] = sent.deliveries
    assert delivery.state == state
    assert sent.read is (receipt == "read")


async def test_a_receipt_for_a_copy_nobody_sent_changes_nothing() -> None:
    outbox = Outbox(route=lambda message, home: ["im"])

    async def phone(message: OutboundMessage) -> str:
        return "copy-1"

    outbox.deliveries["im"] = phone
    assert await outbox.copy_read("im", "forged-copy") == []
    sent = await outbox.send("main", "hello")
    assert [d.state for d in sent.deliveries] == ["sent"] and not sent.read
