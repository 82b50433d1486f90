"""The system channel: the runtime watching its own surroundings, as events.

Every `check_interval_seconds` (on the runtime's clock) it runs its monitors — the user's
inactivity, background tasks past their deadline, the host's resources and runaway tasks — and
delivers what they find to its Inbox. Each monitor reports a thing once (see each module for
how its ids make that hold across restarts). A check that fails (a disk path gone, the store
full) leaves the channel "degraded" with the reason and is tried again at the next interval.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import anyio
from anyio.abc import TaskStatus

from ...activity import UserActivity
from ...clock import Clock, SystemClock
from ...core.channel import ChannelContext, ChannelHealth, ChannelState, Delivery
from ...errors import StoreError
from ...events import Event
from ...services import Services, state_of
from ...tools.tasks import TaskManager
from .host import HostUnreadable
from .inactivity import InactivityMonitor
from .resources import ResourceMonitor
from .settings import SystemChannelSettings
from .timeouts import TimeoutMonitor

__all__ = ["SystemChannel", "SystemChannelKind", "SystemWatch"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SystemWatch:
    """What the runtime lets a system channel watch: its background tasks, the user's
    activity, where its store lives (whose disk is checked with the workspace's), and the
    clock the runtime's timers use."""

    tasks: TaskManager | None = None
    user_activity: UserActivity | None = None
    store_path: Path | None = None
    clock: Clock = field(default_factory=SystemClock)

    @classmethod
    def of_services(cls, services: Services, clock: Clock | None = None) -> SystemWatch:
        """What a runtime's services offer; the user's activity is the services' shared
        :class:`UserActivity`, which the runtime feeds with every event from the user."""
        timers = services.timers
        return cls(
            tasks=services.tasks,
            user_activity=state_of(services, UserActivity),
            store_path=services.store.path if services.store is not None else None,
            clock=clock or (timers.clock if timers is not None else SystemClock()),
        )


class SystemChannel:
    """Delivers `system.*` events for one `[[channels.system]]` table (see the module docs)."""

    def __init__(
        self, settings: SystemChannelSettings, context: ChannelContext, watch: SystemWatch
    ) -> None:
        self.settings = settings
        self._context = context
        self.watch = watch
        self._clock = watch.clock
        self._state: ChannelState = "stopped"
        self._problems: list[str] = []
        self._last_event_at: datetime | None = None
        # What was asked for but cannot be watched here (said by health(), never silently).
        self._missing: list[str] = []
        name = context.name
        self._inactivity: InactivityMonitor | None = None
        if settings.watches("user_inactive"):
            if watch.user_activity is None:
                self._missing.append("user_inactive (the runtime shares no user activity)")
            else:
                self._inactivity = InactivityMonitor(
                    channel=name,
                    session=settings.session,
                    after=timedelta(minutes=settings.user_inactive_minutes),
                    activity=watch.user_activity,
                    cursors=context.cursors,
                    deliver=self._deliver,
                )
        self._timeouts: TimeoutMonitor | None = None
        if settings.watches("process_timeout"):
            if watch.tasks is None:
                self._missing.append("process_timeout (the runtime shares no task manager)")
            else:
                self._timeouts = TimeoutMonitor(
                    channel=name,
                    default_deadline=timedelta(minutes=settings.task_deadline_minutes),
                    tasks=watch.tasks,
                    deliver=self._deliver,
                )
        self._resources: ResourceMonitor | None = None
        if settings.watches("resources"):
            self._resources = ResourceMonitor(
                channel=name,
                settings=settings,
                disk_paths=self._disk_paths,
                tasks=watch.tasks,
                cursors=context.cursors,
                deliver=self._deliver,
            )

    @property
    def name(self) -> str:
        return self._context.name

    def health(self) -> ChannelHealth:
        """Running with what it watches and what is outstanding; degraded with the reason
        when a check failed or a monitor asked for cannot run here."""
        problems = [*self._problems, *(f"cannot watch {what}" for what in self._missing)]
        notes = [f"checks every {self.settings.check_interval_seconds:g} s"]
        if self._inactivity is not None and self._inactivity.away_since is not None:
            notes.append(f"user away since {self._inactivity.away_since.isoformat()}")
        if self._timeouts is not None and self._timeouts.overdue:
            notes.append("past their deadline: " + ", ".join(self._timeouts.overdue))
        if self._resources is not None and self._resources.over:
            notes.append("over threshold: " + ", ".join(self._resources.over))
        if self._state == "stopped":
            return ChannelHealth(
                "stopped", "; ".join(["not running", *notes[1:]]), self._last_event_at
            )
        if problems:
            return ChannelHealth("degraded", "; ".join(problems + notes), self._last_event_at)
        state: ChannelState = "running" if self._state == "running" else "starting"
        return ChannelHealth(state, "; ".join(notes), self._last_event_at)

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Check at once, report started, then check every interval until cancelled."""
        self._state = "starting"
        try:
            await self.check_now()
            self._state = "running"
            task_status.started()
            interval = timedelta(seconds=self.settings.check_interval_seconds)
            while True:
                await self._clock.sleep_until(self._clock.now() + interval)
                await self.check_now()
        finally:
            self._state = "stopped"

    async def check_now(self) -> None:
        """Run every monitor once and deliver what they find (what `run` does each interval)."""
        now = self._clock.now()
        problems: list[str] = []
        if self._inactivity is not None:
            await self._checked("user_inactive", self._inactivity.check(now), problems)
        if self._timeouts is not None:
            await self._checked("process_timeout", self._timeouts.check(), problems)
        if self._resources is not None:
            await self._checked("resources", self._resources.check(now), problems)
            problems.extend(self._resources.problems)
        self._problems = problems

    async def _checked(self, monitor: str, check: Awaitable[None], problems: list[str]) -> None:
        try:
            await check
        except (StoreError, OSError, HostUnreadable) as exc:
            log.warning("%s: the %s check failed: %s", self.name, monitor, exc)
            problems.append(f"{monitor}: {exc}")

    async def _deliver(self, event: Event) -> Delivery:
        delivery = await self._context.inbox.deliver(event)
        if delivery != "duplicate":
            self._last_event_at = self._clock.now()
        log.info("%s: %s %s (%s)", self.name, event.kind, event.id, delivery)
        return delivery

    def _disk_paths(self) -> Sequence[tuple[str, Path]]:
        paths = [("workspace", self._context.workspace)]
        if self.watch.store_path is not None:
            paths.append(("store", self.watch.store_path.parent))
        paths.extend(("path", path) for path in self.settings.disk_paths)
        return paths


class SystemChannelKind:
    """The "system" kind of channel, for the runtime's channel registry."""

    @property
    def kind(self) -> str:
        return "system"

    @property
    def settings_model(self) -> type[SystemChannelSettings]:
        return SystemChannelSettings

    def build(self, settings: SystemChannelSettings, context: ChannelContext) -> SystemChannel:
        # The runtime's services reach the channel through its context, where the registry
        # puts them; a context without them (a test's) watches only the host.
        services = getattr(context, "services", None)
        watch = SystemWatch.of_services(services) if isinstance(services, Services) else None
        return SystemChannel(settings, context, watch or SystemWatch())
