"""Group delivery: overlapping deliveries reach the runtime's Inbox in one `deliver_many`, a
lone one at once; one event the store refuses costs only its own delivery."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import anyio
import pytest
from webhook_fixtures import runtime_inbox

from wakeful.channels.webhooks.batching import GroupDelivery
from wakeful.core.channel import Delivery
from wakeful.events import Event, InvalidEvent, Source
from wakeful.runtime.inbox import RuntimeInbox
from wakeful.store.sqlite import Store

pytestmark = pytest.mark.anyio


class CountingInbox(RuntimeInbox):
    """The runtime's Inbox, noting the size of each burst it is handed."""

    bursts: list[int]

    async def deliver_many(self, events: Sequence[tuple[Event, str | None]]) -> list[Delivery]:
        self.bursts.append(len(events))
        return await super().deliver_many(events)


def order(n: int, text: str = "") -> Event:
    return Event(
        id=f"ev_order_{n}",
        kind="webhook.received",
        source=Source(type="contact", id="orders"),
        content={"order": n, "text": text},
    )


async def test_overlapping_deliveries_share_a_write_and_a_lone_one_goes_at_once(
    tmp_path: Path,
) -> None:
    async with await Store.open(tmp_path / "s.db") as store:
        inbox, handed = runtime_inbox(store, CountingInbox)
        assert isinstance(inbox, CountingInbox)
        inbox.bursts = []
        group = GroupDelivery(inbox)
        assert await group.deliver(order(0)) == "stored"
        outcomes: dict[int, Delivery] = {}

        async def deliver(n: int) -> None:
            outcomes[n] = await group.deliver(order(n % 20 + 1))  # 20 twice: redeliveries

        async with anyio.create_task_group() as tg:
            for n in range(40):
                tg.start_soon(deliver, n)
        assert inbox.bursts[0] == 1  # the lone first one
        assert sum(inbox.bursts) == 41 and len(inbox.bursts) < 10
        assert sorted(outcomes.values()) == ["duplicate"] * 20 + ["stored"] * 20
        assert len(handed.events) == 21 and len(await store.events.recent(limit=100)) == 21


async def test_an_event_too_large_to_store_fails_alone(tmp_path: Path) -> None:
    async with await Store.open(tmp_path / "s.db") as store:
        inbox, _ = runtime_inbox(store, max_event_bytes=4096)
        group = GroupDelivery(inbox)
        results: dict[int, Delivery | str] = {}

        async def deliver(n: int) -> None:
            try:
                results[n] = await group.deliver(order(n, "x" * (10_000 if n == 3 else 10)))
            except InvalidEvent:
                results[n] = "refused"

        async with anyio.create_task_group() as tg:
            for n in range(6):
                tg.start_soon(deliver, n)
        assert results == {n: "refused" if n == 3 else "stored" for n in range(6)}
        assert len(await store.events.recent()) == 5
