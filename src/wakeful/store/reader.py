"""The read side of the store: synchronous reads of a store file, for CLI commands and the store.

A reader has its own connection, in query-only mode; WAL lets it read everything committed while
a runtime writes to the same file. It never creates, upgrades or changes the file.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

from ..core.records import (
    AuditRow,
    ConnectedChannel,
    EventStatus,
    IdempotencyEntry,
    MessageDelivery,
    OutboundMessage,
    StoredConfirmation,
    StoredEvent,
    TaskRecord,
    TimerRecord,
)
from ..errors import StoreError
from ..events import Event
from ..messages import Message, message_from_json
from .event_query import recent_events_query
from .rows import (
    CONFIRMATION_COLUMNS,
    DELIVERY_COLUMNS,
    IDEMPOTENCY_COLUMNS,
    MESSAGE_COLUMNS,
    audit_page_query,
    decode_audit,
    decode_confirmation,
    decode_connected_channel,
    decode_message,
    decode_row,
    message_page_filter,
    task_from_json,
    timer_from_json,
    timer_list_query,
)
from .schema import MIGRATIONS, check_not_newer, connect, not_a_store, read_schema_version

__all__ = [
    "AuditRow",
    "EventStatus",
    "IdempotencyEntry",
    "StoreReader",
    "StoredConfirmation",
    "StoredEvent",
    "decode_row",
    "open_reader",
    "task_from_json",
    "timer_from_json",
]


def open_reader(path: Path, *, read_only_file: bool) -> StoreReader:
    """A reader of the store at `path`, which must already be at this wakeful's schema version.

    With `read_only_file`, SQLite opens the file itself read-only (the CLI's view); otherwise the
    file is opened normally and only the connection is query-only (the store's own read side).
    """
    conn = connect(path, read_only=read_only_file)
    try:
        conn.execute("PRAGMA query_only = ON")
        version = read_schema_version(conn, path)
        check_not_newer(version, path, len(MIGRATIONS))
        if version < len(MIGRATIONS):
            raise StoreError(
                f"The store {path} has schema version {version} and this wakeful needs "
                f"{len(MIGRATIONS)}. Start the runtime once on it to upgrade it, then retry."
            )
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise not_a_store(path, exc) from exc
    except BaseException:
        conn.close()
        raise
    return StoreReader(conn, path)


class StoreReader:
    """Synchronous reads of a store file; what CLI commands use, and the store's own read side.

    Open one with :meth:`Store.read_only`; it sees everything committed, also while a runtime is
    writing to the file. Close it (or use it as a context manager) when done.
    """

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self._conn = conn
        self.path = path

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> StoreReader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """The rows of one query (for repositories that keep their queries with them)."""
        return self._rows(sql, params)

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        try:
            return self._conn.execute(sql, params).fetchall()
        except sqlite3.DatabaseError as exc:
            raise StoreError(
                f"Reading the store {self.path} failed: {exc}. If this repeats, the file may be "
                "damaged; copy it aside before trying to repair it."
            ) from exc

    def schema_version(self) -> int:
        return read_schema_version(self._conn, self.path)

    def _event(self, seq: int, data: str) -> Event:
        return decode_row(self.path, f"event #{seq}", lambda: Event.from_json(data))

    def pending_events(self, session: str | None = None) -> list[Event]:
        """Events not yet consumed, in arrival order."""
        sql = "SELECT seq, data FROM events WHERE status = 'pending'"
        params: list[Any] = []
        if session is not None:
            sql += " AND session = ?"
            params.append(session)
        return [self._event(seq, data) for seq, data in self._rows(sql + " ORDER BY seq", params)]

    def recent_events(
        self,
        limit: int = 50,
        session: str | None = None,
        after_rowid: int | None = None,
        *,
        status: EventStatus | None = None,
    ) -> list[StoredEvent]:
        """Events in arrival order: the last `limit`, or the first `limit` after `after_rowid`;
        only those with `status` when given (e.g. "filtered").

        To tail, pass the rowid of the last event you saw as `after_rowid`.
        """
        sql, params = recent_events_query(
            limit, session=session, after_rowid=after_rowid, status=status, mark="?"
        )
        rows = self._rows(sql, params)
        if after_rowid is None:
            rows.reverse()
        return [StoredEvent(seq, status, self._event(seq, data)) for seq, status, data in rows]

    def event_counts(self, session: str | None = None) -> dict[str, int]:
        """How many events are stored with each status (a status without any is absent)."""
        sql, params = "SELECT status, count(*) FROM events", []
        if session is not None:
            sql, params = sql + " WHERE session = ?", [session]
        return {status: int(n) for status, n in self._rows(sql + " GROUP BY status", params)}

    def event_counts_by_channel(self) -> dict[str, dict[str, int]]:
        """How many events each channel delivered, by status (reads every event: for the CLI)."""
        rows = self._rows(
            "SELECT json_extract(data, '$.channel'), status, count(*) FROM events GROUP BY 1, 2"
        )
        counts: dict[str, dict[str, int]] = {}
        for channel, status, n in rows:
            counts.setdefault(str(channel), {})[status] = int(n)
        return counts

    # -- channels: cursors and the channels the agent connected --

    def channel_cursor(self, channel: str, key: str) -> str | None:
        rows = self._rows(
            "SELECT value FROM channel_cursors WHERE channel = ? AND key = ?", (channel, key)
        )
        return str(rows[0][0]) if rows else None

    def channel_cursors(self, channel: str | None = None) -> list[tuple[str, str, str, str]]:
        """(channel, key, value, updated_at) of every stored cursor, by channel and key."""
        sql, params = "SELECT channel, key, value, updated_at FROM channel_cursors", []
        if channel is not None:
            sql, params = sql + " WHERE channel = ?", [channel]
        return [tuple(row) for row in self._rows(sql + " ORDER BY channel, key", params)]

    def connected_channels(self) -> list[ConnectedChannel]:
        """The channels the agent connected while running, in the order they were connected."""
        rows = self._rows(
            "SELECT name, kind, settings, filter, connected_at FROM connected_channels "
            "ORDER BY connected_at, name"
        )
        return [
            decode_row(
                self.path,
                f"connected channel {name}",
                partial(decode_connected_channel, name, kind, settings, filter_, connected_at),
            )
            for name, kind, settings, filter_, connected_at in rows
        ]

    def user_message(self, message_id: str) -> OutboundMessage | None:
        """The message to the user with this id, with its deliveries, or None."""
        found = self._user_messages("m.id = ?", [message_id], 1)
        return found[0] if found else None

    def user_messages_by_channel_id(
        self, channel: str, channel_message_id: str
    ) -> list[OutboundMessage]:
        """Every message whose copy on `channel` has that channel's id (each part of a digest),
        oldest first."""
        rows = self._rows(
            "SELECT d.message_id FROM message_deliveries d JOIN messages m ON m.id = d.message_id "
            "WHERE d.channel = ? AND d.channel_message_id = ? ORDER BY m.seq",
            (channel, channel_message_id),
        )
        if not rows:
            return []
        ids = [row[0] for row in rows]
        found = self._user_messages(f"m.id IN ({', '.join('?' for _ in ids)})", ids, len(ids))
        return found[::-1]

    def user_messages(
        self,
        session: str | None = None,
        *,
        unread_only: bool = False,
        limit: int = 50,
        before: str | None = None,
    ) -> list[OutboundMessage]:
        """Messages to the user, newest first (see `MessageRepository.list`)."""
        where, params = message_page_filter(
            "?", session=session, unread_only=unread_only, before=before
        )
        return self._user_messages(where, params, limit)

    def unread_message_count(self, session: str | None = None) -> int:
        sql, params = "SELECT count(*) FROM messages WHERE read_at IS NULL", list[Any]()
        if session is not None:
            sql, params = sql + " AND session = ?", [session]
        return int(self._rows(sql, params)[0][0])

    def _user_messages(
        self, where: str, params: Sequence[Any], limit: int
    ) -> list[OutboundMessage]:
        rows = self._rows(
            f"SELECT {MESSAGE_COLUMNS} FROM messages m WHERE {where} ORDER BY m.seq DESC LIMIT ?",
            [*params, limit],
        )
        if not rows:
            return []
        ids = [row[0] for row in rows]
        deliveries: dict[str, list[MessageDelivery]] = {}
        for row in self._rows(
            f"SELECT {DELIVERY_COLUMNS} FROM message_deliveries WHERE message_id IN "
            f"({', '.join('?' for _ in ids)}) ORDER BY rowid",
            ids,
        ):
            deliveries.setdefault(row[0], []).append(MessageDelivery(*row))
        return [
            decode_row(
                self.path,
                f"message {row[0]}",
                partial(decode_message, row, tuple(deliveries.get(row[0], ()))),
            )
            for row in rows
        ]

    def load_trajectory(self, session: str) -> list[Message]:
        """The session's trajectory messages, in the order they were appended."""
        rows = self._rows(
            "SELECT seq, data FROM trajectory WHERE session = ? ORDER BY seq", (session,)
        )
        return [
            decode_row(self.path, f"trajectory message #{seq}", partial(message_from_json, data))
            for seq, data in rows
        ]

    def sessions(self) -> list[str]:
        """Every session with a trajectory or an event, sorted by name."""
        rows = self._rows(
            "SELECT session FROM trajectory UNION SELECT session FROM events ORDER BY session"
        )
        return [row[0] for row in rows]

    def sessions_to_resume(self) -> list[str]:
        """Sessions whose trajectory ends where work was cut off, sorted by name: with a tool
        call that has no result yet, or with a message that calls for a model turn (a result
        or a user message that is not a parallel answer's).

        The SQL twin of `Trajectory.needs_model` and `Trajectory.unanswered_calls`, so that a
        start-up loads these sessions and no others; it reads one index entry per trajectory
        message and one row per session. A last message that is not valid JSON counts as
        needing work, so loading the session reports the damage as before.
        """
        rows = self._rows(
            "SELECT t.session FROM trajectory AS t "
            "JOIN (SELECT max(seq) AS seq FROM trajectory GROUP BY session) AS last "
            "ON t.seq = last.seq "
            "WHERE CASE WHEN NOT json_valid(t.data) THEN 1 "
            "ELSE CASE json_extract(t.data, '$.role') "
            "WHEN 'tool' THEN 1 "
            "WHEN 'user' THEN coalesce(json_extract(t.data, '$.mark'), '') != 'parallel' "
            "WHEN 'assistant' THEN coalesce(json_array_length(t.data, '$.tool_calls'), 0) > 0 "
            "ELSE 0 END END "
            "ORDER BY t.session"
        )
        return [row[0] for row in rows]

    def tasks(self, session: str | None = None) -> list[TaskRecord]:
        """Stored task records, in the order they were first saved."""
        sql, params = "SELECT id, data FROM tasks", []
        if session is not None:
            sql, params = sql + " WHERE session = ?", [session]
        return [
            decode_row(self.path, f"task {task_id}", partial(task_from_json, data))
            for task_id, data in self._rows(sql + " ORDER BY rowid", params)
        ]

    def timers(self, session: str | None = None, *, active_only: bool = False) -> list[TimerRecord]:
        """Stored timers, active ones soonest first, then finished ones."""
        sql, params = timer_list_query(
            "?", session=session, active_only=active_only, true="1", insertion_order="rowid"
        )
        rows = self._rows(sql, params)
        return [
            decode_row(self.path, f"timer {timer_id}", partial(timer_from_json, data))
            for timer_id, data in rows
        ]

    # -- safety: idempotency keys, confirmation tokens, audit --

    def idempotency_entry(self, tool: str, key: str) -> IdempotencyEntry | None:
        rows = self._rows(
            f"SELECT {IDEMPOTENCY_COLUMNS} FROM idempotency_keys WHERE tool = ? AND key = ?",
            (tool, key),
        )
        return IdempotencyEntry(*rows[0]) if rows else None

    def confirmation(self, token: str) -> StoredConfirmation | None:
        rows = self._rows(
            f"SELECT {CONFIRMATION_COLUMNS} FROM confirmations WHERE token = ?", (token,)
        )
        return confirmation_from_row(self.path, rows[0]) if rows else None

    def audit_rows(
        self,
        *,
        since: str | None = None,
        session: str | None = None,
        tool: str | None = None,
        after_seq: int = 0,
        limit: int = 1000,
    ) -> list[AuditRow]:
        """Audited calls in the order they were recorded, the first `limit` after `after_seq`.

        `since` is a UTC time as the store writes it (fixed-width ISO text).
        """
        sql, params = audit_page_query(
            "?", since=since, session=session, tool=tool, after_seq=after_seq, limit=limit
        )
        return [audit_from_row(self.path, row) for row in self._rows(sql, params)]

    def audit_durations(self, since: str | None = None) -> list[tuple[str, str, float]]:
        """(tool, status, duration_ms) of every audited call since `since`, for statistics."""
        sql, params = "SELECT tool, status, duration_ms FROM audit", []
        if since is not None:
            sql, params = sql + " WHERE ts >= ?", [since]
        return [(tool, status, float(ms)) for tool, status, ms in self._rows(sql, params)]


def confirmation_from_row(path: Path, row: Sequence[Any]) -> StoredConfirmation:
    """A confirmation token from its row (`CONFIRMATION_COLUMNS`); StoreError when malformed."""
    return decode_row(path, f"confirmation token of {row[1]}", partial(decode_confirmation, row))


def audit_from_row(path: Path, row: Sequence[Any]) -> AuditRow:
    """An audited call from its row (`AUDIT_COLUMNS`); StoreError when malformed."""
    return decode_row(path, f"audit record #{row[0]}", partial(decode_audit, row))
