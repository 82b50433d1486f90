"""The timers table on PostgreSQL: every timer's schedule and state, and the recording of their
fires; the same semantics as :class:`wakeful.store.timers.SqliteTimers`.

With several workers, due timers are fired through :meth:`PostgresTimers.claim_due`: each claim
locks the due timers it takes (``FOR UPDATE SKIP LOCKED``), and records their fires and their new
state in that same transaction, so workers polling together fire each occurrence exactly once.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from functools import partial
from typing import Final

from ...core.records import TimerRecord
from ...errors import UserError
from ...events import Event
from ..rows import decode_row, timer_from_json, timer_list_query, timer_row
from ..timers import FireDecision, check_decision
from .access import Connection, PostgresAccess
from .events import check_fenced_session, insert_events
from .leases import Lease

__all__ = ["FireDecision", "PostgresTimers"]


_UPSERT_TIMER: Final = (
    "INSERT INTO timers (id, session, active, next_fire, data) VALUES (%s, %s, %s, %s, %s) "
    "ON CONFLICT (id) DO UPDATE SET session = excluded.session, "
    "active = excluded.active, next_fire = excluded.next_fire, data = excluded.data"
)


class PostgresTimers:
    """The :class:`~wakeful.core.repositories.TimerRepository` of a PostgreSQL store (or of a
    view of it fenced by `fence`: the lease's session only, each write checked against it)."""

    def __init__(self, access: PostgresAccess, fence: Lease | None = None) -> None:
        self._access = access
        self._fence = fence

    async def save(self, record: TimerRecord) -> None:
        await self.save_many([record])

    async def save_many(self, records: Sequence[TimerRecord]) -> None:
        check_fenced_session(self._fence, (r.session for r in records), "timers")
        rows = [_timer_row(r) for r in records]

        async def apply(conn: Connection) -> None:
            async with conn.cursor() as cursor:
                await cursor.executemany(_UPSERT_TIMER, rows)

        await self._access.write(apply, f"{len(rows)} timer(s)", fence=self._fence)

    async def record_fires(self, fires: Sequence[Event], timers: Sequence[TimerRecord]) -> None:
        events = list(fires)
        check_fenced_session(self._fence, (e.session for e in events), "timer fires")
        check_fenced_session(self._fence, (r.session for r in timers), "timers")
        rows = [_timer_row(r) for r in timers]

        async def apply(conn: Connection) -> None:
            await insert_events(conn, events, "pending", self._access.where)
            async with conn.cursor() as cursor:
                await cursor.executemany(_UPSERT_TIMER, rows)

        await self._access.write(
            apply, f"{len(events)} timer fire(s) and {len(rows)} timer(s)", fence=self._fence
        )

    async def claim_due(
        self, decide: FireDecision, *, limit: int = 100, now: datetime | None = None
    ) -> list[Event]:
        """Fire up to `limit` due timers (active, `next_fire` at or before `now`, by default the
        database's clock) exactly once across workers, and return the fire events stored.

        In one transaction: lock the due timers nobody else is firing (``FOR UPDATE SKIP
        LOCKED``: a worker polling at the same moment takes others, or none), call
        ``decide(timers, now)`` (on the store's writer: it must be quick and must not touch the
        store), then store its fire events as pending and the timers' new state. A timer it
        leaves due is claimed again at the next call. Cluster-wide, so not on a fenced view.
        """
        if self._fence is not None:
            raise UserError(
                "Due timers are claimed for the whole cluster, not for one session: call "
                "claim_due on the store's timer_records, not on a fenced view."
            )
        if limit < 1:
            raise UserError(f"limit must be at least 1, got {limit}.")
        where = self._access.where
        when = now.astimezone(UTC) if now is not None else None

        async def apply(conn: Connection) -> list[Event]:
            judged_at = when
            if judged_at is None:
                cursor = await conn.execute("SELECT clock_timestamp()")
                row = await cursor.fetchone()
                assert row is not None
                judged_at = row[0]
            cursor = await conn.execute(
                "SELECT id, data FROM timers WHERE active AND next_fire <= %s "
                "ORDER BY next_fire, seq LIMIT %s FOR UPDATE SKIP LOCKED",
                (judged_at, limit),
            )
            claimed = [
                decode_row(where, f"timer {timer_id}", partial(timer_from_json, data))
                for timer_id, data in await cursor.fetchall()
            ]
            if not claimed:
                return []
            fires, changed = decide(claimed, judged_at)
            check_decision(claimed, changed)
            events = list(fires)
            await insert_events(conn, events, "pending", where)
            async with conn.cursor() as update:
                await update.executemany(_UPSERT_TIMER, [_timer_row(r) for r in changed])
            return events

        return await self._access.write(apply, "the fires of due timers")

    async def delete(self, timer_id: str) -> bool:
        sql, params = "DELETE FROM timers WHERE id = %s", [timer_id]
        if self._fence is not None:
            sql, params = sql + " AND session = %s", [timer_id, self._fence.session]

        async def apply(conn: Connection) -> bool:
            cursor = await conn.execute(sql, params)
            return cursor.rowcount > 0

        return await self._access.write(
            apply, f"the deletion of timer {timer_id}", fence=self._fence
        )

    async def find(
        self, session: str | None = None, *, active_only: bool = False
    ) -> list[TimerRecord]:
        sql, params = timer_list_query(
            "%s", session=session, active_only=active_only, true="true", insertion_order="seq"
        )
        rows = await self._access.read(sql, params)
        return [
            decode_row(self._access.where, f"timer {timer_id}", partial(timer_from_json, data))
            for timer_id, data in rows
        ]


def _timer_row(record: TimerRecord) -> tuple[str, str, bool, datetime | None, str]:
    # As the SQLite store reads it: a naive time is local time.
    return timer_row(record, record.next_fire.astimezone(UTC) if record.next_fire else None)
