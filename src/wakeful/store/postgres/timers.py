"""The timers table on PostgreSQL: every timer's schedule and state, and the recording of their
fires; the same semantics as :class:`wakeful.store.timers.SqliteTimers`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from functools import partial
from typing import Final

from ...core.records import TimerRecord
from ...events import Event
from ..reader import timer_from_json
from .access import Connection, PostgresAccess, decode_row
from .events import insert_events

__all__ = ["PostgresTimers"]

_UPSERT_TIMER: Final = (
    "INSERT INTO timers (id, session, active, next_fire, data) VALUES (%s, %s, %s, %s, %s) "
    "ON CONFLICT (id) DO UPDATE SET session = excluded.session, "
    "active = excluded.active, next_fire = excluded.next_fire, data = excluded.data"
)


class PostgresTimers:
    """The :class:`~wakeful.core.repositories.TimerRepository` of a PostgreSQL store."""

    def __init__(self, access: PostgresAccess) -> None:
        self._access = access

    async def save(self, record: TimerRecord) -> None:
        await self.save_many([record])

    async def save_many(self, records: Sequence[TimerRecord]) -> None:
        rows = [_timer_row(r) for r in records]

        async def apply(conn: Connection) -> None:
            async with conn.cursor() as cursor:
                await cursor.executemany(_UPSERT_TIMER, rows)

        await self._access.write(apply, f"{len(rows)} timer(s)")

    async def record_fires(self, fires: Sequence[Event], timers: Sequence[TimerRecord]) -> None:
        events = list(fires)
        rows = [_timer_row(r) for r in timers]

        async def apply(conn: Connection) -> None:
            await insert_events(conn, events, "pending", self._access.where)
            async with conn.cursor() as cursor:
                await cursor.executemany(_UPSERT_TIMER, rows)

        await self._access.write(apply, f"{len(events)} timer fire(s) and {len(rows)} timer(s)")

    async def delete(self, timer_id: str) -> bool:
        async def apply(conn: Connection) -> bool:
            cursor = await conn.execute("DELETE FROM timers WHERE id = %s", (timer_id,))
            return cursor.rowcount > 0

        return await self._access.write(apply, f"the deletion of timer {timer_id}")

    async def find(
        self, session: str | None = None, *, active_only: bool = False
    ) -> list[TimerRecord]:
        where: list[str] = []
        params: list[object] = []
        if session is not None:
            where.append("session = %s")
            params.append(session)
        if active_only:
            where.append("active")
        clause = f" WHERE {' AND '.join(where)}" if where else ""
        rows = await self._access.read(
            f"SELECT id, data FROM timers{clause} "
            "ORDER BY active DESC, next_fire IS NULL, next_fire, seq",
            params,
        )
        return [
            decode_row(self._access.where, f"timer {timer_id}", partial(timer_from_json, data))
            for timer_id, data in rows
        ]


def _timer_row(record: TimerRecord) -> tuple[str, str, bool, datetime | None, str]:
    return (
        record.id,
        record.session,
        record.active,
        # As the SQLite store reads it: a naive time is local time.
        record.next_fire.astimezone(UTC) if record.next_fire else None,
        json.dumps(record.to_dict()),
    )
