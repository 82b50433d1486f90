"""What a timer is and when it fires: the timer record and the maths of its schedule.

A timer fires once, every N seconds from an anchor, or on a cron expression read in an IANA
timezone. Occurrences are always computed from the schedule itself (the anchor, or the cron
expression), never from the moment a timer happened to fire, so recurring timers do not drift;
:func:`due_occurrences` counts the occurrences a late fire stands for.
"""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final, Literal, get_args
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterError, croniter

from ..errors import UserError

__all__ = [
    "EXAMPLE_AT",
    "MISSED_COUNT_LIMIT",
    "InvalidTimer",
    "MissedPolicy",
    "TimerKind",
    "TimerRecord",
    "check_cron",
    "due_occurrences",
    "iso_utc",
    "new_timer_id",
    "next_occurrence",
    "parse_rfc3339",
    "parse_timezone",
]

MissedPolicy = Literal["fire_once", "skip"]
TimerKind = Literal["once", "every", "cron"]

# Missed cron occurrences are counted one by one up to this many; beyond it the count is a floor.
MISSED_COUNT_LIMIT: Final = 1000
EXAMPLE_AT: Final = "2025-06-02T09:00:00+02:00"


def new_timer_id() -> str:
    return "tmr_" + uuid.uuid4().hex[:12]


class InvalidTimer(UserError):
    """A timer's schedule or arguments are invalid; the message names the value and the fix."""


# --- the record ----------------------------------------------------------------------------------


@dataclass
class TimerRecord:
    """One timer: the note, the session it wakes, and its schedule.

    `next_fire` is the next scheduled occurrence in UTC, or None once a one-shot timer is done.
    A recurring `every` timer fires at `anchor + k * every_seconds`; a `cron` timer follows its
    expression in `timezone`.
    """

    id: str
    session: str
    note: str
    kind: TimerKind
    next_fire: datetime | None
    active: bool = True
    missed: MissedPolicy = "fire_once"
    every_seconds: float | None = None
    anchor: datetime | None = None
    cron: str | None = None
    timezone: str | None = None
    created_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    last_fired_at: datetime | None = None
    fire_count: int = 0

    def __post_init__(self) -> None:
        if self.kind not in get_args(TimerKind):
            raise ValueError(f"unknown timer kind {self.kind!r}")
        if self.missed not in get_args(MissedPolicy):
            raise ValueError(f"unknown missed policy {self.missed!r}")
        if self.kind == "every" and (self.every_seconds is None or self.anchor is None):
            raise ValueError("an `every` timer needs every_seconds and anchor")
        if self.kind == "cron" and (self.cron is None or self.timezone is None):
            raise ValueError("a `cron` timer needs cron and timezone")
        if self.active and self.next_fire is None:
            raise ValueError("an active timer needs next_fire")

    @property
    def schedule(self) -> str:
        """The schedule in words, e.g. "every 1h", "cron '0 9 * * 5' in Europe/Paris"."""
        if self.kind == "cron":
            return f"cron {self.cron!r} in {self.timezone}"
        if self.kind == "every":
            assert self.every_seconds is not None
            return f"every {_format_seconds(self.every_seconds)}"
        return "once"

    def summary(self) -> dict[str, Any]:
        """The view the timer tools and CLI show."""
        out: dict[str, Any] = {
            "timer_id": self.id,
            "note": self.note,
            "schedule": self.schedule,
            "next_fire": iso_utc(self.next_fire) if self.next_fire else None,
            "missed": self.missed,
            "active": self.active,
            "fire_count": self.fire_count,
        }
        if self.kind == "cron" and self.next_fire is not None and self.timezone:
            out["next_fire_local"] = self.next_fire.astimezone(ZoneInfo(self.timezone)).isoformat()
        if self.last_fired_at is not None:
            out["last_fired_at"] = iso_utc(self.last_fired_at)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "session": self.session,
            "note": self.note,
            "kind": self.kind,
            "next_fire": iso_utc(self.next_fire) if self.next_fire else None,
            "active": self.active,
            "missed": self.missed,
            "every_seconds": self.every_seconds,
            "anchor": iso_utc(self.anchor) if self.anchor else None,
            "cron": self.cron,
            "timezone": self.timezone,
            "created_at": iso_utc(self.created_at),
            "last_fired_at": iso_utc(self.last_fired_at) if self.last_fired_at else None,
            "fire_count": self.fire_count,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TimerRecord:
        """Rebuild a record from :meth:`to_dict` output; ValueError/KeyError if it is malformed."""

        def when(key: str) -> datetime | None:
            value = data.get(key)
            if value is None:
                return None
            parsed = datetime.fromisoformat(value)
            if parsed.tzinfo is None:
                raise ValueError(f"{key} {value!r} has no timezone")
            return parsed.astimezone(UTC)

        every = data.get("every_seconds")
        return cls(
            id=str(data["id"]),
            session=str(data["session"]),
            note=str(data["note"]),
            kind=data["kind"],
            next_fire=when("next_fire"),
            active=bool(data["active"]),
            missed=data.get("missed", "fire_once"),
            every_seconds=float(every) if every is not None else None,
            anchor=when("anchor"),
            cron=data.get("cron"),
            timezone=data.get("timezone"),
            created_at=when("created_at") or datetime.now(UTC),
            last_fired_at=when("last_fired_at"),
            fire_count=int(data.get("fire_count", 0)),
        )


