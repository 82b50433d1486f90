"""The delivery policy at work: it routes each message the outbox sends, keeps what is planned
for later (escalations, digests, the end of quiet hours) and carries it out while the message
stays unread, cancels it once the message is read anywhere, and reflects the read state on the
copies other channels hold.

What is planned for later lives in memory, but nothing is lost with it: at start
(:meth:`Dispatcher.run`) the plans of the unread messages younger than `max_age_hours` are made
again from their creation time, and a step whose channel already holds a copy is skipped, so a
restart neither forgets an escalation nor sends one twice.
"""

from __future__ import annotations

import heapq
import itertools
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import anyio
from anyio.abc import TaskStatus

from ..activity import UserActivity
from ..clock import Clock, SystemClock
from ..core.channel import Reach
from ..core.records import OutboundMessage
from .policy import Plan, Presence, Step, plan_delivery
from .settings import CONSOLE, DeliverySettings

if TYPE_CHECKING:
    from ..services import Outbox

__all__ = ["Dispatcher", "digest_message"]

log = logging.getLogger(__name__)

# Unread messages looked at again at start (newest first).
RECOVER_LIMIT = 1000
# How long a begun delivery may hold up the runtime's stop.
SHUTDOWN_GRACE_SECONDS = 10.0
# Steps carried out at the same time.
CONCURRENT_STEPS = 16


@dataclass(order=True)
class _Pending:
    at: datetime
    seq: int
    message_id: str = field(compare=False)
    channel: str = field(compare=False)
    reason: str = field(compare=False)


