"""The events table on PostgreSQL: events in arrival order, each pending until its session
consumed it, or filtered; the same semantics as :class:`wakeful.store.events.SqliteEvents`.

Storing a pending event wakes its session's listeners (:mod:`.wakeups`), in the same transaction.
The repository of a fenced view (``PostgresStore.fenced(lease)``) writes only for the lease's
session, and each of its writes checks the lease first (:mod:`.leases`); a mark, the write of
every hand-off, checks it in its own statement."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC
from typing import Any, Final

import psycopg
import psycopg.errors

from ...core.records import EventStatus, StoredEvent
from ...errors import StoreError, UserError
from ...events import Event
from ..event_query import recent_events_query
from ..events import check_status
from .access import Connection, PostgresAccess, decode_row
from .leases import LEASE_FOUND, LEASE_HELD, LEASE_ROW, Lease, lease_row_params, refuse_unless_held
from .wakeups import notify_sessions

__all__ = ["INSERT_EVENT", "PostgresEvents", "check_fenced_session", "insert_events"]

INSERT_EVENT: Final = (
    "INSERT INTO events (id, session, kind, ts, status, data) VALUES (%s, %s, %s, %s, %s, %s)"
)
_ID_CONSTRAINT: Final = "events_id_unique"
_MARK: Final = "UPDATE events SET status = %s WHERE id = ANY(%s)"
# A fenced mark: the lease checked in the same statement (see .leases.LEASE_ROW).
_MARK_FENCED: Final = (
    f"WITH {LEASE_ROW}, marked AS ({_MARK} AND session = %s AND {LEASE_HELD}) {LEASE_FOUND}"
)


def event_row(event: Event, status: str) -> tuple[str, str, str, Any, str, str]:
    return (event.id, event.session, event.kind, event.ts.astimezone(UTC), status, event.to_json())


async def insert_events(
    conn: Connection, events: Sequence[Event], status: str, where: str
) -> list[int]:
    """Insert `events` (in the caller's transaction) and return their seqs; an id stored already
    fails the whole write with a StoreError that names it. Pending events wake their sessions'
    listeners once the transaction commits."""
    seqs = []
    for event in events:
        try:
            cursor = await conn.execute(INSERT_EVENT + " RETURNING seq", event_row(event, status))
        except psycopg.errors.UniqueViolation as exc:
            if exc.diag.constraint_name != _ID_CONSTRAINT:
                raise
            what = f"{len(events)} events" if len(events) > 1 else "an event"
            raise StoreError(
                f"Could not save {what} in {where}: event {event.id} is already stored, so none "
                "of them was saved. Give it a fresh id."
            ) from exc
        row = await cursor.fetchone()
        assert row is not None
        seqs.append(int(row[0]))
    if status == "pending":
        await notify_sessions(conn, (event.session for event in events))
    return seqs


def check_fenced_session(fence: Lease | None, sessions: Iterable[str], what: str) -> None:
    """Refuse (UserError) a write through a view fenced by `fence` for another session."""
    if fence is None:
        return
    others = sorted({s for s in sessions if s != fence.session})
    if others:
        raise UserError(
            f"This store view is fenced by the lease on session {fence.session!r}, so it cannot "
            f"write {what} of session {others[0]!r}. Write for other sessions through the store "
            "itself (or a view fenced by their lease)."
        )


class PostgresEvents:
    """The :class:`~wakeful.core.repositories.EventRepository` of a PostgreSQL store (or of a
    view of it fenced by `fence`)."""

    def __init__(self, access: PostgresAccess, fence: Lease | None = None) -> None:
        self._access = access
        self._fence = fence

    async def add(self, event: Event, status: EventStatus = "pending") -> int:
        seqs = await self.add_many([event], status)
        return seqs[0]

    async def keep(self, event: Event, status: EventStatus = "pending") -> None:
        # PostgreSQL holds no write back for a full disk (it refuses it): a kept write is an
        # ordinary one here.
        await self.add_many([event], status)

    async def add_many(self, events: Sequence[Event], status: EventStatus = "pending") -> list[int]:
        check_status(status)
        batch = list(events)
        check_fenced_session(self._fence, (e.session for e in batch), "events")

        async def apply(conn: Connection) -> list[int]:
            return await insert_events(conn, batch, status, self._access.where)

        return await self._access.write(apply, f"{len(batch)} event(s)", fence=self._fence)

    async def add_new(self, event: Event, status: EventStatus = "pending") -> bool:
        stored = await self.add_new_many([(event, status)])
        return stored[0]

    async def add_new_many(self, events: Sequence[tuple[Event, EventStatus]]) -> list[bool]:
        for _, status in events:
            check_status(status)
        check_fenced_session(self._fence, (e.session for e, _ in events), "events")
        rows = [event_row(event, status) for event, status in events]
        if not rows:
            return []

        async def apply(conn: Connection) -> list[bool]:
            stored = []
            woken = []
            for row in rows:
                cursor = await conn.execute(
                    INSERT_EVENT + " ON CONFLICT ON CONSTRAINT events_id_unique DO NOTHING", row
                )
                stored.append(cursor.rowcount == 1)
                if cursor.rowcount == 1 and row[4] == "pending":
                    woken.append(row[1])
            await notify_sessions(conn, woken)
            return stored

        return await self._access.write(apply, f"{len(rows)} event(s)", fence=self._fence)

    async def count(self, session: str | None = None) -> dict[str, int]:
        sql, params = "SELECT status, count(*) FROM events", []
        if session is not None:
            sql, params = sql + " WHERE session = %s", [session]
        rows = await self._access.read(sql + " GROUP BY status", params)
        return {status: int(n) for status, n in rows}

    async def mark(self, ids: Iterable[str], status: str) -> None:
        check_status(status)
        targets = list(ids)
        fence = self._fence
        what = f"the status of {len(targets)} event(s)"

        async def apply(conn: Connection) -> None:
            if fence is None:
                await conn.execute(_MARK, (status, targets))
            else:
                # A fenced view marks its own session's events only; others' ids are ignored.
                cursor = await conn.execute(
                    _MARK_FENCED, (*lease_row_params(fence), status, targets, fence.session)
                )
                refuse_unless_held(await cursor.fetchone(), fence, what)
            if status == "pending":
                cursor = await conn.execute(
                    "SELECT DISTINCT session FROM events WHERE id = ANY(%s)", (targets,)
                )
                await notify_sessions(conn, (session for (session,) in await cursor.fetchall()))

        await self._access.write(apply, what)

    async def pending(self, session: str | None = None) -> list[Event]:
        sql = "SELECT seq, data FROM events WHERE status = 'pending'"
        params: list[object] = []
        if session is not None:
            sql += " AND session = %s"
            params.append(session)
        rows = await self._access.read(sql + " ORDER BY seq", params)
        return [self._event(seq, data) for seq, data in rows]

    async def recent(
        self,
        limit: int = 50,
        session: str | None = None,
        after_rowid: int | None = None,
        *,
        status: EventStatus | None = None,
    ) -> list[StoredEvent]:
        sql, params = recent_events_query(
            limit, session=session, after_rowid=after_rowid, status=status, mark="%s"
        )
        rows = await self._access.read(sql, params)
        if after_rowid is None:
            rows.reverse()
        return [StoredEvent(int(seq), status, self._event(seq, data)) for seq, status, data in rows]

    def _event(self, seq: int, data: str) -> Event:
        return decode_row(self._access.where, f"event #{seq}", lambda: Event.from_json(data))
