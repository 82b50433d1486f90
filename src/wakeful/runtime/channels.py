"""The channels a runtime runs: those of its settings (wakeful.toml) and those the agent connects
while it runs, each supervised in the runtime's task group.

A channel whose `run` raises is rebuilt and restarted after a backoff (1 s, doubling, at most
5 minutes), and its health says why in the meantime: one channel's crash never ends the
runtime nor the other channels. A channel whose `run` returns (its source ended) stays
stopped. Channels the agent connected are stored (with a store) and reconnected on the next
start; disconnecting one forgets it and its cursors.

Several workers sharing a PostgreSQL store (a cluster, issue 17) each run every configured
channel, except those that pull from their source (a kind with ``pulls = True``: email over
IMAP, Telegram's getUpdates, an XMPP login): such a channel runs on one worker at a time, the
one holding its role "channel:<full name>" (:class:`~wakeful.core.channel.RoleLeases`, on
PostgreSQL :mod:`wakeful.store.postgres.roles`), so a mailbox is polled once, a bot's updates
are fetched without 409 Conflicts, and only the holder writes the channel's cursors. The other
workers keep it in standby (health "standby: run by worker w2 (lease expires in 4 s)") and try
to take the role every third of the lease time. The holder renews the role every third of the
lease; when a renewal fails, takes longer than that, or finds the role taken, the channel's run
is cancelled at once (before the lease could have run out by the worker's own clock) and it goes
back to standby; its cursor writes are refused once that clock says the lease may have run out
(a worker resumed after a freeze), and, on PostgreSQL, by the store itself in each write's own
transaction once the lease expired or moved (:class:`~wakeful.core.channel.RoleFencedCursors`).
So when the holder dies, another worker runs the channel within about the lease time
(`[store] lease_seconds`); a clean stop or a disconnect releases the role and another worker
takes it at its next attempt. Webhooks (pushed to: a request may reach
any worker), timers and the system channel run on every worker.

A message for the user on a channel in standby is handed over to the worker running it, and
that worker sends what is handed over to it (:mod:`wakeful.runtime.handoffs`): while another
worker holds the role (at the last look), :meth:`RuntimeChannels.reachable` counts the channel
and :meth:`RuntimeChannels.send_to_user` (a digest: :meth:`RuntimeChannels.send_digest_to_user`)
hands the message over and raises :class:`~wakeful.core.channel.HandedOver`, which the outbox
takes as "left queued". A read to show on the holder's copy (:meth:`RuntimeChannels.show_read`)
and an IM notice to a collaborator (:meth:`RuntimeChannels.send`) are handed over too. A channel
whose role no live worker holds is not reachable: the delivery policy picks the next channel.

Without role leases (SQLite, one process) every channel runs, as always.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

import anyio
from anyio.abc import TaskGroup, TaskStatus
from pydantic import BaseModel, SecretStr

from ..channels.filters import ChannelFilter
from ..channels.registry import ChannelSpec, channel_kind, validated_filter, validated_settings
from ..core.channel import (
    Channel,
    ChannelContext,
    ChannelHealth,
    ChannelKind,
    HandedOver,
    ReadReceipts,
    RoleFencedCursors,
    RoleLease,
    RoleLeases,
    RoleLost,
    UserReach,
    kind_pulls,
)
from ..core.records import OutboundMessage
from ..core.repositories import ChannelCursorRepository
from ..errors import StoreError, UserError
from .handoffs import digest_handoffs, notice_handoff, read_handoff, send_handed_over
from .inbox import ChannelCounts, FilteringInbox, RuntimeInbox

if TYPE_CHECKING:
    from ..core.runtime_store import RuntimeStore
    from ..services import Services

__all__ = [
    "ChannelInfo",
    "MemoryCursors",
    "RoleLost",
    "RuntimeChannelContext",
    "RuntimeChannels",
    "check_specs",
]

log = logging.getLogger(__name__)

RESTART_FIRST_SECONDS: Final = 1.0
RESTART_MAX_SECONDS: Final = 300.0
# How long a stopping channel may take to release its role before the stop goes on (the role
# then expires after the lease time).
RELEASE_TIMEOUT_SECONDS: Final = 5.0
Origin = Literal["configured", "connected"]


def check_specs(
    specs: Iterable[ChannelSpec], kinds: Mapping[str, ChannelKind] | None = None
) -> None:
    """Refuse, before anything starts, a channel whose kind is unknown, whose settings or
    filter are invalid (UserError naming where it was declared and the field), or whose name
    another channel of its kind has."""
    names: set[str] = set()
    for spec in specs:
        kind = spec.kind_in(kinds)
        validated_settings(kind, spec.settings, spec.where)
        validated_filter(spec.filter, spec.where)
        if spec.full_name in names:
            raise UserError(
                f"Two channels are named {spec.full_name}: give each [[channels.<kind>]] table "
                "of a kind its own `name`."
            )
        names.add(spec.full_name)


class MemoryCursors:
    """Cursors kept in memory, for a runtime without a store (lost when it stops)."""

    def __init__(self) -> None:
        self._values: dict[tuple[str, str], str] = {}

    async def get(self, channel: str, key: str) -> str | None:
        return self._values.get((channel, key))

    async def put(self, channel: str, key: str, value: str) -> None:
        self._values[(channel, key)] = value

    async def put_many(self, channel: str, values: Mapping[str, str]) -> None:
        for key, value in values.items():
            self._values[(channel, key)] = value

    async def forget(self, channel: str) -> None:
        for key in [k for k in self._values if k[0] == channel]:
            del self._values[key]


@dataclass
class _RoleTerm:
    """A pulling channel's role as this worker holds it: the lease (None while it holds none)
    and until when, by the monotonic clock, it surely holds it (the start of its last successful
    take or renewal plus the lease time)."""

    role: str
    lease: RoleLease | None = None
    until: float = -math.inf

    def hold(self, lease: RoleLease, since: float, lease_seconds: float) -> None:
        self.lease = lease
        self.until = since + lease_seconds

    def drop(self) -> RoleLease | None:
        lease, self.lease, self.until = self.lease, None, -math.inf
        return lease


class _HolderCursors:
    """A pulling channel's cursors: written only while this worker holds the channel's role,
    so that a worker resumed after a freeze does not write over the new holder's cursors. The
    worker's own clock refuses a write once the lease may have run out; a store that can
    (PostgreSQL's, :class:`RoleFencedCursors`) also checks the lease in the write's
    transaction, which no clock of the worker can get wrong."""

    def __init__(self, cursors: ChannelCursorRepository, term: _RoleTerm) -> None:
        self._cursors = cursors
        self._term = term

    async def get(self, channel: str, key: str) -> str | None:
        return await self._cursors.get(channel, key)

    async def put(self, channel: str, key: str, value: str) -> None:
        await self._held(channel).put(channel, key, value)

    async def put_many(self, channel: str, values: Mapping[str, str]) -> None:
        await self._held(channel).put_many(channel, values)

    async def forget(self, channel: str) -> None:
        await self._cursors.forget(channel)

    def _held(self, channel: str) -> ChannelCursorRepository:
        lease = self._term.lease
        if lease is not None and time.monotonic() < self._term.until:
            if isinstance(self._cursors, RoleFencedCursors):
                return self._cursors.held_by(lease)
            return self._cursors
        raise RoleLost(
            f"This worker may no longer hold the role {self._term.role!r} (its lease was "
            f"not renewed in time), so the cursor of {channel} was not written. The channel "
            "waits in standby while another worker runs it."
        )


@dataclass(frozen=True)
class RuntimeChannelContext(ChannelContext):
    """A channel's context with the runtime's services, for kinds that watch the runtime
    itself (the system channel: background tasks, the user's activity)."""

    services: Services | None = None


@dataclass(frozen=True)
class ChannelInfo:
    """What `list_channels` and `Runtime.channels` report about one channel."""

    name: str
    kind: str
    origin: Origin
    health: ChannelHealth
    filter: ChannelFilter
    counts: ChannelCounts
    restarts: int

    def to_dict(self) -> dict[str, Any]:
        health = self.health
        return {
            "name": self.name,
            "kind": self.kind,
            "origin": self.origin,
            "state": health.state,
            "detail": health.detail,
            "last_event_at": health.last_event_at.isoformat() if health.last_event_at else None,
            "filter": self.filter.model_dump(exclude_defaults=True),
            "stored": self.counts.stored,
            "filtered": self.counts.filtered,
            "duplicates": self.counts.duplicate,
            "restarts": self.restarts,
        }


@dataclass
class _Running:
    """One supervised channel."""

    spec: ChannelSpec
    kind: ChannelKind
    settings: Any
    inbox: FilteringInbox
    context: ChannelContext
    origin: Origin
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    channel: Channel | None = None
    failure: str | None = None
    restarts: int = 0
    ended: bool = False
    # Whether its channels can carry messages to the user (UserReach), known from the first build.
    reaches_user: bool = False
    # Set for a channel that pulls, run on the worker holding its role; `standby` says why it is
    # not running here while another worker (or nobody yet) holds it, and `held_elsewhere`
    # whether another worker held the role at the last look (messages are handed to it).
    term: _RoleTerm | None = None
    standby: str | None = None
    held_elsewhere: bool = False
    # The worker that held the role at the last look, if another one did.
    holder: str | None = None

    def health(self) -> ChannelHealth:
        last = self.inbox.counts.last_event_at
        if self.standby is not None:
            return ChannelHealth("standby", self.standby, last)
        if self.failure is not None:
            return ChannelHealth("degraded", self.failure, last)
        if self.ended:
            return ChannelHealth("stopped", "its source ended", last)
        if self.channel is None:
            return ChannelHealth("starting", "", last)
        health = self.channel.health()
        if health.last_event_at is None and last is not None:
            return ChannelHealth(health.state, health.detail, last)
        return health


class RuntimeChannels:
    """The runtime's channels by full name ("email:work"); see the module docs."""

    def __init__(
        self,
        *,
        tg: TaskGroup,
        inbox: RuntimeInbox,
        store: RuntimeStore | None,
        workspace: Path,
        kinds: Mapping[str, ChannelKind] | None = None,
        services: Services | None = None,
        reads: ReadReceipts | None = None,
        restart_first_seconds: float = RESTART_FIRST_SECONDS,
        roles: RoleLeases | None = None,
    ) -> None:
        """`roles`, for a worker of a cluster: a channel whose kind pulls runs only while this
        worker holds its role (see the module docs); None runs every channel here."""
        if roles is not None and not roles.lease_seconds > 0:
            raise UserError(
                f"The role leases' lease_seconds must be more than 0, got {roles.lease_seconds}; "
                "give the cluster a positive lease time ([store] lease_seconds)."
            )
        self._roles = roles
        self._tg = tg
        self._inbox = inbox
        self._store = store
        self._workspace = workspace
        self._kinds = dict(kinds or {})
        self._restart_first = restart_first_seconds
        self._services = services
        self._reads = reads
        self._cursors: ChannelCursorRepository = (
            store.channel_cursors if store is not None else MemoryCursors()
        )
        self._running: dict[str, _Running] = {}
        self._lock = anyio.Lock()

    def kind(self, name: str) -> ChannelKind:
        """The channel kind called `name` (UnknownChannelKind names the kinds there are)."""
        return channel_kind(name, self._kinds)

    async def start(self, specs: Iterable[ChannelSpec]) -> None:
        """Validate every configured channel first (one bad table starts none; see
        :func:`check_specs`), then start them, then reconnect those the agent connected in an
        earlier run."""
        specs = list(specs)
        check_specs(specs, self._kinds)
        prepared = [self._prepare(spec, "configured") for spec in specs]
        for running in prepared:
            await self._start(running)
        if self._store is None:
            return
        for stored in await self._store.connected_channels.all():
            spec = ChannelSpec(
                stored.kind,
                stored.name,
                stored.settings,
                stored.filter,
                origin=f"the channel {stored.kind}:{stored.name} connected earlier",
            )
            if spec.full_name in self._running:
                continue  # the configuration now declares it: that one wins
            try:
                await self._start(self._prepare(spec, "connected"))
            except UserError as exc:
                # Its kind or settings changed since: keep it stored, say why it is not running.
                log.error("channel %s was not reconnected: %s", spec.full_name, exc)

    async def connect(self, spec: ChannelSpec) -> ChannelInfo:
        """Start a channel now and, with a store, keep it for the next start."""
        async with self._lock:
            if spec.full_name in self._running:
                raise UserError(
                    f"A channel {spec.full_name} is already connected. Choose another name, or "
                    f"disconnect it first."
                )
            running = self._prepare(spec, "connected")
            if self._store is not None:
                await self._store.connected_channels.save(
                    spec.name,
                    spec.kind,
                    _as_given(spec.settings),
                    running.inbox.filter.model_dump(mode="json", exclude_defaults=True),
                )
            await self._start(running)
            return self._info(running)

    async def disconnect(self, full_name: str) -> bool:
        """Stop a channel and forget it (and its cursors, for one the agent connected); False
        when there is none of that name. A configured channel stops until the next start."""
        async with self._lock:
            running = self._running.pop(full_name, None)
            if running is None:
                return False
            running.scope.cancel()
            if self._store is not None and running.origin == "connected":
                await self._store.connected_channels.remove(running.spec.name)
                await self._store.channel_cursors.forget(full_name)
            return True

    def infos(self) -> list[ChannelInfo]:
        return [self._info(r) for r in self._running.values()]

    def health(self) -> dict[str, ChannelHealth]:
        return {name: r.health() for name, r in self._running.items()}

    def stop_all(self) -> None:
        for running in self._running.values():
            running.scope.cancel()

    # --- reaching the user (wakeful.delivery.dispatcher.Reach) ---------------------------------

    def reachable(self) -> list[str]:
        """The channels that can carry messages to the user, as configured in order: those
        running here, and those in standby whose role another worker holds (a message is handed
        over to it: see the module docs)."""
        return [name for name, running in self._running.items() if _reaches_now(running)]

    async def send_to_user(self, channel: str, message: OutboundMessage) -> str | None:
        """Deliver `message` on `channel` (see UserReach); UserError when it cannot, and
        HandedOver once it was handed to the worker running the channel."""
        running = self._running.get(channel)
        if running is not None and _handed_over_there(running):
            term = running.term
            assert term is not None  # only channels run by role stand by
            await self._holding_roles().hand_over(term.role, message.id)
            raise HandedOver(
                f"The channel {channel} runs on another worker ({running.standby}); message "
                f"{message.id} was handed over to it, which sends it."
            )
        return await self._reach(channel).send_to_user(message)

    async def send_digest_to_user(
        self, channel: str, digest: OutboundMessage, parts: Sequence[str]
    ) -> str | None:
        """Deliver `digest`, standing for the stored messages `parts`, on `channel` (see
        :meth:`send_to_user`). Handed over as those ids: the worker running the channel sends
        the digest of those still "queued" there and records each (a digest of more than
        :data:`~wakeful.runtime.handoffs.HANDOFF_DIGEST_PARTS` messages goes as several)."""
        running = self._running.get(channel)
        if running is not None and _handed_over_there(running):
            term = running.term
            assert term is not None  # only channels run by role stand by
            for name in digest_handoffs(parts):
                await self._holding_roles().hand_over(term.role, name)
            raise HandedOver(
                f"The channel {channel} runs on another worker ({running.standby}); the digest "
                f"of {len(parts)} messages was handed over to it, which sends it."
            )
        return await self._reach(channel).send_to_user(digest)

    async def show_read(self, channel: str, message: OutboundMessage, copy_id: str) -> bool:
        """Reflect on `channel`'s copy that `message` was read elsewhere; False if it cannot
        here. A channel another worker runs is asked to (a hand-over): False here, and that
        worker shows it on the copy and records the delivery "read"."""
        running = self._running.get(channel)
        if running is not None and _handed_over_there(running) and running.term is not None:
            await self._holding_roles().hand_over(running.term.role, read_handoff(message.id))
            return False
        if running is None or not isinstance(running.channel, UserReach):
            return False
        return await running.channel.show_read(message, copy_id)

    async def send(self, to: str, text: str) -> None:
        """Send an instant message to `to` over the first running XMPP channel (the
        collaboration tools' send_im_notification, to approvers). With none running here but
        one run by another worker, hand the notice over to that worker, which sends it, and
        raise HandedOver (saying so); UserError when no worker runs one."""
        ims = [r for r in self._running.values() if r.spec.kind == "xmpp"]
        for running in ims:
            send = getattr(running.channel, "send", None)
            if send is not None and running.health().state == "running":
                await send(to, text)
                return
        for running in ims:
            if _handed_over_there(running) and running.term is not None:
                name = notice_handoff(to, text, running.spec.full_name)
                await self._holding_roles().hand_over(running.term.role, name)
                raise HandedOver(
                    f"Handed over to the worker running {running.spec.full_name} "
                    f"({running.holder}), which sends it to {to} over IM."
                )
        raise UserError(
            "No XMPP channel is running, so no instant message can be sent: configure "
            "[[channels.xmpp]] (or check `wakeful doctor` for why it is not running)."
        )

    def _reach(self, channel: str) -> UserReach:
        running = self._running.get(channel)
        if running is None:
            raise UserError(
                f"No channel {channel} is running, so the message was not sent there; the "
                f"running channels are: {', '.join(self._running) or 'none'}."
            )
        if running.standby is not None:
            raise UserError(
                f"The channel {channel} does not run on this worker ({running.standby}), so the "
                "message was not sent there; send it on a channel this worker runs (reachable())."
            )
        if not isinstance(running.channel, UserReach):
            raise UserError(
                f"The channel {channel} cannot carry messages to the user (it only receives)."
            )
        return running.channel

    def _info(self, running: _Running) -> ChannelInfo:
        return ChannelInfo(
            running.spec.full_name,
            running.spec.kind,
            running.origin,
            running.health(),
            running.inbox.filter,
            running.inbox.counts,
            running.restarts,
        )

    def _prepare(self, spec: ChannelSpec, origin: Origin) -> _Running:
        kind = spec.kind_in(self._kinds)
        settings = validated_settings(kind, spec.settings, spec.where)
        channel_filter = validated_filter(spec.filter, spec.where)
        inbox = FilteringInbox(self._inbox, channel_filter)
        term = _RoleTerm(f"channel:{spec.full_name}") if self._runs_by_role(kind) else None
        cursors = self._cursors if term is None else _HolderCursors(self._cursors, term)
        context = RuntimeChannelContext(
            spec.full_name,
            inbox,
            cursors,
            self._workspace,
            reads=self._reads,
            services=self._services,
        )
        # Built once now, so what only building finds (a secret's variable not set) is refused
        # to the caller, and never becomes a channel that crashes and restarts for good.
        built = kind.build(settings, context)
        return _Running(
            spec,
            kind,
            settings,
            inbox,
            context,
            origin,
            reaches_user=isinstance(built, UserReach),
            term=term,
        )

    def _runs_by_role(self, kind: ChannelKind) -> bool:
        return self._roles is not None and kind_pulls(kind)

    async def _start(self, running: _Running) -> None:
        self._running[running.spec.full_name] = running
        await self._tg.start(self._supervise, running, name=f"channel {running.spec.full_name}")

    async def _supervise(
        self, running: _Running, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Run the channel (while this worker holds its role, for one that pulls in a cluster),
        rebuilding and restarting it after a crash; report started once the first attempt is
        running, has failed, or waits in standby (connect never waits on a backoff)."""
        report = _Reporter(task_status)
        with running.scope:
            if running.term is None:
                await self._run_restarting(running, report)
            else:
                await self._run_while_held(running, running.term, report)

    async def _run_restarting(self, running: _Running, report: Callable[[], None]) -> None:
        """Run the channel until its source ends, restarting it after each crash."""
        delay = self._restart_first
        while True:
            try:
                async with anyio.create_task_group() as tg:
                    channel = running.kind.build(running.settings, running.context)
                    running.channel = channel
                    await tg.start(channel.run)
                    running.failure = None
                    delay = self._restart_first
                    report()
            except Exception as exc:  # a channel's crash is reported, never propagated
                if running.term is not None and isinstance(_unwrapped(exc), RoleLost):
                    # The store refused a cursor write: the role moved or expired. Not a crash:
                    # the channel goes back to standby (its caller takes the role again).
                    _lose_role(running, running.term, "a cursor write found it taken or expired")
                    return
                running.restarts += 1
                running.failure = (
                    f"crashed ({_described(exc)}); restarting in {delay:g} s "
                    f"(restart {running.restarts})"
                )
                log.error("channel %s %s", running.spec.full_name, running.failure)
                report()
                await anyio.sleep(delay)
                delay = min(delay * 2, RESTART_MAX_SECONDS)
                continue
            running.ended = True
            report()
            log.info("channel %s stopped: its source ended", running.spec.full_name)
            return

    async def _run_while_held(
        self, running: _Running, term: _RoleTerm, report: Callable[[], None]
    ) -> None:
        """Wait in standby until this worker takes the channel's role, run the channel while it
        holds it, and wait again when it loses it; release the role when the channel stops."""
        while not running.ended:
            await self._take_role(running, term, report)
            try:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._keep_role, running, term, tg.cancel_scope)
                    if running.reaches_user and self._services is not None:
                        tg.start_soon(
                            send_handed_over,
                            running,
                            self._holding_roles(),
                            term.role,
                            self._services,
                        )
                    await self._run_restarting(running, report)
                    tg.cancel_scope.cancel()  # the source ended, or a write found the role lost
            finally:
                await self._release_role(running, term)

    async def _take_role(
        self, running: _Running, term: _RoleTerm, report: Callable[[], None]
    ) -> None:
        """Try to take the role every third of the lease time until it is taken, saying in the
        channel's health who runs it meanwhile."""
        roles = self._holding_roles()
        every = roles.lease_seconds / 3
        while True:
            since = time.monotonic()
            lease: RoleLease | None = None
            with anyio.move_on_after(every):
                try:
                    lease = await roles.take(term.role)
                    if lease is None:
                        await self._stand_by(running, term.role, every)
                except StoreError as exc:
                    running.held_elsewhere = False
                    running.standby = (
                        f"standby: the role could not be taken ({exc}); trying again in "
                        f"{every:.1f} s"
                    )
            if lease is not None:
                term.hold(lease, since, roles.lease_seconds)
                running.standby = None
                running.held_elsewhere = False
                log.info("channel %s runs here: this worker took its role", term.role)
                return
            running.channel = None
            report()
            await anyio.sleep(every)

    async def _stand_by(self, running: _Running, role: str, every: float) -> None:
        """Say in the channel's health who runs it, and note whether another worker does (then
        messages for the channel are handed over to it)."""
        holder = await self._holding_roles().holder(role)
        running.held_elsewhere = holder is not None
        running.holder = holder.owner if holder is not None else None
        if holder is None:
            running.standby = f"standby: the role is being taken; trying again in {every:.1f} s"
            return
        running.standby = (
            f"standby: run by worker {holder.owner} (lease expires in "
            f"{max(holder.expires_in_s, 0):.0f} s)"
        )

    async def _keep_role(self, running: _Running, term: _RoleTerm, run: anyio.CancelScope) -> None:
        """Renew the role every third of the lease time; when a renewal fails, takes longer
        than that, or finds the role lost, cancel the channel's `run` at once (while the lease
        still holds by this worker's clock) and put the channel in standby."""
        roles = self._holding_roles()
        every = roles.lease_seconds / 3
        while True:
            await anyio.sleep(every)
            since = time.monotonic()
            lease = term.lease
            assert lease is not None  # held while the channel runs
            renewed: RoleLease | None = None
            why = f"its renewal took longer than {every:.1f} s"
            with anyio.move_on_after(every):
                try:
                    renewed = await roles.renew(lease)
                    why = "another worker took it, or it expired"
                except StoreError as exc:
                    why = f"its renewal failed: {exc}"
            if renewed is not None:
                term.hold(renewed, since, roles.lease_seconds)
                continue
            _lose_role(running, term, why)
            run.cancel()
            return

    async def _release_role(self, running: _Running, term: _RoleTerm) -> None:
        """Give the role up, if still held, so another worker takes it at once (shielded: a
        stopping runtime releases it too)."""
        lease = term.drop()
        if lease is None:
            return
        with anyio.CancelScope(shield=True), anyio.move_on_after(RELEASE_TIMEOUT_SECONDS):
            try:
                await self._holding_roles().release(lease)
            except StoreError as exc:
                log.warning(
                    "channel %s could not release its role (%s); another worker takes it once "
                    "its lease expires",
                    running.spec.full_name,
                    exc,
                )

    def _holding_roles(self) -> RoleLeases:
        assert self._roles is not None, "only channels run by role have a term"
        return self._roles


class _Reporter:
    """Reports a supervised channel started, once."""

    def __init__(self, task_status: TaskStatus[None]) -> None:
        self._task_status = task_status
        self._done = False

    def __call__(self) -> None:
        if not self._done:
            self._done = True
            self._task_status.started()


def _reaches_now(running: _Running) -> bool:
    """Whether a message for this channel can go out now: it runs here, or is handed over."""
    if not running.reaches_user:
        return False
    return _handed_over_there(running) or (
        isinstance(running.channel, UserReach) and running.health().state == "running"
    )


def _handed_over_there(running: _Running) -> bool:
    """Whether the channel stands by here while another worker runs it."""
    return running.standby is not None and running.held_elsewhere


def _lose_role(running: _Running, term: _RoleTerm, why: str) -> None:
    """Note that this worker lost the channel's role (`why`): it stands by from now on."""
    term.drop()
    running.standby = f"standby: this worker lost the role ({why})"
    running.failure = None
    log.warning("channel %s stopped here: %s", running.spec.full_name, running.standby)


def _unwrapped(exc: BaseException) -> BaseException:
    """The exception inside a task group's wrapping of one."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def _described(exc: BaseException) -> str:
    """One line for an exception, looking through the task group's wrapping."""
    exc = _unwrapped(exc)
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _as_given(settings: Mapping[str, Any] | BaseModel) -> dict[str, Any]:
    """The settings as the caller gave them, to store: a model's secrets are kept readable
    (a masked "**********" could not reconnect). Kinds take secrets by the name of an
    environment variable, so the store holds no password."""
    if not isinstance(settings, BaseModel):
        return dict(settings)
    return {
        key: value.get_secret_value() if isinstance(value, SecretStr) else value
        for key, value in settings.model_dump().items()
    }
