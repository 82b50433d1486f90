"""Escalation timing: how close to its due time an unread urgent message reaches the next
channel, that a message read in time never escalates, and what a restart does to both.

A Runtime with a SQLite store and two channels that can reach the user (an in-process
recording channel kind, so the figures are the runtime's, not a network's). The user is at
the console; each urgent message goes there first, then to "recorder:phone" after
`escalate_after` and to "recorder:mail" after twice that, while unread. Half the messages
are read before their first escalation is due. Rows:

- live: escalations carried out while the runtime runs (lateness = when the channel got it
  minus created_at + the escalation delay);
- after a restart: the runtime is stopped before the escalations are due and started again
  after; the steps are planned again from the store (lateness from the due time, or from the
  start when the runtime was down at the due time).

    python bench/delivery_escalation.py [--quick]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import TaskStatus
from pydantic import BaseModel, ConfigDict

from report import Table, header, percentile
from wakeful.channels.registry import ChannelSpec
from wakeful.core.channel import ChannelContext, ChannelHealth
from wakeful.core.records import OutboundMessage
from wakeful.delivery.settings import DeliverySettings
from wakeful.models import ScriptedModel
from wakeful.runtime import Runtime

ESCALATE_SECONDS = 1.0
TARGET_P99_MS = 100.0

# (channel, message id) → wall-clock time it was handed over, across runtimes.
RECEIVED: dict[tuple[str, str], list[float]] = {}


class RecorderSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Recorder:
    """A channel that reaches the user by noting when each message was handed to it."""

    def __init__(self, context: ChannelContext) -> None:
        self._context = context

    @property
    def name(self) -> str:
        return self._context.name

    def health(self) -> ChannelHealth:
        return ChannelHealth("running")

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        await anyio.sleep_forever()

    async def send_to_user(self, message: OutboundMessage) -> str | None:
        RECEIVED.setdefault((self.name, message.id), []).append(time.time())
        return f"{self.name}/{message.id}"

    async def show_read(self, message: OutboundMessage, channel_message_id: str) -> bool:
        return False


@dataclass(frozen=True)
class RecorderKind:
    kind: str = "recorder"

    @property
    def settings_model(self) -> type[BaseModel]:
        return RecorderSettings

    def build(self, settings: Any, context: ChannelContext) -> Recorder:
        return Recorder(context)


def runtime(store: Path) -> Runtime:
    return Runtime(
        model=ScriptedModel([]),
        with_core_tools=False,
        with_timers=False,
        store_path=store,
        channels=[ChannelSpec("recorder", "phone"), ChannelSpec("recorder", "mail")],
        channel_kinds={"recorder": RecorderKind()},
        delivery=DeliverySettings(
            channels=("console", "recorder:phone", "recorder:mail"),
            escalate_after_minutes=ESCALATE_SECONDS / 60,
        ),
    )


async def send_batch(rt: Runtime, count: int) -> tuple[list[OutboundMessage], list[str]]:
    """`count` urgent messages over about half the escalation delay; every other one is read
    a quarter of the delay after it was sent."""
    rt.activity.touch("console")
    sent: list[OutboundMessage] = []
    read: list[str] = []
    gap = ESCALATE_SECONDS / 2 / count
    async with anyio.create_task_group() as tg:
        for i in range(count):
            message = await rt.outbox.send("main", f"alert {i}", urgency="urgent")
            sent.append(message)
            if i % 2:
                read.append(message.id)
                tg.start_soon(read_later, rt, message.id)
            await anyio.sleep(gap)
    return sent, read


async def read_later(rt: Runtime, message_id: str) -> None:
    await anyio.sleep(ESCALATE_SECONDS / 4)
    await rt.outbox.mark_read([message_id], channel="console")


def lateness(sent: list[OutboundMessage], read: list[str], floor: float = 0.0) -> list[float]:
    """Milliseconds after its due time (or after `floor`, if later) each escalation arrived."""
    out = []
    for message in sent:
        if message.id in read:
            continue
        created = datetime.fromisoformat(message.created_at).timestamp()
        for step, channel in enumerate(("recorder:phone", "recorder:mail"), start=1):
            due = max(created + step * ESCALATE_SECONDS, floor)
            for at in RECEIVED.get((channel, message.id), []):
                out.append((at - due) * 1000)
    return out


def wrong(sent: list[OutboundMessage], read: list[str]) -> tuple[int, int, int]:
    """(read messages that escalated anyway, unread ones that missed a step, duplicates)."""
    escalated_read = sum(1 for (_, mid) in RECEIVED if mid in read)
    unread = [m.id for m in sent if m.id not in read]
    missed = sum(
        1
        for mid in unread
        for ch in ("recorder:phone", "recorder:mail")
        if (ch, mid) not in RECEIVED
    )
    twice = sum(1 for times in RECEIVED.values() if len(times) > 1)
    return escalated_read, missed, twice


async def run(count: int) -> None:
    table = Table(
        [
            "escalation",
            "messages",
            "steps",
            "p50 ms late",
            "p99 ms late",
            "max ms",
            "read but sent",
            "missed",
            "twice",
        ]
    )
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "w.db"
        RECEIVED.clear()
        async with runtime(store) as rt:
            sent, read = await send_batch(rt, count)
            await anyio.sleep(2 * ESCALATE_SECONDS + 0.5)
        late = lateness(sent, read)
        table.add(
            "live",
            len(sent),
            len(late),
            percentile(late, 50),
            percentile(late, 99),
            max(late),
            *wrong(sent, read),
        )

        RECEIVED.clear()
        store = Path(tmp) / "restart.db"
        async with runtime(store) as rt:
            sent, read = await send_batch(rt, count)
        await anyio.sleep(ESCALATE_SECONDS)  # down while the first steps fall due
        restarted = time.time()
        async with runtime(store):
            await anyio.sleep(2 * ESCALATE_SECONDS + 0.5)
        late = lateness(sent, read, floor=restarted)
        table.add(
            "after a restart",
            len(sent),
            len(late),
            percentile(late, 50),
            percentile(late, 99),
            max(late),
            *wrong(sent, read),
        )

    header(
        f"Delivery policy: urgent messages escalating every {ESCALATE_SECONDS:g} s while unread "
        f"(target: p99 ≤ {TARGET_P99_MS:.0f} ms late; none read-but-sent, missed or twice)"
    )
    table.print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20 messages instead of 200")
    args = parser.parse_args()
    anyio.run(run, 20 if args.quick else 200)


if __name__ == "__main__":
    main()
