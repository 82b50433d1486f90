"""When a timer fires: the maths of its schedule (the record itself is in
:mod:`wakeful.core.records`, re-exported here).

A timer fires once, every N seconds from an anchor, or on a cron expression read in an IANA
timezone. Occurrences are always computed from the schedule itself (the anchor, or the cron
expression), never from the moment a timer happened to fire, so recurring timers do not drift;
:func:`due_occurrences` counts the occurrences a late fire stands for.
"""

from __future__ import annotations

import math
import uuid
from datetime import UTC, datetime, timedelta
from typing import Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterError, croniter

from ..core.records import MissedPolicy, TimerKind, TimerRecord, iso_utc
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

# Missed cron occurrences are counted one by one up to this many; beyond it the count is a floor.
MISSED_COUNT_LIMIT: Final = 1000
EXAMPLE_AT: Final = "2025-06-02T09:00:00+02:00"


def new_timer_id() -> str:
    return "tmr_" + uuid.uuid4().hex[:12]


class InvalidTimer(UserError):
    """A timer's schedule or arguments are invalid; the message names the value and the fix."""


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
    try:
        return parsed.astimezone(UTC)
    except OverflowError as exc:
        raise InvalidTimer(
            f"`{name}` is out of range: {text!r} in UTC falls outside the years 1 to 9999. "
            f"Give a time within them, e.g. {EXAMPLE_AT!r}."
        ) from exc


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
    fields = expression.split()
    if not expression.lstrip().startswith("@") and len(fields) != 5:
        # croniter also reads a sixth (seconds) and seventh (year) field; the tool promises five.
        raise InvalidTimer(
            f"Invalid cron expression {expression!r}: it has {len(fields)} fields; use five, "
            "minute hour day-of-month month day-of-week, e.g. '0 9 * * 5' for Fridays at "
            "09:00. For a timer more often than once a minute, use every_seconds."
        )
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
