"""Timers: notes an agent leaves for its future self, delivered as `timer.trigger` events.

A timer fires once (at an RFC 3339 time, or after a delay), every N seconds, or on a cron
schedule in an IANA timezone. Timers are kept in the store and survive a restart.

The rule for occurrences nobody was there to see (the runtime was down, the machine slept) is the
point of this module: a timer never fires once per missed occurrence. With the `fire_once` policy
it fires a single late event that says how late it is and how many occurrences it stands for;
with `skip` it stays quiet. Either way it then moves to its next occurrence *on its schedule*,
computed from the schedule's anchor and never from the moment it happened to fire, so recurring
timers do not drift.

This module holds :class:`TimerService`, which applies that rule. The timer record and the maths
of its schedule are in :mod:`.timer_schedules`; the tools an agent calls are in :mod:`.timer_tools`.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import math
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Final, get_args

import anyio
from anyio.abc import TaskStatus

from ..clock import Clock, SystemClock
from ..core.channel import ChannelHealth
from ..errors import UserError
from ..events import TIMER_TRIGGER, Event, Source
from .timer_schedules import (
    EXAMPLE_AT,
    MISSED_COUNT_LIMIT,
    InvalidTimer,
    MissedPolicy,
    TimerKind,
    TimerRecord,
    check_cron,
    due_occurrences,
    iso_utc,
    new_timer_id,
    next_occurrence,
    parse_rfc3339,
    parse_timezone,
)

if TYPE_CHECKING:
    from ..store.sqlite import Store

__all__ = [
    "InvalidTimer",
    "MissedPolicy",
    "TimerKind",
    "TimerRecord",
    "TimerService",
    "UnknownTimer",
    "next_occurrence",
]

log = logging.getLogger(__name__)

# What the service calls with each fire; whatever it returns is ignored.
Emit = Callable[[Event], Awaitable[object]]

MIN_INTERVAL_SECONDS: Final = 1.0
MAX_DELAY_SECONDS: Final = 100 * 366 * 86400.0
# How far in the past `at` may be before it is refused as a mistake rather than fired at once.
PAST_TOLERANCE_SECONDS: Final = 60.0
# While running, a fire this much behind schedule counts as missed (the machine slept).
LATE_AFTER_SECONDS: Final = 60.0


class UnknownTimer(UserError):
    """No active timer has the given id (in the given session)."""


class TimerService:
    """Keeps every timer, sleeps until the earliest is due, and emits its `timer.trigger` event.

    Timers wait in a heap ordered by next fire time, so ten thousand of them cost one comparison
    per wake-up, and a new timer earlier than the current wait wakes the loop at once. With a
    store, timers are saved on every change and reloaded by :meth:`load`.

    With a store, a timer fires exactly once per occurrence, across restarts and kills: the fire
    events of one moment and the timers' advance are stored in one transaction
    (:meth:`Store.record_timer_fires`) *before* `emit` sees them, so `emit` must hand them on
    without storing them again. A crash before that commit fires the timers again at the next
    start (late); a crash after it leaves the fires pending in the store, for the runtime's
    recovery to deliver. Without a store, `emit` gets the events as they fire.

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
        self._loaded = False

    name = "timers"

    def health(self) -> ChannelHealth:
        """Running (with how many timers wait and when the next fires) once started."""
        if not self._running:
            return ChannelHealth("stopped", "not started")
        waiting = sum(1 for record in self._timers.values() if record.active)
        detail = f"{waiting} timer{'s' if waiting != 1 else ''} waiting"
        if self._heap:
            detail += f"; the next fires at {self._heap[0][0].isoformat()}"
        return ChannelHealth("running", detail)

    # -- the loop --

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Load stored timers (unless :meth:`load` did), then fire timers as they come due,
        until cancelled.

        Reports started (for `task_group.start`) once the stored timers are loaded; timers that
        came due while the runtime was down fire (or are skipped) right after that.
        """
        if self._running:
            raise UserError(
                "TimerService.run() is already running; start it once, in the runtime's task group."
            )
        self._running = True
        try:
            await self.load()
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

    async def load(self) -> None:
        """Load the stored timers without firing any, so that the timer tools see them before
        :meth:`run` starts firing (the runtime does this before its recovery). Loads once."""
        if self._loaded or self._store is None:
            return
        self._loaded = True
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
        events: list[Event] = []
        while self._heap and self._heap[0][0] <= now:
            when, seq, timer_id = heapq.heappop(self._heap)
            record = self._timers.get(timer_id)
            if record is None or self._heap_seq.get(timer_id) != seq:
                continue  # cancelled or rescheduled since this entry was pushed
            event = self._advance(record, when, now)
            changed.append(record)
            if event is not None:
                events.append(event)
        if self._store is not None and changed:
            # The fires and the advance in one commit: a kill cannot separate them. Nothing can
            # cancel these timers before the write is queued (no await in between), so a
            # cancellation's deletion is applied after it and is not undone.
            await self._store.record_timer_fires(events, changed)
        # One by one: each is stored already, and handing an event on is quick.
        for event in events:
            await self._emit(event)

    def _advance(self, record: TimerRecord, scheduled: datetime, now: datetime) -> Event | None:
        """Move a due timer to its next occurrence; return the event to emit, if any."""
        count, latest = due_occurrences(record, scheduled, now)
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
            "scheduled_for": iso_utc(latest),
            "fired_at": iso_utc(now),
            "late": late,
            # Within the grace period a fire counts as on time and reports no lateness.
            "late_by_seconds": round(lateness, 3) if late else 0.0,
            "occurrences": count,
            "schedule": record.schedule,
            "next_fire": iso_utc(following) if following else None,
        }
        if count > 1:
            context["first_missed_at"] = iso_utc(scheduled)
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
                f"`at` ({iso_utc(when)}) is in the past; it is now {iso_utc(now)}. Give a future "
                "time (check the date and the offset), or delay_seconds=0 to fire right away."
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
