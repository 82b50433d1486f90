"""Timers: notes an agent leaves for its future self, delivered as `timer.trigger` events.

A timer fires once (at an RFC 3339 time, or after a delay), every N seconds, or on a cron
schedule in an IANA timezone. Timers are kept in the store and survive a restart.

The rule for occurrences nobody was there to see (the runtime was down, the machine slept) is the
point of this module: a timer never fires once per missed occurrence. With the `fire_once` policy
it fires a single late event that says how late it is and how many occurrences it stands for;
with `skip` it stays quiet. Either way it then moves to its next occurrence *on its schedule*,
computed from the schedule's anchor and never from the moment it happened to fire, so recurring
timers do not drift.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import math
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Annotated, Any, Final, Literal, get_args
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import anyio
from anyio.abc import TaskStatus
from croniter import CroniterError, croniter
from pydantic import Field

from ..clock import Clock, SystemClock
from ..errors import ToolError, UserError
from ..events import TIMER_TRIGGER, Event, Source
from ..tools.spec import Tool, ToolAnnotations, ToolContext, tool

if TYPE_CHECKING:
    from ..store.sqlite import Store

__all__ = [
    "TIMER_TOOLS",
    "InvalidTimer",
    "MissedPolicy",
    "TimerKind",
    "TimerRecord",
    "TimerService",
    "UnknownTimer",
    "cancel_timer",
    "list_timers",
    "next_occurrence",
    "set_timer",
]

log = logging.getLogger(__name__)

MissedPolicy = Literal["fire_once", "skip"]
TimerKind = Literal["once", "every", "cron"]
# What the service calls with each fire; whatever it returns is ignored.
Emit = Callable[[Event], Awaitable[object]]

MIN_INTERVAL_SECONDS: Final = 1.0
MAX_DELAY_SECONDS: Final = 100 * 366 * 86400.0
# How far in the past `at` may be before it is refused as a mistake rather than fired at once.
PAST_TOLERANCE_SECONDS: Final = 60.0
# While running, a fire this much behind schedule counts as missed (the machine slept).
LATE_AFTER_SECONDS: Final = 60.0
# Missed cron occurrences are counted one by one up to this many; beyond it the count is a floor.
MISSED_COUNT_LIMIT: Final = 1000
EXAMPLE_AT: Final = "2025-06-02T09:00:00+02:00"


def new_timer_id() -> str:
    return "tmr_" + uuid.uuid4().hex[:12]


class InvalidTimer(UserError):
    """A timer's schedule or arguments are invalid; the message names the value and the fix."""


class UnknownTimer(UserError):
    """No active timer has the given id (in the given session)."""


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
            "next_fire": _iso(self.next_fire) if self.next_fire else None,
            "missed": self.missed,
            "active": self.active,
            "fire_count": self.fire_count,
        }
        if self.kind == "cron" and self.next_fire is not None and self.timezone:
            out["next_fire_local"] = self.next_fire.astimezone(ZoneInfo(self.timezone)).isoformat()
        if self.last_fired_at is not None:
            out["last_fired_at"] = _iso(self.last_fired_at)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "session": self.session,
            "note": self.note,
            "kind": self.kind,
            "next_fire": _iso(self.next_fire) if self.next_fire else None,
            "active": self.active,
            "missed": self.missed,
            "every_seconds": self.every_seconds,
            "anchor": _iso(self.anchor) if self.anchor else None,
            "cron": self.cron,
            "timezone": self.timezone,
            "created_at": _iso(self.created_at),
            "last_fired_at": _iso(self.last_fired_at) if self.last_fired_at else None,
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


def _iso(when: datetime) -> str:
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


def _due_occurrences(record: TimerRecord, first: datetime, now: datetime) -> tuple[int, datetime]:
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


# --- the service ---------------------------------------------------------------------------------


