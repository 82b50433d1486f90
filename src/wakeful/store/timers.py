"""The timers table: every timer's schedule and state, and the recording of their fires.

Due timers are fired through :meth:`SqliteTimers.claim_due`: the due timers are read, judged and
written back with their fires in one writer transaction, so what fires is what the file says is
due, whichever process sharing the file claims first."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from functools import partial
from typing import Final

from ..core.records import TimerRecord
from ..errors import UserError
from ..events import Event
from .access import StoreAccess
from .events import INSERT_EVENT, event_row, utc_key
from .rows import decode_row, timer_from_json, timer_row

__all__ = ["FireDecision", "SqliteTimers", "check_decision"]

# What :meth:`SqliteTimers.claim_due` asks of its caller: given the due timers it claimed and the
# time they are judged at, the fire events to store and the timers' new state.
FireDecision = Callable[
    [Sequence[TimerRecord], datetime], tuple[Sequence[Event], Sequence[TimerRecord]]
]

_UPSERT_TIMER: Final = (
    "INSERT INTO timers (id, session, active, next_fire, data) VALUES (?, ?, ?, ?, ?) "
    "ON CONFLICT (id) DO UPDATE SET session = excluded.session, "
    "active = excluded.active, next_fire = excluded.next_fire, data = excluded.data"
)


class SqliteTimers:
    """The :class:`~wakeful.core.repositories.TimerRepository` of a SQLite store."""

    def __init__(self, access: StoreAccess) -> None:
        self._access = access

    async def save(self, record: TimerRecord) -> None:
        await self.save_many([record])

    async def save_many(self, records: Sequence[TimerRecord]) -> None:
        rows = [_timer_row(r) for r in records]

        def apply(conn: sqlite3.Connection) -> None:
            conn.executemany(_UPSERT_TIMER, rows)

        await self._access.write_kept(apply, f"{len(rows)} timer(s)")

    async def record_fires(self, fires: Sequence[Event], timers: Sequence[TimerRecord]) -> None:
        events = [event_row(e, "pending") for e in fires]
        rows = [_timer_row(r) for r in timers]

        def apply(conn: sqlite3.Connection) -> None:
            conn.executemany(INSERT_EVENT, events)
            conn.executemany(_UPSERT_TIMER, rows)

        await self._access.write_kept(
            apply, f"{len(events)} timer fire(s) and {len(rows)} timer(s)"
        )

    async def claim_due(
        self, decide: FireDecision, *, limit: int = 100, now: datetime | None = None
    ) -> list[Event]:
        """Fire up to `limit` due timers (active, `next_fire` at or before `now`, by default the
        system clock) and return the fire events stored.

        In one writer transaction (``BEGIN IMMEDIATE``, so another process on the file waits):
        read the due timers, call ``decide(timers, now)`` (on the writer thread: it must be
        quick and must not touch the store), then store its fire events as pending and the
        timers' new state. A timer it leaves due is claimed again at the next call.

        Not a kept write: on a full disk it fails with StoreFull and nothing fires, rather than
        fires held in memory that a kill would lose; the caller claims again later.
        """
        if limit < 1:
            raise UserError(f"limit must be at least 1, got {limit}.")
        judged_at = (now or datetime.now(UTC)).astimezone(UTC)
        path = self._access.path

        def apply(conn: sqlite3.Connection) -> list[Event]:
            rows = conn.execute(
                "SELECT id, data FROM timers WHERE active = 1 AND next_fire <= ? "
                "ORDER BY next_fire, rowid LIMIT ?",
                (utc_key(judged_at), limit),
            ).fetchall()
            claimed = [
                decode_row(path, f"timer {timer_id}", partial(timer_from_json, data))
                for timer_id, data in rows
            ]
            if not claimed:
                return []
            fires, changed = decide(claimed, judged_at)
            check_decision(claimed, changed)
            events = list(fires)
            conn.executemany(INSERT_EVENT, [event_row(e, "pending") for e in events])
            conn.executemany(_UPSERT_TIMER, [_timer_row(r) for r in changed])
            return events

        return await self._access.write(apply, "the fires of due timers")

    async def delete(self, timer_id: str) -> bool:
        def apply(conn: sqlite3.Connection) -> bool:
            return conn.execute("DELETE FROM timers WHERE id = ?", (timer_id,)).rowcount > 0

        return await self._access.write(apply, f"the deletion of timer {timer_id}")

    async def find(
        self, session: str | None = None, *, active_only: bool = False
    ) -> list[TimerRecord]:
        reader = self._access.reader
        return await self._access.read(partial(reader.timers, session, active_only=active_only))


def check_decision(claimed: Sequence[TimerRecord], changed: Sequence[TimerRecord]) -> None:
    """Refuse (UserError) a fire decision that changed a timer its claim did not take."""
    ids = {record.id for record in claimed}
    strays = sorted(r.id for r in changed if r.id not in ids)
    if strays:
        raise UserError(
            f"The fire decision changed timer {strays[0]}, which this claim did not take; "
            "return only (some of) the timers it was given. Nothing was saved."
        )


def _timer_row(record: TimerRecord) -> tuple[str, str, bool, str | None, str]:
    return timer_row(record, utc_key(record.next_fire))
