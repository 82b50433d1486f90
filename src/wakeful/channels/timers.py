"""Timers: notes an agent leaves for its future self, delivered as `timer.trigger` events.

A timer fires once (at an RFC 3339 time, or after a delay), every N seconds, or on a cron
schedule in an IANA timezone. Timers are kept in the store and survive a restart.

The rule for occurrences nobody was there to see (the runtime was down, the machine slept) is the
point of this module: a timer never fires once per missed occurrence. With the `fire_once` policy
it fires a single late event that says how late it is and how many occurrences it stands for;
with `skip` it stays quiet. Either way it then moves to its next occurrence *on its schedule*,
computed from the schedule's anchor and never from the moment it happened to fire, so recurring
timers do not drift.

This module holds that rule, :func:`fire_due_timers` (a pure function of the due timers and the
time), and :class:`TimerService`, which wakes up when a timer is due and has the store fire what
is due by that rule. The timer record and the maths of its schedule are in
:mod:`.timer_schedules`; the tools an agent calls are in :mod:`.timer_tools`.
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
import logging
import math
from collections.abc import Awaitable, Callable, Collection, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Final, get_args

import anyio
from anyio.abc import TaskStatus

from ..clock import Clock, SystemClock
from ..core.channel import ChannelHealth
from ..errors import StoreError, UserError
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
    from ..core.runtime_store import RuntimeStore

__all__ = [
    "InvalidTimer",
    "MissedPolicy",
    "TimerKind",
    "TimerRecord",
    "TimerService",
    "UnknownTimer",
    "fire_due_timers",
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
# At most this many due timers are fired per store transaction (a burst fires in several).
CLAIM_LIMIT: Final = 500
# After a claim failed (the store unreachable, its disk full), or found a timer another worker is
# firing at that moment, the timers are looked at again this much later.
RETRY_SECONDS: Final = 1.0


class UnknownTimer(UserError):
    """No active timer has the given id (in the given session)."""


class TimerService:
    """Keeps every timer, sleeps until the earliest is due, and emits its `timer.trigger` event.

    Timers wait in a heap ordered by next fire time, so ten thousand of them cost one comparison
    per wake-up, and a new timer earlier than the current wait wakes the loop at once. With a
    store, timers are saved on every change and reloaded by :meth:`load`.

    With a store, the heap only says *when* to wake up; the store says *what* fires: the service
    asks it to claim the due timers (:meth:`TimerRepository.claim_due`), which reads them as
    stored, decides their fires with :func:`fire_due_timers` and stores the fires and the
    timers' advance in one transaction *before* `emit` sees them, so `emit` must hand them on
    without storing them again. So a timer fires exactly once per occurrence, across restarts
    and kills, and across workers sharing one store: a timer another worker fired or cancelled
    is not fired again, and this service's copy of it is refreshed from the store. A crash before
    the commit fires the timers again at the next start (late); a crash after it leaves the fires
    pending in the store, for the runtime's recovery to deliver. Without a store, `emit` gets the
    events as they fire.

    With `poll_seconds`, the service also claims every that many seconds, so that timers set
    through another worker (which this one never saw) fire even when that worker is gone. Each
    claim fires at most `claim_limit` timers, then hands their events on before the next.

    A fire is *late* when the runtime was down at its time, or when it comes more than
    `late_after_seconds` behind schedule (the machine slept). Only a late fire reports a non-zero
    `late_by_seconds`, and only a late fire is dropped by the `skip` policy.
    """

    def __init__(
        self,
        store: RuntimeStore | None,
        emit: Emit,
        *,
        clock: Clock | None = None,
        late_after_seconds: float = LATE_AFTER_SECONDS,
        poll_seconds: float | None = None,
        claim_limit: int = CLAIM_LIMIT,
    ) -> None:
        if poll_seconds is not None and not poll_seconds > 0:
            raise UserError(
                f"poll_seconds must be a positive number of seconds, got {poll_seconds!r}; "
                "leave it None for a store no other worker shares."
            )
        if claim_limit < 1:
            raise UserError(f"claim_limit must be at least 1, got {claim_limit}.")
        self._store = store
        self._claim_limit = claim_limit
        self._emit = emit
        self.clock: Clock = clock or SystemClock()
        self._late_after = late_after_seconds
        self._poll = poll_seconds if store is not None else None
        self._next_poll: datetime | None = None
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
                target = self._wake_target()
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

    def _wake_target(self) -> datetime | None:
        """When the loop wakes next: the earliest timer, or the next poll if sooner."""
        target = self._heap[0][0] if self._heap else None
        if self._next_poll is not None and (target is None or self._next_poll < target):
            return self._next_poll
        return target

    def _pop_due(self, now: datetime) -> dict[str, TimerRecord]:
        """Take the timers due at `now` off the heap."""
        due: dict[str, TimerRecord] = {}
        while self._heap and self._heap[0][0] <= now:
            _, seq, timer_id = heapq.heappop(self._heap)
            record = self._timers.get(timer_id)
            if record is not None and self._heap_seq.get(timer_id) == seq:
                due[timer_id] = record
            # else cancelled or rescheduled since this entry was pushed
        return due

    async def _fire_due(self) -> None:
        now = self.clock.now()
        due = self._pop_due(now)
        if self._store is None:
            events, advanced = fire_due_timers(
                list(due.values()),
                now,
                missed_at_start=self._missed_at_start,
                late_after_seconds=self._late_after,
            )
            self._take(advanced)
            for event in events:
                await self._emit(event)
            return
        polling = self._poll is not None and (self._next_poll is None or self._next_poll <= now)
        if not due and not polling:
            return
        if self._poll is not None:
            self._next_poll = now + timedelta(seconds=self._poll)
        claimed: set[str] = set()
        while True:
            claim = _Claim(frozenset(self._missed_at_start), self._late_after)
            try:
                events = await self._store.timer_records.claim_due(
                    claim, limit=self._claim_limit, now=now
                )
            except StoreError as exc:
                # Nothing of this claim fired; its timers are claimed again later.
                log.warning("could not fire the due timers, trying again: %s", exc)
                self._retry_later([r for r in due.values() if r.id not in claimed], now)
                return
            self._take(claim.decided)
            claimed.update(record.id for record in claim.decided)
            # One by one: each is stored already, and handing an event on is quick.
            for event in events:
                await self._emit(event)
            if len(claim.decided) < self._claim_limit:
                break
        unclaimed = [
            record
            for timer_id, record in due.items()
            if timer_id not in claimed and self._timers.get(timer_id) is record
        ]
        if unclaimed:
            try:
                await self._refresh(unclaimed, now)
            except StoreError as exc:
                log.warning("could not reload timers fired elsewhere, trying again: %s", exc)
                self._retry_later(unclaimed, now)

    def _retry_later(self, records: Sequence[TimerRecord], now: datetime) -> None:
        """Look at these (still kept) timers again in a moment."""
        retry_at = now + timedelta(seconds=RETRY_SECONDS)
        for record in records:
            if self._timers.get(record.id) is record:
                self._push(record, at=retry_at)

    def _take(self, decided: Sequence[TimerRecord]) -> None:
        """Bring this service's timers up to the state decided for them (in place: callers
        hold the records set_timer returned); a timer cancelled here meanwhile stays cancelled,
        and one this service does not keep (set through another worker) is left alone."""
        for fresh in decided:
            self._missed_at_start.discard(fresh.id)
            record = self._timers.get(fresh.id)
            if record is None:
                continue
            _copy_state(fresh, record)
            if record.active:
                self._push(record)
            else:
                del self._timers[record.id]
                self._heap_seq.pop(record.id, None)
        self._compact()

    async def _refresh(self, unclaimed: Sequence[TimerRecord], now: datetime) -> None:
        """Due here but not claimed: another worker fired or cancelled them (or is firing them
        now). Reload them from the store, so they neither fire twice nor linger here."""
        assert self._store is not None
        stored = {r.id: r for r in await self._store.timer_records.find(active_only=True)}
        for record in unclaimed:
            if self._timers.get(record.id) is not record:
                continue  # cancelled here meanwhile
            fresh = stored.get(record.id)
            if fresh is None:
                log.info("timer %s was fired to its end or cancelled elsewhere", record.id)
                del self._timers[record.id]
                self._heap_seq.pop(record.id, None)
                self._missed_at_start.discard(record.id)
                continue
            _copy_state(fresh, record)
            assert record.next_fire is not None
            if record.next_fire <= now:
                # Locked by a worker firing it right now: look again once it has committed.
                self._push(record, at=now + timedelta(seconds=RETRY_SECONDS))
            else:
                self._missed_at_start.discard(record.id)
                self._push(record)
        self._compact()

    def _push(self, record: TimerRecord, *, at: datetime | None = None) -> None:
        """Wake up for `record` at its next fire (or at `at`, to look at it again then)."""
        when = at or record.next_fire
        assert when is not None
        seq = next(self._counter)
        self._heap_seq[record.id] = seq
        heapq.heappush(self._heap, (when, seq, record.id))
        if self._sleep_scope is not None and (
            self._sleep_target is None or when < self._sleep_target
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


def fire_due_timers(
    records: Sequence[TimerRecord],
    now: datetime,
    *,
    missed_at_start: Collection[str] = frozenset(),
    late_after_seconds: float = LATE_AFTER_SECONDS,
) -> tuple[list[Event], list[TimerRecord]]:
    """Fire due timers at `now`: the `timer.trigger` events to store and hand on, and every
    timer's new state (moved to its next occurrence after `now`, or ended). A pure function of
    its arguments (the records given are not changed), so a store can run it inside the
    transaction that claims the timers (:meth:`TimerRepository.claim_due`).

    One event per timer however many occurrences it missed; a late one (its id in
    `missed_at_start`: it came due while the runtime was down, or more than
    `late_after_seconds` behind) says so, and is dropped under the `skip` policy.
    """
    events: list[Event] = []
    advanced: list[TimerRecord] = []
    for record in records:
        following, event = _advance(
            record, now, missed_at_start=record.id in missed_at_start, late_after=late_after_seconds
        )
        advanced.append(following)
        if event is not None:
            events.append(event)
    return events, advanced


def _advance(
    record: TimerRecord, now: datetime, *, missed_at_start: bool, late_after: float
) -> tuple[TimerRecord, Event | None]:
    """A due timer moved to its next occurrence, and the event of its fire, if any."""
    assert record.next_fire is not None, "only active timers come due"
    scheduled = record.next_fire
    count, latest = due_occurrences(record, scheduled, now)
    lateness = (now - latest).total_seconds()
    late = missed_at_start or lateness > late_after
    following = next_occurrence(record, now)
    moved = dataclasses.replace(record, next_fire=following, active=following is not None)
    if late and record.missed == "skip":
        log.info(
            "timer %s skipped %d missed occurrence(s) (policy skip); next: %s",
            record.id,
            count,
            following,
        )
        return moved, None
    moved.last_fired_at = now
    moved.fire_count += 1
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
    event = Event(
        ts=now,
        kind=TIMER_TRIGGER,
        source=Source(type="system", id=record.id),
        channel="timer",
        content=record.note,
        context=context,
        session=record.session,
    )
    return moved, event


@dataclasses.dataclass
class _Claim:
    """The decision handed to one claim of due timers (:func:`fire_due_timers` with the
    service's start-up facts), remembering what it decided for the service to take up. A store
    may run it more than once (a retried transaction): the last run is the one stored."""

    missed_at_start: frozenset[str]
    late_after_seconds: float
    decided: list[TimerRecord] = dataclasses.field(default_factory=list)

    def __call__(
        self, records: Sequence[TimerRecord], now: datetime
    ) -> tuple[list[Event], list[TimerRecord]]:
        events, self.decided = fire_due_timers(
            records,
            now,
            missed_at_start=self.missed_at_start,
            late_after_seconds=self.late_after_seconds,
        )
        return events, self.decided


def _copy_state(source: TimerRecord, target: TimerRecord) -> None:
    for field in dataclasses.fields(TimerRecord):
        setattr(target, field.name, getattr(source, field.name))


def _check_seconds(name: str, value: float, *, minimum: float) -> None:
    if not math.isfinite(value) or value < minimum or value > MAX_DELAY_SECONDS:
        raise InvalidTimer(
            f"`{name}` must be a number of seconds from {minimum:g} to {MAX_DELAY_SECONDS:.0f}, "
            f"got {value!r}. For example 3600 for one hour."
        )