class TimerService:
    """Keeps every timer, sleeps until the earliest is due, and emits its `timer.trigger` event.

    Timers wait in a heap ordered by next fire time, so ten thousand of them cost one comparison
    per wake-up, and a new timer earlier than the current wait wakes the loop at once. With a
    store, timers are saved on every change and reloaded by :meth:`run`. Delivery is
    at-least-once: a fire is emitted before the timer's new state is saved, so a crash between the
    two repeats the fire (marked late) rather than losing it.

    A fire is *late* when the runtime was down at its time, or when it comes more than
    `late_after_seconds` behind schedule (the machine slept). Only a late fire reports a non-zero
    `late_by_seconds`, and only a late fire is dropped by the `skip` policy.
    """

    def __init__(
        self,
        store: Store | None,
        emit: Emit,
        *,
        clock: Clock | None = None,
        late_after_seconds: float = LATE_AFTER_SECONDS,
    ) -> None:
        self._store = store
        self._emit = emit
        self.clock: Clock = clock or SystemClock()
        self._late_after = late_after_seconds
        self._timers: dict[str, TimerRecord] = {}
        self._heap: list[tuple[datetime, int, str]] = []
        self._heap_seq: dict[str, int] = {}
        self._counter = itertools.count()
        self._missed_at_start: set[str] = set()
        self._sleep_scope: anyio.CancelScope | None = None
        self._sleep_target: datetime | None = None
        self._running = False

    # -- the loop --

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Load stored timers, then fire timers as they come due, until cancelled.

        Reports started (for `task_group.start`) once the stored timers are loaded; timers that
        came due while the runtime was down fire (or are skipped) right after that.
        """
        if self._running:
            raise UserError(
                "TimerService.run() is already running; start it once, in the runtime's task group."
            )
        self._running = True
        try:
            await self._load()
            task_status.started()
            while True:
                await self._fire_due()
                target = self._heap[0][0] if self._heap else None
                with anyio.CancelScope() as scope:
                    self._sleep_scope, self._sleep_target = scope, target
                    if target is None:
                        await anyio.sleep_forever()
                    else:
                        await self.clock.sleep_until(target)
                self._sleep_scope = self._sleep_target = None
        finally:
            self._running = False
            self._sleep_scope = self._sleep_target = None

    async def _load(self) -> None:
        if self._store is None:
            return
        now = self.clock.now()
        for record in await self._store.timers(active_only=True):
            if record.id in self._timers:
                continue
            self._timers[record.id] = record
            self._push(record)
            if record.next_fire is not None and record.next_fire <= now:
                self._missed_at_start.add(record.id)
        if self._missed_at_start:
            log.info("%d timer(s) came due while the runtime was down", len(self._missed_at_start))

    async def _fire_due(self) -> None:
        now = self.clock.now()
        changed: list[TimerRecord] = []
        while self._heap and self._heap[0][0] <= now:
            when, seq, timer_id = heapq.heappop(self._heap)
            record = self._timers.get(timer_id)
            if record is None or self._heap_seq.get(timer_id) != seq:
                continue  # cancelled or rescheduled since this entry was pushed
            event = self._advance(record, when, now)
            changed.append(record)
            if event is not None:
                await self._emit(event)
        # A timer cancelled while an event was being emitted must not be saved back.
        changed = [r for r in changed if not r.active or self._timers.get(r.id) is r]
        if changed and self._store is not None:
            await self._store.save_timers(changed)

    def _advance(self, record: TimerRecord, scheduled: datetime, now: datetime) -> Event | None:
        """Move a due timer to its next occurrence; return the event to emit, if any."""
        count, latest = _due_occurrences(record, scheduled, now)
        lateness = (now - latest).total_seconds()
        late = record.id in self._missed_at_start or lateness > self._late_after
        self._missed_at_start.discard(record.id)
        following = next_occurrence(record, now)
        record.next_fire = following
        if following is None:
            record.active = False
            del self._timers[record.id]
            self._heap_seq.pop(record.id, None)
        else:
            self._push(record)
        if late and record.missed == "skip":
            log.info(
                "timer %s skipped %d missed occurrence(s) (policy skip); next: %s",
                record.id,
                count,
                following,
            )
            return None
        record.last_fired_at = now
        record.fire_count += 1
        context: dict[str, Any] = {
            "timer_id": record.id,
            "scheduled_for": _iso(latest),
            "fired_at": _iso(now),
            "late": late,
            # Within the grace period a fire counts as on time and reports no lateness.
            "late_by_seconds": round(lateness, 3) if late else 0.0,
            "occurrences": count,
            "schedule": record.schedule,
            "next_fire": _iso(following) if following else None,
        }
        if count > 1:
            context["first_missed_at"] = _iso(scheduled)
        if count >= MISSED_COUNT_LIMIT and record.kind == "cron":
            context["occurrences_at_least"] = True
        return Event(
            ts=now,
            kind=TIMER_TRIGGER,
            source=Source(type="system", id=record.id),
            channel="timer",
            content=record.note,
            context=context,
            session=record.session,
        )

    def _push(self, record: TimerRecord) -> None:
        assert record.next_fire is not None
        seq = next(self._counter)
        self._heap_seq[record.id] = seq
        heapq.heappush(self._heap, (record.next_fire, seq, record.id))
        if self._sleep_scope is not None and (
            self._sleep_target is None or record.next_fire < self._sleep_target
        ):
            self._sleep_scope.cancel()

    def _compact(self) -> None:
        if len(self._heap) > 2 * len(self._timers) + 64:
            self._heap = [e for e in self._heap if self._heap_seq.get(e[2]) == e[1]]
            heapq.heapify(self._heap)

    # -- the API the tools use --

    def build_timer(
        self,
        *,
        session: str,
        note: str,
        at: datetime | str | None = None,
        delay_seconds: float | None = None,
        every_seconds: float | None = None,
        cron: str | None = None,
        timezone: str | None = None,
        missed: MissedPolicy = "fire_once",
    ) -> TimerRecord:
        """Validate a timer's arguments and return its record, without scheduling it."""
        now = self.clock.now()
        if not note.strip():
            raise InvalidTimer(
                "The timer's note is empty. Write what you want to be reminded of, e.g. "
                "'Check whether the nightly build passed'."
            )
        if not session:
            raise InvalidTimer("The timer needs a session to wake, e.g. session='main'.")
        if missed not in get_args(MissedPolicy):
            raise InvalidTimer(f"`missed` must be 'fire_once' or 'skip', got {missed!r}.")

        def make(
            kind: TimerKind,
            first: datetime,
            *,
            every: float | None = None,
            expression: str | None = None,
            zone: str | None = None,
        ) -> TimerRecord:
            return TimerRecord(
                id=new_timer_id(),
                session=session,
                note=note,
                kind=kind,
                next_fire=first,
                missed=missed,
                every_seconds=every,
                anchor=first if every is not None else None,
                cron=expression,
                timezone=zone,
                created_at=now,
            )

        if cron is not None:
            if at is not None or delay_seconds is not None or every_seconds is not None:
                raise InvalidTimer(
                    "`cron` cannot be combined with `at`, `delay_seconds` or `every_seconds`: "
                    "a cron timer's times come from its expression. Set one kind of timer per call."
                )
            if timezone is None:
                raise InvalidTimer(
                    f"The cron timer {cron!r} needs a `timezone` (an IANA name such as "
                    "'Europe/Paris'); pass 'UTC' if you mean UTC."
                )
            expression = cron.strip()
            first = check_cron(expression, parse_timezone(timezone), now)
            return make("cron", first, expression=expression, zone=timezone)
        if timezone is not None:
            raise InvalidTimer(
                f"`timezone` ({timezone!r}) only applies to `cron`. For `at`, put the offset in "
                f"the time itself, e.g. {EXAMPLE_AT!r}."
            )
        if at is not None and delay_seconds is not None:
            raise InvalidTimer(
                "Give either `at` or `delay_seconds`, not both: they both say when the timer "
                "first fires."
            )
        if every_seconds is not None:
            _check_seconds("every_seconds", every_seconds, minimum=MIN_INTERVAL_SECONDS)
        first_fire: datetime
        if at is not None:
            first_fire = self._check_at(at, now)
        elif delay_seconds is not None:
            _check_seconds("delay_seconds", delay_seconds, minimum=0.0)
            first_fire = now + timedelta(seconds=delay_seconds)
        elif every_seconds is not None:
            first_fire = now + timedelta(seconds=every_seconds)
        else:
            raise InvalidTimer(
                "Say when the timer fires: give `at` (an RFC 3339 time), `delay_seconds`, "
                "`every_seconds` or `cron` with `timezone`."
            )
        if every_seconds is not None:
            return make("every", first_fire, every=every_seconds)
        return make("once", first_fire)

    @staticmethod
    def _check_at(at: datetime | str, now: datetime) -> datetime:
        if isinstance(at, str):
            when = parse_rfc3339(at)
        elif at.tzinfo is None or at.utcoffset() is None:
            raise InvalidTimer(
                f"`at` must include a timezone, got the naive datetime {at.isoformat()}; pass "
                "e.g. datetime(2025, 6, 2, 9, tzinfo=ZoneInfo('Europe/Paris'))."
            )
        else:
            when = at.astimezone(UTC)
        if (now - when).total_seconds() > PAST_TOLERANCE_SECONDS:
            raise InvalidTimer(
                f"`at` ({_iso(when)}) is in the past; it is now {_iso(now)}. Give a future time "
                "(check the date and the offset), or delay_seconds=0 to fire right away."
            )
        return when

    async def set_timer(
        self,
        *,
        session: str,
        note: str,
        at: datetime | str | None = None,
        delay_seconds: float | None = None,
        every_seconds: float | None = None,
        cron: str | None = None,
        timezone: str | None = None,
        missed: MissedPolicy = "fire_once",
    ) -> TimerRecord:
        """Validate, save and schedule a timer; InvalidTimer explains any bad argument."""
        record = self.build_timer(
            session=session,
            note=note,
            at=at,
            delay_seconds=delay_seconds,
            every_seconds=every_seconds,
            cron=cron,
            timezone=timezone,
            missed=missed,
        )
        if self._store is not None:
            await self._store.save_timer(record)
        self._timers[record.id] = record
        self._push(record)
        return record

    async def cancel_timer(self, timer_id: str, *, session: str | None = None) -> TimerRecord:
        """Cancel an active timer (in `session`, if given) and return its final record."""
        record = self._timers.get(timer_id)
        if record is None or (session is not None and record.session != session):
            where = f" in session {session!r}" if session is not None else ""
            raise UnknownTimer(
                f"No active timer {timer_id!r}{where}; it may have fired already or been "
                "cancelled. Call list_timers to see the active ones."
            )
        if self._store is not None:
            await self._store.delete_timer(timer_id)
        del self._timers[timer_id]
        self._heap_seq.pop(timer_id, None)
        self._compact()
        record.active = False
        return record

    def list_timers(self, session: str | None = None) -> list[TimerRecord]:
        """Active timers (of one session, or all), soonest first."""
        found = [t for t in self._timers.values() if session is None or t.session == session]
        return sorted(found, key=lambda t: (t.next_fire or datetime.max.replace(tzinfo=UTC), t.id))

    def get(self, timer_id: str) -> TimerRecord | None:
        return self._timers.get(timer_id)


