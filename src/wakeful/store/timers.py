"""The timers table: every timer's schedule and state, and the recording of their fires."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from functools import partial
from typing import Final

from ..core.records import TimerRecord
from ..events import Event
from .access import StoreAccess
from .events import INSERT_EVENT, event_row, utc_key

__all__ = ["SqliteTimers"]

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

    async def delete(self, timer_id: str) -> bool:
        def apply(conn: sqlite3.Connection) -> bool:
            return conn.execute("DELETE FROM timers WHERE id = ?", (timer_id,)).rowcount > 0

        return await self._access.write(apply, f"the deletion of timer {timer_id}")

    async def find(
        self, session: str | None = None, *, active_only: bool = False
    ) -> list[TimerRecord]:
        reader = self._access.reader
        return await self._access.read(partial(reader.timers, session, active_only=active_only))


def _timer_row(record: TimerRecord) -> tuple[str, str, int, str | None, str]:
    return (
        record.id,
        record.session,
        int(record.active),
        utc_key(record.next_fire),
        json.dumps(record.to_dict()),
    )
