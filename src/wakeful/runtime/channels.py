"""The channels a runtime runs: those of its settings (wakeful.toml) and those the agent connects
while it runs, each supervised in the runtime's task group.

A channel whose `run` raises is rebuilt and restarted after a backoff (1 s, doubling, at most
5 minutes), and its health says why in the meantime: one channel's crash never ends the
runtime nor the other channels. A channel whose `run` returns (its source ended) stays
stopped. Channels the agent connected are stored (with a store) and reconnected on the next
start; disconnecting one forgets it and its cursors.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
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
    ReadReceipts,
    UserReach,
)
from ..core.records import OutboundMessage
from ..core.repositories import ChannelCursorRepository
from ..errors import UserError
from .inbox import ChannelCounts, FilteringInbox, RuntimeInbox

if TYPE_CHECKING:
    from ..core.runtime_store import RuntimeStore
    from ..services import Services

__all__ = [
    "ChannelInfo",
    "MemoryCursors",
    "RuntimeChannelContext",
    "RuntimeChannels",
    "check_specs",
]

log = logging.getLogger(__name__)

RESTART_FIRST_SECONDS: Final = 1.0
RESTART_MAX_SECONDS: Final = 300.0

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

    def health(self) -> ChannelHealth:
        last = self.inbox.counts.last_event_at
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
    ) -> None:
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
        """The running channels that can carry messages to the user, as configured in order."""
        return [
            name
            for name, running in self._running.items()
            if isinstance(running.channel, UserReach) and running.health().state == "running"
        ]

    async def send_to_user(self, channel: str, message: OutboundMessage) -> str | None:
        """Deliver `message` on `channel` (see UserReach); UserError when it cannot."""
        return await self._reach(channel).send_to_user(message)

    async def show_read(self, channel: str, message: OutboundMessage, copy_id: str) -> bool:
        """Reflect on `channel`'s copy that `message` was read elsewhere; False if it cannot."""
        running = self._running.get(channel)
        if running is None or not isinstance(running.channel, UserReach):
            return False
        return await running.channel.show_read(message, copy_id)

    async def send(self, to: str, text: str) -> None:
        """Send an instant message to `to` over the first running XMPP channel (the
        collaboration tools' send_im_notification, to approvers)."""
        for running in self._running.values():
            channel = running.channel
            send = getattr(channel, "send", None)
            if running.spec.kind == "xmpp" and send and running.health().state == "running":
                await send(to, text)
                return
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
        context = RuntimeChannelContext(
            spec.full_name,
            inbox,
            self._cursors,
            self._workspace,
            reads=self._reads,
            services=self._services,
        )
        # Built once now, so what only building finds (a secret's variable not set) is refused
        # to the caller, and never becomes a channel that crashes and restarts for good.
        kind.build(settings, context)
        return _Running(spec, kind, settings, inbox, context, origin)

    async def _start(self, running: _Running) -> None:
        self._running[running.spec.full_name] = running
        await self._tg.start(self._supervise, running, name=f"channel {running.spec.full_name}")

    async def _supervise(
        self, running: _Running, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Run the channel, rebuilding and restarting it after a crash; report started once
        the first attempt is running or has failed (connect never waits on a backoff)."""
        reported = False
        delay = self._restart_first
        with running.scope:
            while True:
                try:
                    async with anyio.create_task_group() as tg:
                        channel = running.kind.build(running.settings, running.context)
                        running.channel = channel
                        await tg.start(channel.run)
                        running.failure = None
                        delay = self._restart_first
                        if not reported:
                            task_status.started()
                            reported = True
                except Exception as exc:  # a channel's crash is reported, never propagated
                    running.restarts += 1
                    running.failure = (
                        f"crashed ({_described(exc)}); restarting in {delay:g} s "
                        f"(restart {running.restarts})"
                    )
                    log.error("channel %s %s", running.spec.full_name, running.failure)
                    if not reported:
                        task_status.started()
                        reported = True
                    await anyio.sleep(delay)
                    delay = min(delay * 2, RESTART_MAX_SECONDS)
                    continue
                running.ended = True
                if not reported:
                    task_status.started()
                log.info("channel %s stopped: its source ended", running.spec.full_name)
                return


def _described(exc: BaseException) -> str:
    """One line for an exception, looking through the task group's wrapping."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
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