def _check_seconds(name: str, value: float, *, minimum: float) -> None:
    if not math.isfinite(value) or value < minimum or value > MAX_DELAY_SECONDS:
        raise InvalidTimer(
            f"`{name}` must be a number of seconds from {minimum:g} to {MAX_DELAY_SECONDS:.0f}, "
            f"got {value!r}. For example 3600 for one hour."
        )


# --- the tools -----------------------------------------------------------------------------------


def _service(ctx: ToolContext, tool_name: str) -> TimerService:
    timers = ctx.services.timers
    if timers is None:
        raise ToolError(
            f"Timers are not enabled in this runtime, so {tool_name} cannot work. Do the work "
            "now, or tell the user that reminders need timers enabled in the configuration."
        )
    return timers


@tool(  # `tool` returns Any
    examples=(
        {"note": "Check whether the nightly build passed and tell the user", "delay_seconds": 1800},
        {
            "note": "Send the user the weekly summary",
            "cron": "0 9 * * 5",
            "timezone": "Europe/Paris",
        },
        {"note": "Remind the user of the dentist at 10:00", "at": EXAMPLE_AT, "missed": "skip"},
    ),
)
async def set_timer(
    ctx: ToolContext,
    note: Annotated[
        str,
        Field(
            min_length=1,
            description="What you want to be told when the timer fires; it comes back to you as "
            "the event text, e.g. 'Check whether the nightly build passed and tell the user'.",
        ),
    ],
    at: Annotated[
        str | None,
        Field(
            description="When to fire once, as an RFC 3339 time with a timezone offset, e.g. "
            f"'{EXAMPLE_AT}' or '2025-06-02T07:00:00Z'. With every_seconds: the first fire.",
        ),
    ] = None,
    delay_seconds: Annotated[
        float | None,
        Field(
            ge=0,
            description="Fire after this many seconds instead of at a time, e.g. 1800 for "
            "half an hour. With every_seconds: the delay before the first fire.",
        ),
    ] = None,
    every_seconds: Annotated[
        float | None,
        Field(
            ge=MIN_INTERVAL_SECONDS,
            description="Repeat every this many seconds (at least 1), e.g. "
            "3600 for hourly. The first fire is at `at`, after `delay_seconds`, or one interval "
            "from now.",
        ),
    ] = None,
    cron: Annotated[
        str | None,
        Field(
            description="A five-field cron schedule (minute hour day-of-month month "
            "day-of-week), e.g. '0 9 * * 5' for Fridays at 09:00. Needs `timezone`; not combined "
            "with the others.",
        ),
    ] = None,
    timezone: Annotated[
        str | None,
        Field(
            description="The IANA timezone the cron schedule is read in, e.g. 'Europe/Paris' or "
            "'UTC'. Only for `cron`.",
        ),
    ] = None,
    missed: Annotated[
        MissedPolicy,
        Field(
            description="What to do if the runtime was not running when the timer was due: "
            "'fire_once' (fire one late event, however many times it was missed) or 'skip' (stay "
            "quiet and wait for the next time), e.g. 'skip' for a reminder that is useless late.",
        ),
    ] = "fire_once",
) -> dict[str, Any]:
    """Set a timer that wakes you later with your own note, as a [TIMER <timer_id>] event.

    Use it to come back to something later: check on a long job, remind the user at a given
    time, or do recurring work every N seconds or on a cron schedule in a timezone. Give one of
    `at`, `delay_seconds` or `cron` (`every_seconds` may replace or accompany `at`/`delay_seconds`).
    It cannot do anything by itself when it fires: it only wakes you with the note, and you then
    decide what to do. It is precise to about a second; intervals are at least 1 second. If the
    runtime was down when a timer was due, it fires once when the runtime is back (marked late),
    never once per missed occurrence, or not at all with missed='skip'.
    Returns {"timer_id": "tmr_…", "note": …, "schedule": "once" | "every 1h" | "cron '…' in …",
    "next_fire": "<UTC RFC 3339 time>", "missed": …, "active": true, "fire_count": 0}.
    Cost: free and instant, no model or network call. Cancel it with cancel_timer.
    """
    service = _service(ctx, "set_timer")
    try:
        record = await service.set_timer(
            session=ctx.session,
            note=note,
            at=at,
            delay_seconds=delay_seconds,
            every_seconds=every_seconds,
            cron=cron,
            timezone=timezone,
            missed=missed,
        )
    except InvalidTimer as exc:
        raise ToolError(str(exc)) from exc
    return record.summary()


