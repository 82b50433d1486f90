"""The read side of a PostgreSQL store for command-line tools: synchronous reads on one
read-only connection, the counterpart of the SQLite :class:`~wakeful.store.reader.StoreReader`.

It never creates, upgrades or changes the database: the connection refuses writes
(``default_transaction_read_only``), and a database without wakeful's tables, or at another
schema version, is refused with a :class:`StoreError` before anything is read. Messages name the
database and its host, never the password.

Tailing across workers (:meth:`PostgresReader.tail_events`). Several workers commit events out of
``seq`` order: worker A takes seq 10, worker B takes 11 and commits first. A tail that read
"after 10" and then saw 11 would skip A's 10 for good. Holding back the rows of transactions still
in flight (``xid >= pg_snapshot_xmin(pg_current_snapshot())``) is not enough on its own while the
position is a seq: a transaction whose id was assigned early (by an earlier write in it, such as
a lease check) can take a later seq than one that is still in flight. So the tail's position is
the pair (xid, seq), and it reads in that order, below the snapshot's xmin: every transaction
below xmin has ended, so no row can appear below the position later; rows above it are those of
transactions in flight, or newer, and are read once they commit. Each event row records its
transaction in the ``xid`` column (schema version 5, filled by the column's default). The order
is the order transactions started writing, which within one worker (one writer, one transaction
at a time) is seq order. A transaction left open anywhere on the server holds xmin back, so new
events show late (never skipped) until it ends.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from functools import partial
from typing import Any, Final, NamedTuple, TypeVar

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import TupleRow

from ...core.records import (
    AuditRow,
    CaseRecord,
    ConnectedChannel,
    EventStatus,
    StoredEvent,
    TaskRecord,
    TimerRecord,
)
from ...errors import StoreError
from ...events import Event
from ..event_query import recent_events_query
from ..events import utc_key
from ..rows import (
    CASE_COLUMNS,
    audit_page_query,
    decode_case,
    decode_connected_channel,
    decode_row,
    task_from_json,
    timer_from_json,
    timer_list_query,
)
from .access import database_name
from .audit import audit_from_row
from .schema import MIGRATIONS

__all__ = ["CONNECT_TIMEOUT_S", "PostgresReader", "TailPosition", "open_postgres_reader"]

T = TypeVar("T")

# How long a command waits for the server before it says it cannot reach it.
CONNECT_TIMEOUT_S: Final = 10

# Rows below the snapshot's xmin belong to transactions that have all ended (see the module docs).
_BELOW_WATERMARK: Final = "xid < pg_snapshot_xmin(pg_current_snapshot())"


class TailPosition(NamedTuple):
    """Where a tail of the events table stands: the (transaction, seq) of the last row it read.
    ``TailPosition(0, 0)`` is before every row."""

    xid: int
    seq: int


def open_postgres_reader(url: str, *, connect_timeout_s: int = CONNECT_TIMEOUT_S) -> PostgresReader:
    """A reader of the wakeful store in the PostgreSQL database at `url`, which must already be
    at this wakeful's schema version; a StoreError (naming the database, not the password)
    when the server cannot be reached or the database holds no such store."""
    where = database_name(url)
    try:
        conn = psycopg.connect(url, autocommit=True, connect_timeout=connect_timeout_s)
    except psycopg.Error as exc:
        raise StoreError(
            f"Could not connect to {where}: {_without_password(url, exc)}. Check that the server "
            "runs, that the URL names it, and that this user may log in to that database."
        ) from exc
    try:
        conn.execute("SET default_transaction_read_only = on")
        _check_schema(conn, where)
    except psycopg.Error as exc:
        conn.close()
        raise StoreError(
            f"Reading {where} failed: {_without_password(url, exc)}. Nothing was changed."
        ) from exc
    except BaseException:
        conn.close()
        raise
    return PostgresReader(conn, where)


def _without_password(url: str, exc: BaseException) -> str:
    """The driver's message, stripped, with the URL's password (if any) masked."""
    text = str(exc).strip()
    try:
        password = conninfo_to_dict(url).get("password")
    except psycopg.Error:
        password = None
    return text.replace(str(password), "***") if password else text


def _check_schema(conn: psycopg.Connection[TupleRow], where: str) -> None:
    """Refuse a database that holds no wakeful store, or one at another schema version."""
    found = conn.execute("SELECT to_regclass('schema_version') IS NOT NULL").fetchone()
    if found is None or not found[0]:
        tables = [
            name
            for (name,) in conn.execute(
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_schema = current_schema() ORDER BY table_name LIMIT 5"
            ).fetchall()
        ]
        if tables:
            raise StoreError(
                f"{where} is not a wakeful store: it holds other tables ({', '.join(tables)}) "
                "and no schema_version. Nothing was changed. Point --store at the database a "
                "wakeful runtime uses."
            )
        raise StoreError(
            f"There is no wakeful store in {where}: the database is empty (a runtime creates its "
            "tables when it first starts on it). Start one with `wakeful run --store URL`, or "
            "point --store at the database of a runtime that has run. Nothing was changed."
        )
    row = conn.execute("SELECT coalesce(max(version), 0) FROM schema_version").fetchone()
    version = int(row[0]) if row is not None else 0
    if version > len(MIGRATIONS):
        raise StoreError(
            f"{where} has schema version {version}, written by a newer wakeful (this one knows up "
            f"to version {len(MIGRATIONS)}). Nothing was changed. Upgrade wakeful here to read it."
        )
    if version < len(MIGRATIONS):
        raise StoreError(
            f"{where} has schema version {version} and this wakeful reads version "
            f"{len(MIGRATIONS)}. Start a runtime of this version on it once to upgrade it, then "
            "retry. Nothing was changed."
        )


class PostgresReader:
    """Synchronous, read-only reads of a PostgreSQL store; what CLI commands use. Open one with
    :func:`open_postgres_reader`; close it (or use it as a context manager) when done.

    Its methods return what the same methods of the SQLite ``StoreReader`` return. `where` names
    the database and host for messages (the counterpart of the SQLite reader's `path`)."""

    def __init__(self, conn: psycopg.Connection[TupleRow], where: str) -> None:
        self._conn = conn
        self.where = where

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> PostgresReader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[TupleRow]:
        try:
            return self._conn.execute(sql, params).fetchall()
        except psycopg.Error as exc:
            raise StoreError(
                f"Reading {self.where} failed: {str(exc).strip()}. Nothing was changed; check "
                "that the server is up and retry."
            ) from exc

    def _decode(self, what: str, decode: Callable[[], T]) -> T:
        return decode_row(self.where, what, decode)

    def _stored_event(self, seq: Any, status: Any, data: Any) -> StoredEvent:
        event = self._decode(f"event #{seq}", partial(Event.from_json, data))
        return StoredEvent(int(seq), status, event)

    # -- events --

    def recent_events(
        self,
        limit: int = 50,
        session: str | None = None,
        after_rowid: int | None = None,
        *,
        status: EventStatus | None = None,
    ) -> list[StoredEvent]:
        """Events in seq order: the last `limit`, or the first `limit` after `after_rowid`; of
        `session`, with `status`, when given. To follow new events across workers, use
        :meth:`tail_events`: a seq position can skip a row committed late."""
        sql, params = recent_events_query(
            limit, session=session, after_rowid=after_rowid, status=status, mark="%s"
        )
        rows = self._rows(sql, params)
        if after_rowid is None:
            rows.reverse()
        return [self._stored_event(*row) for row in rows]

    def tail_events(
        self,
        limit: int,
        session: str | None = None,
        *,
        status: EventStatus | None = None,
        after: TailPosition | None = None,
    ) -> tuple[list[StoredEvent], TailPosition]:
        """Events of ended transactions in (transaction, seq) order, and the position to read on
        from: the last `limit` when `after` is None, else the first `limit` after `after`. No
        row ever appears before a position once read (see the module docs)."""
        where = [_BELOW_WATERMARK]
        params: list[object] = []
        for column, value in (("session", session), ("status", status)):
            if value is not None:
                where.append(f"{column} = %s")
                params.append(value)
        if after is not None:
            where.append("(xid, seq) > (%s::text::xid8, %s)")
            params += [str(after.xid), after.seq]
        order = "ASC" if after is not None else "DESC"
        rows = self._rows(
            # The xid is read as text (psycopg has no xid8 loader) under another name, so that
            # ORDER BY sorts the xid8 column, not its text.
            f"SELECT seq, status, data, xid::text AS position_xid FROM events "
            f"WHERE {' AND '.join(where)} ORDER BY xid {order}, seq {order} LIMIT %s",
            [*params, max(0, limit)],
        )
        if after is None:
            rows.reverse()
        events = [self._stored_event(seq, status, data) for seq, status, data, _ in rows]
        if rows:
            return events, TailPosition(int(rows[-1][3]), int(rows[-1][0]))
        return events, after if after is not None else TailPosition(0, 0)

    def event_counts_by_channel(self) -> dict[str, dict[str, int]]:
        """How many events each channel delivered, by status (reads every event: for the CLI)."""
        rows = self._rows(
            "SELECT data::jsonb ->> 'channel', status, count(*) FROM events GROUP BY 1, 2"
        )
        counts: dict[str, dict[str, int]] = {}
        for channel, status, n in rows:
            counts.setdefault(str(channel), {})[status] = int(n)
        return counts

    # -- tasks and timers --

    def tasks(self, session: str | None = None) -> list[TaskRecord]:
        """Stored task records, in the order they were first saved."""
        sql, params = "SELECT id, data FROM tasks", []
        if session is not None:
            sql, params = sql + " WHERE session = %s", [session]
        return [
            self._decode(f"task {task_id}", partial(task_from_json, data))
            for task_id, data in self._rows(sql + " ORDER BY seq", params)
        ]

    def timers(self, session: str | None = None, *, active_only: bool = False) -> list[TimerRecord]:
        """Stored timers, active ones soonest first, then finished ones."""
        sql, params = timer_list_query(
            "%s", session=session, active_only=active_only, true="true", insertion_order="seq"
        )
        rows = self._rows(sql, params)
        return [
            self._decode(f"timer {timer_id}", partial(timer_from_json, data))
            for timer_id, data in rows
        ]

    # -- channels: cursors and the channels the agent connected --

    def channel_cursors(self, channel: str | None = None) -> list[tuple[str, str, str, str]]:
        """(channel, key, value, updated_at) of every stored cursor, by channel and key."""
        sql, params = "SELECT channel, key, value, updated_at FROM channel_cursors", []
        if channel is not None:
            sql, params = sql + " WHERE channel = %s", [channel]
        return [
            (channel_, key, value, utc_key(updated_at) or "")
            for channel_, key, value, updated_at in self._rows(
                sql + " ORDER BY channel, key", params
            )
        ]

    def connected_channels(self) -> list[ConnectedChannel]:
        """The channels the agent connected while running, in the order they were connected."""
        rows = self._rows(
            "SELECT name, kind, settings, filter, connected_at FROM connected_channels "
            "ORDER BY connected_at, name"
        )
        return [
            self._decode(
                f"connected channel {name}",
                partial(decode_connected_channel, name, kind, settings, filter_, utc_key(at)),
            )
            for name, kind, settings, filter_, at in rows
        ]

    # -- the audit log --

    def audit_rows(
        self,
        *,
        since: str | None = None,
        session: str | None = None,
        tool: str | None = None,
        after_seq: int = 0,
        limit: int = 1000,
    ) -> list[AuditRow]:
        """Audited calls in seq order, the first `limit` after `after_seq`; `since` is a UTC
        time as the SQLite store writes it (fixed-width ISO text)."""
        sql, params = audit_page_query(
            "%s", since=_utc(since), session=session, tool=tool, after_seq=after_seq, limit=limit
        )
        return [
            self._decode(f"audit record #{row[0]}", partial(audit_from_row, row))
            for row in self._rows(sql, params)
        ]

    def audit_durations(self, since: str | None = None) -> list[tuple[str, str, float]]:
        """(tool, status, duration_ms) of every audited call since `since`, for statistics."""
        sql, params = "SELECT tool, status, duration_ms FROM audit", []
        when = _utc(since)
        if when is not None:
            sql, params = sql + " WHERE ts >= %s", [when]
        return [(tool, status, float(ms)) for tool, status, ms in self._rows(sql, params)]

    # -- cases --

    def case(self, number: int) -> CaseRecord | None:
        """The case numbered `number`, or None."""
        found = self._cases("WHERE number = %s", (number,))
        return found[0] if found else None

    def recent_cases(self, limit: int = 50, *, before: int | None = None) -> list[CaseRecord]:
        """Up to `limit` cases, newest first (numbered below `before`, when given)."""
        where, params = ("WHERE number < %s", (before,)) if before is not None else ("", ())
        return self._cases(f"{where} ORDER BY number DESC LIMIT %s", (*params, limit))

    def all_cases(self) -> list[CaseRecord]:
        """Every case, oldest first."""
        return self._cases("ORDER BY number", ())

    def _cases(self, where: str, params: tuple[Any, ...]) -> list[CaseRecord]:
        rows = self._rows(f"SELECT {CASE_COLUMNS} FROM cases {where}", params)
        return [self._decode(f"case {row[0]}", partial(decode_case, row)) for row in rows]


def _utc(key: str | None) -> datetime | None:
    """The time of a fixed-width UTC text (`utc_key`), for comparing with a timestamptz."""
    return datetime.fromisoformat(key) if key is not None else None
