"""`system.resource_alert`: the host's disk, memory or CPU over a threshold, or a background
task whose processes use too much CPU time or memory.

A host measure alerts when it crosses its threshold going up, and not again until it has gone
back under the threshold by the margin (hysteresis: a value hovering at the line does not
flood the agent) and the minimum interval since the last alert has passed. Each alert names the
measure, its value, the threshold, the value under which it clears, and the top consumers (the
processes using the most memory or CPU, those of a background task named by task id), so the
agent can act without a query.

Ids come from what is reported: "<measure> crossing at <ts>" for the host, with the crossing
kept in the channel's cursors before the alert is delivered (a restart still over the line
delivers the same event again, and the Inbox drops it if it had arrived); "runaway <task id>
<measure>" for a task, reported once.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import anyio

from ...core.channel import source_event_id
from ...core.repositories import ChannelCursorRepository
from ...events import SYSTEM_RESOURCE_ALERT, Event, Source
from ...tools.tasks import TaskHandle, TaskManager
from . import host
from .deliver import Deliver
from .settings import SystemChannelSettings

__all__ = ["ResourceMonitor"]

log = logging.getLogger(__name__)

MB = 1024 * 1024
# How long the CPU's top consumers are sampled for when an alert names them.
CPU_SAMPLE_SECONDS = 0.5


@dataclass
class _Crossing:
    """One host measure's alert state: when it last crossed up (and was reported), whether it
    is still over (not yet back under threshold - margin), and whether that alert still has to
    be re-delivered after a restart (the Inbox drops it if it had arrived)."""

    crossed_at: datetime | None = None
    over: bool = False
    unconfirmed: bool = False

    def dump(self) -> str:
        when = self.crossed_at.isoformat() if self.crossed_at else None
        return json.dumps({"crossed_at": when, "over": self.over})

    @classmethod
    def load(cls, text: str) -> _Crossing:
        data = json.loads(text)
        when = data["crossed_at"]
        over = bool(data["over"])
        return cls(datetime.fromisoformat(when) if when else None, over, unconfirmed=over)


@dataclass(frozen=True)
class _Measure:
    """One reading of a host measure, with what its alert says about it."""

    key: str  # "disk /", "memory", "cpu": the cursor key and part of the event id
    kind: str  # "disk", "memory", "cpu"
    value: float  # percent
    limit: float  # percent
    facts: dict[str, Any]


class ResourceMonitor:
    """Checks the host's measures and the running tasks' processes (see the module docs)."""

    def __init__(
        self,
        *,
        channel: str,
        settings: SystemChannelSettings,
        disk_paths: Callable[[], Sequence[tuple[str, Path]]],
        tasks: TaskManager | None,
        cursors: ChannelCursorRepository,
        deliver: Deliver,
    ) -> None:
        self._channel = channel
        self._settings = settings
        self._disk_paths = disk_paths
        self._tasks = tasks
        self._cursors = cursors
        self._deliver = deliver
        self._margin = settings.margin_percent
        self._min_interval = timedelta(minutes=settings.min_alert_interval_minutes)
        self._crossings: dict[str, _Crossing] = {}
        self._cpu_before: host.CpuTimes | None = None
        self._runaways: set[tuple[str, str]] = set()
        # What went wrong in the last check (a disk path gone, no /proc), for health().
        self.problems: list[str] = []

    @property
    def over(self) -> list[str]:
        """The host measures alerted and not yet back under their threshold."""
        return [key for key, crossing in self._crossings.items() if crossing.over]

    async def check(self, now: datetime) -> None:
        self.problems = []
        for measure in await self._measures():
            await self._check_measure(measure, now)
        if self._tasks is not None and (
            self._settings.task_cpu_seconds or self._settings.task_memory_mb
        ):
            await self._check_tasks(self._tasks)

    # --- the host ----------------------------------------------------------------------------

    async def _measures(self) -> list[_Measure]:
        settings = self._settings
        found: list[_Measure] = []
        if settings.disk_percent:
            found.extend(await self._disks())
        if settings.memory_percent:
            try:
                memory = await anyio.to_thread.run_sync(host.memory_reading)
            except (OSError, host.HostUnreadable) as exc:
                self.problems.append(f"memory: {exc}")
            else:
                facts: dict[str, Any] = {
                    "total_mb": memory.total_bytes // MB,
                    "available_mb": memory.available_bytes // MB,
                }
                found.append(
                    _Measure(
                        "memory", "memory", memory.used_percent, settings.memory_percent, facts
                    )
                )
        if settings.cpu_percent:
            try:
                times = await anyio.to_thread.run_sync(host.cpu_times)
            except (OSError, host.HostUnreadable) as exc:
                self.problems.append(f"cpu: {exc}")
            else:
                before, self._cpu_before = self._cpu_before, times
                busy = host.cpu_percent(before, times) if before is not None else None
                if busy is not None:
                    facts = {"over_seconds": settings.check_interval_seconds}
                    found.append(_Measure("cpu", "cpu", busy, settings.cpu_percent, facts))
        return found

    async def _disks(self) -> list[_Measure]:
        by_device: dict[int, tuple[host.DiskReading, list[str]]] = {}
        for label, path in self._disk_paths():
            try:
                reading = await anyio.to_thread.run_sync(host.disk_reading, path)
            except OSError as exc:
                self.problems.append(f"disk {label} ({path}): {exc.strerror or exc}")
                continue
            _, labels = by_device.setdefault(reading.device, (reading, []))
            labels.append(f"{label} {path}")
        measures = []
        for reading, labels in by_device.values():
            facts = {
                "mount": str(reading.mount),
                "holds": labels,
                "free_mb": reading.free_bytes // MB,
                "total_mb": reading.total_bytes // MB,
            }
            measures.append(
                _Measure(
                    f"disk {reading.mount}",
                    "disk",
                    reading.used_percent,
                    self._settings.disk_percent,
                    facts,
                )
            )
        return measures

    async def _check_measure(self, measure: _Measure, now: datetime) -> None:
        crossing = await self._crossing(measure.key)
        if crossing.over:
            if measure.value < measure.limit - self._margin:
                crossing.over = crossing.unconfirmed = False
                await self._cursors.put(self._channel, _cursor_key(measure), crossing.dump())
            elif crossing.unconfirmed:
                # Kept over a restart: deliver it again; the Inbox drops it if it had arrived.
                await self._deliver(await self._event(measure, crossing))
                crossing.unconfirmed = False
            return
        if measure.value < measure.limit:
            return
        last = crossing.crossed_at
        if last is not None and now - last < self._min_interval:
            return
        crossing.crossed_at, crossing.over = now, True
        # The crossing is kept before the alert goes out: it names the alert (see the docs).
        await self._cursors.put(self._channel, _cursor_key(measure), crossing.dump())
        await self._deliver(await self._event(measure, crossing))

    async def _crossing(self, key: str) -> _Crossing:
        crossing = self._crossings.get(key)
        if crossing is not None:
            return crossing
        stored = await self._cursors.get(self._channel, "alert " + key)
        crossing = _Crossing()
        if stored is not None:
            try:
                crossing = _Crossing.load(stored)
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("%s: ignoring a damaged cursor for %s (%s)", self._channel, key, exc)
        self._crossings[key] = crossing
        return crossing

    async def _event(self, measure: _Measure, crossing: _Crossing) -> Event:
        assert crossing.crossed_at is not None
        clears = max(0.0, measure.limit - self._margin)
        top = await self._top_consumers(measure.kind)
        summary = _host_summary(measure, clears)
        return Event(
            id=source_event_id(
                self._channel, f"{measure.key} crossing at {crossing.crossed_at.isoformat()}"
            ),
            kind=SYSTEM_RESOURCE_ALERT,
            source=Source(type="system", id="resources"),
            channel=self._channel,
            session=self._settings.session,
            urgency="high",
            content={
                "summary": summary,
                "measure": measure.kind,
                "value_percent": round(measure.value, 1),
                "threshold_percent": measure.limit,
                "clears_below_percent": clears,
                "crossed_at": crossing.crossed_at.isoformat(),
                **measure.facts,
                "top_consumers": top,
            },
        )

    async def _top_consumers(self, kind: str) -> list[dict[str, Any]]:
        """The processes using the most of `kind` (none for a disk: what fills it is files)."""
        if kind == "disk":
            return []
        try:
            first = await anyio.to_thread.run_sync(host.processes)
            if kind == "cpu":
                await anyio.sleep(CPU_SAMPLE_SECONDS)
                second = await anyio.to_thread.run_sync(host.processes)
        except (OSError, host.HostUnreadable) as exc:
            self.problems.append(f"processes: {exc}")
            return []
        owners = self._task_of_pid(first)
        if kind == "memory":
            ranked = sorted(first.values(), key=lambda p: p.rss_bytes, reverse=True)
            picked: list[tuple[host.ProcessReading, float | None]] = [
                (p, None) for p in ranked[: self._settings.top_consumers]
            ]
        else:
            used = {
                pid: reading.cpu_seconds - first[pid].cpu_seconds
                for pid, reading in second.items()
                if pid in first
            }
            ranked_pids = sorted(used, key=lambda pid: used[pid], reverse=True)
            picked = [
                (second[pid], round(100 * used[pid] / CPU_SAMPLE_SECONDS, 1))
                for pid in ranked_pids[: self._settings.top_consumers]
            ]
        consumers = []
        for reading, cpu in picked:
            entry: dict[str, Any] = {
                "pid": reading.pid,
                "command": host.process_command(reading.pid) or reading.name,
                "rss_mb": round(reading.rss_bytes / MB, 1),
            }
            if cpu is not None:
                entry["cpu_percent"] = cpu
            if reading.pid in owners:
                entry["task_id"] = owners[reading.pid]
            consumers.append(entry)
        return consumers

    def _task_of_pid(self, table: dict[int, host.ProcessReading]) -> dict[int, str]:
        owners: dict[int, str] = {}
        for task in self._tasks.running() if self._tasks is not None else []:
            for reading in host.tree_of(task.process_groups, table):
                owners[reading.pid] = task.id
        return owners

    # --- runaway tasks -----------------------------------------------------------------------

    async def _check_tasks(self, tasks: TaskManager) -> None:
        running = tasks.running()
        ids = {task.id for task in running}
        self._runaways = {entry for entry in self._runaways if entry[0] in ids}
        watched = [task for task in running if task.process_groups]
        if not watched:
            return  # no /proc scan while no task runs a process
        try:
            table = await anyio.to_thread.run_sync(host.processes)
        except (OSError, host.HostUnreadable) as exc:
            self.problems.append(f"processes: {exc}")
            return
        settings = self._settings
        for task in watched:
            members = host.tree_of(set(task.process_groups), table)
            cpu = sum(member.cpu_seconds for member in members)
            rss = sum(member.rss_bytes for member in members)
            if settings.task_cpu_seconds and cpu >= settings.task_cpu_seconds:
                await self._runaway(task, "task_cpu", members, cpu, settings.task_cpu_seconds)
            if settings.task_memory_mb and rss >= settings.task_memory_mb * MB:
                await self._runaway(task, "task_memory", members, rss / MB, settings.task_memory_mb)

    async def _runaway(
        self,
        task: TaskHandle,
        measure: str,
        members: list[host.ProcessReading],
        value: float,
        limit: float,
    ) -> None:
        if (task.id, measure) in self._runaways:
            return
        unit = "CPU seconds" if measure == "task_cpu" else "MB of memory"
        what = f"{task.tool}: {task.description}" if task.description else task.tool
        key = (lambda p: p.cpu_seconds) if measure == "task_cpu" else (lambda p: p.rss_bytes)
        ranked = sorted(members, key=key, reverse=True)[: self._settings.top_consumers]
        event = Event(
            id=source_event_id(self._channel, f"runaway {task.id} {measure}"),
            kind=SYSTEM_RESOURCE_ALERT,
            source=Source(type="system", id="resources"),
            channel=self._channel,
            session=task.session,
            urgency="high",
            content={
                "summary": (
                    f"Background task {task.id} ({what}) has used {value:,.1f} {unit} with "
                    f"{len(members)} process(es), over the limit of {limit:,g}; it is still "
                    "running."
                ),
                "measure": measure,
                "value": round(value, 1),
                "threshold": limit,
                "unit": "cpu_seconds" if measure == "task_cpu" else "mb",
                "task_id": task.id,
                "tool": task.tool,
                "command": task.description,
                "running_seconds": round(task.runtime_seconds, 1),
                "processes": len(members),
                "top_consumers": [
                    {
                        "pid": member.pid,
                        "command": host.process_command(member.pid) or member.name,
                        "cpu_seconds": round(member.cpu_seconds, 1),
                        "rss_mb": round(member.rss_bytes / MB, 1),
                    }
                    for member in ranked
                ],
                "options": [
                    f'cancel_task(task_id="{task.id}") stops it and everything it started',
                    f'task_status(task_id="{task.id}") shows its latest output',
                ],
            },
            context={"task_id": task.id, "tool": task.tool},
        )
        await self._deliver(event)
        self._runaways.add((task.id, measure))


def _cursor_key(measure: _Measure) -> str:
    return "alert " + measure.key


def _host_summary(measure: _Measure, clears: float) -> str:
    value, limit = f"{measure.value:.1f}%", f"{measure.limit:g}%"
    if measure.kind == "disk":
        facts = measure.facts
        return (
            f"The disk at {facts['mount']} is {value} full ({facts['free_mb']:,} MB free), over "
            f"the {limit} threshold; it holds the {', '.join(facts['holds'])}. Writes there "
            "will start to fail when it is full: free space (old outputs, caches) or tell the "
            f"user. No new alert until it is under {clears:g}%."
        )
    if measure.kind == "memory":
        return (
            f"The host's memory is {value} used ({measure.facts['available_mb']:,} MB "
            f"available), over the {limit} threshold. The top consumers follow; a background "
            f"task among them can be cancelled. No new alert until it is under {clears:g}%."
        )
    return (
        f"The host's CPUs were {value} busy over the last "
        f"{measure.facts['over_seconds']:g} s, over the {limit} threshold. The top consumers "
        f"follow; a background task among them can be cancelled. No new alert until it is "
        f"under {clears:g}%."
    )