@tool(
    annotations=ToolAnnotations(destructive=True, idempotent=True),
    examples=({"timer_id": "tmr_3f9a1c2b7d4e"},),
)
async def cancel_timer(
    ctx: ToolContext,
    timer_id: Annotated[
        str,
        Field(
            min_length=1,
            description="The id set_timer or list_timers gave, e.g. 'tmr_3f9a1c2b7d4e'.",
        ),
    ],
) -> dict[str, Any]:
    """Cancel one of your active timers so that it never fires again.

    Use it when a reminder or a recurring timer is no longer needed. It cannot cancel a timer of
    another session, undo a fire that already happened, or pause a timer (cancel it and set a new
    one). Returns {"cancelled": "<timer_id>", "note": …, "schedule": …}. Cost: free and instant.
    """
    service = _service(ctx, "cancel_timer")
    try:
        record = await service.cancel_timer(timer_id, session=ctx.session)
    except UnknownTimer as exc:
        raise ToolError(str(exc)) from exc
    return {"cancelled": record.id, "note": record.note, "schedule": record.schedule}


@tool(annotations=ToolAnnotations(read_only=True, idempotent=True), examples=({},))
async def list_timers(ctx: ToolContext) -> dict[str, Any]:
    """List your active timers, soonest first.

    Use it to check what you have scheduled, or to find a timer_id for cancel_timer. It shows
    only this session's timers that have not finished; fired one-shot timers are gone.
    Returns {"count": 2, "timers": [{"timer_id": "tmr_…", "note": …, "schedule": …,
    "next_fire": "<UTC RFC 3339 time>", "missed": …, "active": true, "fire_count": 3}, …]}.
    Cost: free and instant.
    """
    service = _service(ctx, "list_timers")
    records = service.list_timers(ctx.session)
    return {"count": len(records), "timers": [r.summary() for r in records]}


TIMER_TOOLS: Final[tuple[Tool, ...]] = (set_timer, cancel_timer, list_timers)