def iso_utc(when: datetime) -> str:
    """`when` in UTC, as RFC 3339 text."""
    return when.astimezone(UTC).isoformat()


def _format_seconds(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


# --- schedules -----------------------------------------------------------------------------------


def parse_rfc3339(text: str, name: str = "at") -> datetime:
    """An RFC 3339 time with an explicit offset, converted to UTC; InvalidTimer otherwise."""
    try:
        parsed = datetime.fromisoformat(text.strip())
    except ValueError as exc:
        raise InvalidTimer(
            f"`{name}` is not an RFC 3339 time: got {text!r}. Write it like {EXAMPLE_AT!r} "
            "(date, 'T', time, and a timezone offset or 'Z')."
        ) from exc
    if parsed.tzinfo is None or parsed.utcoffset() is None:
        raise InvalidTimer(
            f"`{name}` must include a timezone offset: got {text!r}, which could mean any "
            f"timezone. Add the offset, e.g. {parsed.isoformat()}+02:00 for Paris in summer, "
            f"or {parsed.isoformat()}Z for UTC."
        )
    return parsed.astimezone(UTC)


def parse_timezone(name: str) -> ZoneInfo:
    """The IANA timezone called `name`; InvalidTimer naming it if there is none."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:  # OSError: "Europe" is a folder
        raise InvalidTimer(
            f"Unknown timezone {name!r}. Use an IANA timezone name such as 'Europe/Paris', "
            "'America/New_York' or 'UTC'."
        ) from exc


def check_cron(expression: str, zone: ZoneInfo, now: datetime) -> datetime:
    """Validate a cron expression and return its first occurrence after `now` (UTC)."""
    if not croniter.is_valid(expression):
        raise InvalidTimer(
            f"Invalid cron expression {expression!r}. Use five fields, minute hour day-of-month "
            "month day-of-week, e.g. '0 9 * * 5' for Fridays at 09:00 or '*/15 * * * *' for "
            "every 15 minutes."
        )
    try:
        return _cron_next(expression, zone, now)
    except CroniterError as exc:
        raise InvalidTimer(
            f"The cron expression {expression!r} never fires (no matching date was found), "
            "e.g. it asks for February 30. Check the day and month fields."
        ) from exc


def _hour_is_fixed(expression: str) -> bool:
    """Whether the expression runs at set hours (so a wall time repeated by DST runs once)."""
    fields = expression.split()
    if expression.startswith("@"):
        return expression.strip() != "@hourly"
    return len(fields) > 1 and "*" not in fields[1]


def _is_repeated_wall_time(local: datetime) -> bool:
    """Whether `local` is the second pass through a wall-clock time that DST ends repeat."""
    return local.replace(fold=0).utcoffset() != local.utcoffset()


def _cron_next(expression: str, zone: ZoneInfo, after: datetime) -> datetime:
    iterator = croniter(expression, after.astimezone(zone))
    skip_repeats = _hour_is_fixed(expression)
    while True:
        local = iterator.get_next(datetime)
        # When clocks go back, 02:30 happens twice; a job set for 02:30 runs on the first pass
        # only (as cron does), while a job that runs every hour keeps running in real time.
        if skip_repeats and _is_repeated_wall_time(local):
            continue
        return local.astimezone(UTC)


def _interval_index(anchor: datetime, every: float, after: datetime) -> int:
    """The smallest k such that anchor + k * every is strictly after `after` (k >= 0)."""
    if after < anchor:
        return 0
    k = math.floor((after - anchor).total_seconds() / every) + 1
    # Float division can be off by one either way; settle it with exact datetime comparisons.
    while anchor + timedelta(seconds=k * every) <= after:
        k += 1
    while k > 0 and anchor + timedelta(seconds=(k - 1) * every) > after:
        k -= 1
    return k


def next_occurrence(record: TimerRecord, after: datetime) -> datetime | None:
    """The timer's first scheduled occurrence strictly after `after`, or None for a one-shot."""
    if record.kind == "once":
        return None
    if record.kind == "every":
        assert record.anchor is not None and record.every_seconds is not None
        k = _interval_index(record.anchor, record.every_seconds, after)
        return record.anchor + timedelta(seconds=k * record.every_seconds)
    assert record.cron is not None and record.timezone is not None
    return _cron_next(record.cron, ZoneInfo(record.timezone), after)


def due_occurrences(record: TimerRecord, first: datetime, now: datetime) -> tuple[int, datetime]:
    """How many scheduled occurrences fall in [first, now], and the latest of them."""
    if record.kind == "once":
        return 1, first
    if record.kind == "every":
        assert record.anchor is not None and record.every_seconds is not None
        k_first = _interval_index(record.anchor, record.every_seconds, first) - 1
        k_after = _interval_index(record.anchor, record.every_seconds, now)
        latest = record.anchor + timedelta(seconds=(k_after - 1) * record.every_seconds)
        return max(1, k_after - k_first), latest
    count, latest = 1, first
    while count < MISSED_COUNT_LIMIT:
        following = next_occurrence(record, latest)
        if following is None or following > now:
            return count, latest
        count, latest = count + 1, following
    # Too many to count one by one: find the latest directly and report the count as a floor.
    assert record.cron is not None and record.timezone is not None
    iterator = croniter(
        record.cron, (now + timedelta(microseconds=1)).astimezone(ZoneInfo(record.timezone))
    )
    return count, max(latest, iterator.get_prev(datetime).astimezone(UTC))
