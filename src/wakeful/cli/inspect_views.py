"""How the inspection commands show a store: tables for people, JSON lines for programs.

`wakeful events tail`, `wakeful tasks` and `wakeful timers` read a store (running runtime or not)
and show it through the functions here. Each thing has two views: a rich table row, shortened to
fit a terminal, and a JSON object that keeps everything, one per line.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Final

from rich.table import Table
from rich.text import Text

from ..channels.timer_schedules import TimerRecord
from ..store.reader import StoredEvent
from ..tools.tasks import TaskRecord

# Event content longer than this is cut before the table shortens it further to fit.
CONTENT_CHARS: Final = 200

_WHITESPACE = re.compile(r"\s+")

_STATUS_STYLES: Final = {"pending": "yellow", "consumed": "dim", "filtered": "magenta"}
_TASK_STATE_STYLES: Final = {
    "running": "cyan",
    "completed": "green",
    "failed": "red",
    "cancelled": "yellow",
    "lost": "bold magenta",
}


def one_line(text: str, limit: int = CONTENT_CHARS) -> str:
    """`text` on one line (runs of whitespace become one space), cut to `limit` characters."""
    flat = _WHITESPACE.sub(" ", text).strip()
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def local_time(when: datetime) -> str:
    """A time in this machine's timezone, to the second, e.g. '2025-06-02 09:00:05'."""
    return when.astimezone().strftime("%Y-%m-%d %H:%M:%S")


def local_time_with_zone(when: datetime) -> str:
    """A time in this machine's timezone with the zone's name, e.g. '2025-06-02 09:00 CEST'."""
    return when.astimezone().strftime("%Y-%m-%d %H:%M %Z").strip()


def utc_time(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def format_duration(seconds: float) -> str:
    """A duration as people read it: '0.4s', '12.3s', '4m 05s', '2h 03m', '3d 04h'."""
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.1f}s"
    whole = int(seconds)
    if whole < 3600:
        return f"{whole // 60}m {whole % 60:02d}s"
    if whole < 86400:
        return f"{whole // 3600}h {whole % 3600 // 60:02d}m"
    return f"{whole // 86400}d {whole % 86400 // 3600:02d}h"


# --- events --------------------------------------------------------------------------------------


def event_json(stored: StoredEvent) -> dict[str, Any]:
    """One stored event for `--json`: its position, its status, and the event as stored."""
    return {
        "rowid": stored.rowid,
        "status": stored.status,
        "event": stored.event.model_dump(mode="json"),
    }


def one_line_cell(text: str, style: str = "") -> Text:
    """A cell that stays on one line and ends in '…' where its column is too narrow."""
    return Text(one_line(text), style=style, no_wrap=True, overflow="ellipsis")


def events_table(events: Sequence[StoredEvent], *, header: bool = True) -> Table:
    """Events as a table, one line each.

    Minimum widths keep the batches that `--follow` prints lined up; on a narrow terminal the
    content column gives way first, then source and session.
    """
    table = Table(show_header=header, box=None, header_style="bold", pad_edge=False)
    table.add_column("time", no_wrap=True)
    table.add_column("kind", no_wrap=True, min_width=14)
    table.add_column("source", min_width=14, max_width=24)
    table.add_column("session", min_width=7, max_width=16)
    table.add_column("status", no_wrap=True, min_width=8)
    table.add_column("content")
    for stored in events:
        event = stored.event
        source = f"{event.source.type}:{event.source.id}" if event.source.id else event.source.type
        table.add_row(
            local_time(event.ts),
            Text(event.kind, style="bold red" if event.urgency == "urgent" else ""),
            one_line_cell(source),
            one_line_cell(event.session),
            Text(stored.status, style=_STATUS_STYLES.get(stored.status, "")),
            one_line_cell(event.text),
        )
    return table


# --- tasks ---------------------------------------------------------------------------------------


def task_runtime_seconds(record: TaskRecord, now: datetime | None = None) -> float:
    """How long the task ran, or has been running so far if the store says it still runs."""
    end = record.ended_at or now or datetime.now(UTC)
    return max(0.0, (end - record.started_at).total_seconds())


def task_json(record: TaskRecord, now: datetime | None = None) -> dict[str, Any]:
    return {**record.to_dict(), "runtime_seconds": round(task_runtime_seconds(record, now), 2)}


def tasks_table(records: Sequence[TaskRecord], now: datetime | None = None) -> Table:
    table = Table(box=None, header_style="bold", pad_edge=False)
    table.add_column("id", no_wrap=True)
    table.add_column("session", max_width=16)
    table.add_column("tool", no_wrap=True)
    table.add_column("state", no_wrap=True)
    table.add_column("percent", justify="right", no_wrap=True)
    table.add_column("runtime", justify="right", no_wrap=True)
    table.add_column("description", overflow="fold")
    for record in records:
        percent = f"{record.percent:.0f}%" if record.percent is not None else ""
        table.add_row(
            record.id,
            one_line_cell(record.session),
            Text(record.tool),
            Text(record.state, style=_TASK_STATE_STYLES.get(record.state, "")),
            percent,
            format_duration(task_runtime_seconds(record, now)),
            Text(one_line(record.description)),
        )
    return table


# --- timers --------------------------------------------------------------------------------------


def timer_json(record: TimerRecord) -> dict[str, Any]:
    """The stored timer with its schedule in words and its next fire in local time too."""
    out = {**record.to_dict(), "schedule": record.schedule}
    out["next_fire_local"] = record.next_fire.astimezone().isoformat() if record.next_fire else None
    return out


def timers_table(records: Sequence[TimerRecord], *, with_state: bool = False) -> Table:
    """Timers as a table; each next fire shows in this machine's local time and in UTC."""
    table = Table(box=None, header_style="bold", pad_edge=False)
    table.add_column("id", no_wrap=True)
    table.add_column("session", max_width=16)
    if with_state:
        table.add_column("state", no_wrap=True)
    table.add_column("schedule", overflow="fold")
    table.add_column("next fire", no_wrap=True)
    table.add_column("missed", no_wrap=True)
    table.add_column("note", overflow="fold")
    for record in records:
        cells: list[str | Text] = [record.id, one_line_cell(record.session)]
        if with_state:
            cells.append(Text("active", style="green") if record.active else Text("done", "dim"))
        next_fire = record.next_fire
        when = Text("—")
        if next_fire is not None:
            # Local time first (what the user lives by), UTC below it (what the store keeps).
            when = Text(local_time_with_zone(next_fire))
            when.append("\n" + utc_time(next_fire), style="dim")
        cells += [
            Text(record.schedule),
            when,
            record.missed,
            Text(one_line(record.note)),
        ]
        table.add_row(*cells)
    return table
