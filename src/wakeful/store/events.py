"""The events table: events in arrival order, each pending until its session consumed it, or
filtered (stored, kept from the agent by its channel's filter)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from functools import partial
from typing import Final, cast, get_args

from ..core.records import EventStatus, StoredEvent
from ..errors import StoreError, UserError
from ..events import Event
from .access import StoreAccess

__all__ = ["INSERT_EVENT", "INSERT_NEW_EVENT", "SqliteEvents", "event_row", "utc_key"]

INSERT_EVENT: Final = (
    "INSERT INTO events (id, session, kind, ts, status, data) VALUES (?, ?, ?, ?, ?, ?)"
)
# An event whose id is already stored is left alone (a redelivery): `rowcount` says which.
# Only the id's uniqueness is waived; any other constraint still fails the write.
INSERT_NEW_EVENT: Final = INSERT_EVENT + " ON CONFLICT (id) DO NOTHING"

EventRow = tuple[str, str, str, str | None, str, str]


def utc_key(when: datetime | None) -> str | None:
    """A UTC time as fixed-width text, so that text order is time order in SQL."""
    return when.astimezone(UTC).isoformat(timespec="microseconds") if when else None


def event_row(event: Event, status: str) -> EventRow:
    """The row of `event` in the events table, for :data:`INSERT_EVENT`."""
    return (event.id, event.session, event.kind, utc_key(event.ts), status, event.to_json())


def check_status(status: str) -> None:
    if status not in get_args(EventStatus):
        raise UserError(f"An event status is 'pending', 'consumed' or 'filtered', got {status!r}.")


class SqliteEvents:
    """The :class:`~wakeful.core.repositories.EventRepository` of a SQLite store."""

    def __init__(self, access: StoreAccess) -> None:
        self._access = access

    async def add(self, event: Event, status: EventStatus = "pending") -> int:
        check_status(status)
        row = event_row(event, status)
        self._access.check_room(f"event {event.id}")

        def apply(conn: sqlite3.Connection) -> int:
            return cast(int, conn.execute(INSERT_EVENT, row).lastrowid)

        return await self._access.write(apply, f"event {event.id}")

    async def keep(self, event: Event, status: EventStatus = "pending") -> None:
        check_status(status)
        row = event_row(event, status)

        def apply(conn: sqlite3.Connection) -> None:
            conn.execute(INSERT_EVENT, row)

        await self._access.write_kept(apply, f"event {event.id}")

    async def add_many(self, events: Sequence[Event], status: EventStatus = "pending") -> list[int]:
        check_status(status)
        rows = [event_row(e, status) for e in events]
        if rows:
            self._access.check_room(f"{len(rows)} events")
        path = self._access.path

        def apply(conn: sqlite3.Connection) -> list[int]:
            rowids = []
            for row in rows:
                try:
                    cursor = conn.execute(INSERT_EVENT, row)
                except sqlite3.IntegrityError as exc:
                    raise StoreError(
                        f"Could not save {len(rows)} events in {path}: event {row[0]} is "
                        "already stored, so none of them was saved. Give it a fresh id."
                    ) from exc
                rowids.append(cast(int, cursor.lastrowid))
            return rowids

        return await self._access.write(apply, f"{len(rows)} events")

    async def add_new(self, event: Event, status: EventStatus = "pending") -> bool:
        """Store `event` unless an event with its id is already stored (a redelivery); say
        whether it was stored. Refused with StoreFull while space is short, like :meth:`add`."""
        stored = await self.add_new_many([(event, status)])
        return stored[0]

    async def add_new_many(self, events: Sequence[tuple[Event, EventStatus]]) -> list[bool]:
        """Store each (event, status) whose id is not stored yet, in one transaction; say for
        each whether it was stored (False: a duplicate, already stored or earlier in `events`,
        left as it was)."""
        for _, status in events:
            check_status(status)
        rows = [event_row(event, status) for event, status in events]
        if not rows:
            return []
        self._access.check_room(f"{len(rows)} event(s)")

        def apply(conn: sqlite3.Connection) -> list[bool]:
            return [conn.execute(INSERT_NEW_EVENT, row).rowcount == 1 for row in rows]

        return await self._access.write(apply, f"{len(rows)} event(s)")

    async def count(self, session: str | None = None) -> dict[str, int]:
        """How many events are stored with each status (a status without any is absent)."""
        return await self._access.read(partial(self._access.reader.event_counts, session))

    async def mark(self, ids: Iterable[str], status: str) -> None:
        check_status(status)
        params = [(status, event_id) for event_id in ids]

        def apply(conn: sqlite3.Connection) -> None:
            conn.executemany("UPDATE events SET status = ? WHERE id = ?", params)

        await self._access.write_kept(apply, f"the status of {len(params)} event(s)")

    async def pending(self, session: str | None = None) -> list[Event]:
        return await self._access.read(partial(self._access.reader.pending_events, session))

    async def recent(
        self,
        limit: int = 50,
        session: str | None = None,
        after_rowid: int | None = None,
        *,
        status: EventStatus | None = None,
    ) -> list[StoredEvent]:
        reader = self._access.reader
        read = partial(reader.recent_events, limit, session, after_rowid, status=status)
        return await self._access.read(read)