class Dispatcher:
    """Routes messages by the policy; see the module docs. `install` hooks it into an outbox;
    `run` (in the runtime's task group) carries out the plans."""

    def __init__(
        self,
        settings: DeliverySettings,
        *,
        activity: UserActivity | None = None,
        reach: Reach | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.settings = settings
        self.activity = activity or UserActivity(clock)
        self.reach = reach
        self.clock: Clock = clock or SystemClock()
        self.plans: dict[str, Plan] = {}  # the latest plan of each recent message, for `why`
        self._outbox: Outbox | None = None
        self._heap: list[_Pending] = []
        self._cancelled: set[str] = set()  # message ids whose pending steps are void
        self._seq = itertools.count()
        self._sleep: anyio.CancelScope | None = None
        self._limiter = anyio.CapacityLimiter(CONCURRENT_STEPS)
        # Reads still to reflect on other channels' copies, and the signal that one came.
        self._reads: list[tuple[list[str], str]] = []
        self._read_came = anyio.Event()

    # --- wiring ---------------------------------------------------------------------------------

    def install(self, outbox: Outbox) -> None:
        """Route `outbox`'s messages by this policy and hear of their reads."""
        self._outbox = outbox
        outbox.route = self.route
        outbox.fallback = self.fallback
        outbox.reach = self.reach
        if self.on_read not in outbox.read_listeners:
            outbox.read_listeners.append(self.on_read)

    def uninstall(self, outbox: Outbox) -> None:
        """Undo :meth:`install` (the outbox may serve another runtime next)."""
        if outbox.route == self.route:
            outbox.route = outbox.fallback = outbox.reach = None
        if self.on_read in outbox.read_listeners:
            outbox.read_listeners.remove(self.on_read)
        self._outbox = None

    def channels(self) -> list[str]:
        """Where the user can be reached now, in escalation order: the configured list less
        the channels that are not running, or the console and then every channel that can."""
        live = self.reach.reachable() if self.reach is not None else []
        if self.settings.channels is None:
            return [CONSOLE, *(c for c in live if c != CONSOLE)]
        return [c for c in self.settings.channels if c == CONSOLE or c in live]

    def presence(self) -> Presence:
        return Presence.of(
            self.activity.last_seen,
            self.activity.last_channel,
            self.clock.now(),
            self.settings.active_minutes,
        )

    def home_of(self, session: str) -> str:
        """The channel a session's conversation happens on: where its user last wrote."""
        channel = self.activity.homes.get(session, CONSOLE)
        return channel if channel in self.channels() else CONSOLE

    # --- routing (the outbox's hooks) -----------------------------------------------------------

    def route(self, message: OutboundMessage, home: str | None) -> list[str]:
        """The channels `message` goes to now; what is planned for later is kept."""
        plan = plan_delivery(
            urgency=message.urgency,
            home=home or self.home_of(message.session),
            presence=self.presence(),
            reachable=self.channels(),
            settings=self.settings,
            now=self.clock.now(),
        )
        self._remember(message.id, plan)
        for step in plan.later:
            self._schedule(message.id, step)
        return list(plan.now)

    def fallback(self, message: OutboundMessage, tried: Sequence[str]) -> str | None:
        """The next channel to try after those `tried` failed (the console last of all: it
        always keeps the message for the user to see)."""
        order = self.channels()
        rest = [c for c in order if c not in tried and c != CONSOLE]
        if rest:
            return rest[0]
        return CONSOLE if CONSOLE not in tried else None

    async def on_read(self, ids: list[str], channel: str) -> None:
        """Messages became read on `channel`: drop what is planned for them and (in the
        background) reflect it on their other copies."""
        self._cancelled.update(ids)
        self._reads.append((ids, channel))
        self._read_came.set()

    # --- running --------------------------------------------------------------------------------

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Make again the plans of unread messages, then carry out every step when due (and
        follow the messages the outbox handed over to another worker)."""
        await self.recover()
        task_status.started()
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._reflect_reads)
            if self._outbox is not None:
                # What another worker records for the messages handed over to it (a channel
                # it runs), told here as if recorded here: reads reach `on_read` too.
                tg.start_soon(self._outbox.follow_handed_over)
            while True:
                await self._wait_for_due()
                await self._fire_due()

    async def recover(self) -> int:
        """Schedule again the steps of unread messages stored before this start; return how
        many were scheduled."""
        outbox = self._outbox
        if outbox is None:
            return 0
        now = self.clock.now()
        oldest = now - timedelta(hours=self.settings.max_age_hours)
        count = 0
        for message in await outbox.messages.list(None, unread_only=True, limit=RECOVER_LIMIT):
            created = datetime.fromisoformat(message.created_at)
            if created < oldest:
                continue
            if message.id in self.plans:
                continue  # routed in this run already
            have = {d.channel for d in message.deliveries}
            # Where the user was is not stored: take it to be where the message went first (a
            # digest or a held message went nowhere yet: to the first channel that pushes).
            channels = self.channels()
            pushes = [c for c in channels if c != CONSOLE]
            home = (
                message.deliveries[0].channel
                if message.deliveries
                else (pushes[0] if pushes else CONSOLE)
            )
            plan = plan_delivery(
                urgency=message.urgency,
                home=home,
                presence=Presence(home, created),
                reachable=channels,
                settings=self.settings,
                now=created,
                created_at=created,
            )
            self._remember(message.id, plan)
            for step in plan.later:
                if step.channel not in have:
                    self._schedule(message.id, step)
                    count += 1
        return count

    def pending(self) -> list[tuple[datetime, str, str, str]]:
        """What is planned: (when, message id, channel, reason), soonest first."""
        return [
            (p.at, p.message_id, p.channel, p.reason)
            for p in sorted(self._heap)
            if p.message_id not in self._cancelled
        ]

    def _remember(self, message_id: str, plan: Plan) -> None:
        self.plans[message_id] = plan
        while len(self.plans) > RECOVER_LIMIT:
            del self.plans[next(iter(self.plans))]

    def _schedule(self, message_id: str, step: Step) -> None:
        item = _Pending(step.at, next(self._seq), message_id, step.channel, step.reason)
        heapq.heappush(self._heap, item)
        if self._heap[0] is item and self._sleep is not None:
            self._sleep.cancel()  # sleep again, until this earlier step

    async def _wait_for_due(self) -> None:
        with anyio.CancelScope() as scope:
            self._sleep = scope
            if self._heap:
                await self.clock.sleep_until(self._heap[0].at)
            else:
                await anyio.sleep_forever()
        self._sleep = None

    async def _fire_due(self) -> None:
        now = self.clock.now()
        due: list[_Pending] = []
        while self._heap and self._heap[0].at <= now:
            due.append(heapq.heappop(self._heap))
        digests: dict[str, list[str]] = {}
        # A delivery once begun is finished (within SHUTDOWN_GRACE_SECONDS) even when the runtime
        # stops meanwhile: one cut off after its "queued" record would never be sent, since a
        # restart cannot tell whether the channel took it and never sends twice.
        # Steps due together go out concurrently (a channel's round trip need not wait for
        # another's), at most CONCURRENT_STEPS at a time.
        steps = []
        for item in due:
            if item.message_id in self._cancelled:
                continue
            if item.reason == "digest":
                digests.setdefault(item.channel, []).append(item.message_id)
            else:
                steps.append(item)
        with anyio.move_on_after(SHUTDOWN_GRACE_SECONDS, shield=True):
            async with anyio.create_task_group() as tg:
                for item in steps:
                    tg.start_soon(self._limited, self._deliver_step, item)
            for channel, ids in digests.items():
                await self._deliver_digest(channel, ids)
        if not any(p.message_id not in self._cancelled for p in self._heap):
            self._cancelled.clear()

    async def _limited(
        self, deliver: Callable[[_Pending], Awaitable[None]], item: _Pending
    ) -> None:
        async with self._limiter:
            try:
                await deliver(item)
            except Exception:  # one step's failure (a store error) must not stop the others
                log.exception(
                    "the %s of %s to %s failed", item.reason, item.message_id, item.channel
                )

    async def _deliver_step(self, item: _Pending) -> None:
        outbox = self._outbox
        if outbox is None:
            return
        message = await outbox.messages.get(item.message_id)
        if message is None or message.read:
            return
        if any(d.channel == item.channel and d.state != "failed" for d in message.deliveries):
            return
        if item.channel not in self.channels():
            log.warning(
                "%s of %s skipped: the channel %s cannot reach the user now",
                item.reason,
                item.message_id,
                item.channel,
            )
            return
        await outbox.deliver(message, item.channel)

    async def _deliver_digest(self, channel: str, ids: list[str]) -> None:
        outbox = self._outbox
        if outbox is None:
            return
        messages = [m for m in [await outbox.messages.get(i) for i in ids] if m and not m.read]
        if not messages:
            return
        if len(messages) == 1:
            await outbox.deliver(messages[0], channel)
            return
        await outbox.deliver_digest(messages, channel, digest_message(messages))

    async def _reflect_reads(self) -> None:
        while True:
            await self._read_came.wait()
            self._read_came = anyio.Event()
            reads, self._reads = self._reads, []
            for ids, channel in reads:
                await self._reflect_all(ids, channel)

    async def _reflect_all(self, ids: list[str], channel: str) -> None:
        for message_id in ids:
            try:
                await self._reflect(message_id, channel)
            except Exception:  # a channel's trouble must not stop the others
                log.exception("could not show on other channels that %s was read", message_id)

    async def _reflect(self, message_id: str, read_on: str) -> None:
        outbox, reach = self._outbox, self.reach
        if outbox is None or reach is None:
            return
        message = await outbox.messages.get(message_id)
        if message is None:
            return
        for delivery in message.deliveries:
            if (
                delivery.channel == read_on
                or delivery.channel_message_id is None
                or delivery.state not in ("sent", "delivered")
                or delivery.channel not in reach.reachable()
            ):
                continue
            shown = await reach.show_read(delivery.channel, message, delivery.channel_message_id)
            if shown:
                await outbox.record_delivery(message.id, delivery.channel, "read")


def digest_message(messages: Sequence[OutboundMessage]) -> OutboundMessage:
    """One message standing for several low-urgency ones: their first lines, oldest first."""
    first = messages[0]
    lines = [f"{len(messages)} updates while you were away:"]
    lines += [f"• {m.first_line}" for m in messages]
    return first._replace(
        kind="notification",
        title="Digest",
        text="\n".join(lines),
        card=None,
        attachments=(),
        deliveries=(),
    )
