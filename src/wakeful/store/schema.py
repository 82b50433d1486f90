"""The store file: connecting to it, recognising a wakeful store, and migrating its schema.

The schema is versioned and upgraded by ordered migrations; a file written by a newer wakeful, or a
file that is not a wakeful store, is refused with a :class:`StoreError` and left untouched.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Final, NamedTuple

from ..errors import StoreError

__all__ = [
    "BUSY_TIMEOUT_MS",
    "MIGRATIONS",
    "Migration",
    "apply_migrations",
    "check_not_newer",
    "connect",
    "not_a_store",
    "read_only_mode",
    "read_schema_version",
]

log = logging.getLogger(__name__)

BUSY_TIMEOUT_MS: Final = 10_000


class Migration(NamedTuple):
    """One schema step: the statements that take the schema from version N-1 to N."""

    description: str
    statements: tuple[str, ...]


# Ordered: MIGRATIONS[i] produces schema version i + 1. Append new steps; never edit old ones.
MIGRATIONS: Final[tuple[Migration, ...]] = (
    Migration(
        "events, trajectories, tasks, timers",
        (
            """CREATE TABLE schema_version (
                version INTEGER PRIMARY KEY,
                description TEXT NOT NULL,
                applied_at TEXT NOT NULL
            )""",
            "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
            """CREATE TABLE events (
                seq INTEGER PRIMARY KEY AUTOINCREMENT,
                id TEXT NOT NULL UNIQUE,
                session TEXT NOT NULL,
                kind TEXT NOT NULL,
                ts TEXT NOT NULL,
                status TEXT NOT NULL CHECK (status IN ('pending', 'consumed')),
                data TEXT NOT NULL
            )""",
            "CREATE INDEX events_by_status ON events (status, session, seq)",
            "CREATE INDEX events_by_session ON events (session, seq)",
            """CREATE TABLE trajectory (
                seq INTEGER PRIMARY KEY AUTOINCREMENT,
                session TEXT NOT NULL,
                data TEXT NOT NULL
            )""",
            "CREATE INDEX trajectory_by_session ON trajectory (session, seq)",
            """CREATE TABLE tasks (
                id TEXT PRIMARY KEY,
                session TEXT NOT NULL,
                state TEXT NOT NULL,
                data TEXT NOT NULL
            )""",
            "CREATE INDEX tasks_by_state ON tasks (state)",
            """CREATE TABLE timers (
                id TEXT PRIMARY KEY,
                session TEXT NOT NULL,
                active INTEGER NOT NULL,
                next_fire TEXT,
                data TEXT NOT NULL
            )""",
            "CREATE INDEX timers_by_next_fire ON timers (active, next_fire)",
        ),
    ),
    Migration(
        "idempotency keys, confirmation tokens, audit log",
        (
            # One row per (tool, key): claimed as 'running' before the action runs, so a
            # duplicate call or a restart finds the claim instead of running the action again.
            """CREATE TABLE idempotency_keys (
                tool TEXT NOT NULL,
                key TEXT NOT NULL,
                arguments_hash TEXT NOT NULL,
                state TEXT NOT NULL CHECK (state IN ('running', 'done', 'failed')),
                owner TEXT NOT NULL,
                started_at TEXT NOT NULL,
                finished_at TEXT,
                result TEXT,
                error TEXT,
                PRIMARY KEY (tool, key)
            )""",
            # Arguments are kept as hashes only (whole and per top-level field): enough to tell
            # which field changed, without keeping message bodies or secrets.
            """CREATE TABLE confirmations (
                token TEXT PRIMARY KEY,
                tool TEXT NOT NULL,
                arguments_hash TEXT NOT NULL,
                field_hashes TEXT NOT NULL,
                preview TEXT NOT NULL,
                issued_at TEXT NOT NULL,
                expires_at TEXT NOT NULL,
                state TEXT NOT NULL CHECK (state IN ('issued', 'used', 'failed')),
                used_at TEXT,
                error TEXT
            )""",
            "CREATE INDEX confirmations_by_expiry ON confirmations (expires_at)",
            """CREATE TABLE audit (
                seq INTEGER PRIMARY KEY AUTOINCREMENT,
                ts TEXT NOT NULL,
                session TEXT NOT NULL,
                tool TEXT NOT NULL,
                call_id TEXT NOT NULL,
                status TEXT NOT NULL,
                duration_ms REAL NOT NULL,
                data TEXT NOT NULL
            )""",
            "CREATE INDEX audit_by_ts ON audit (ts)",
            "CREATE INDEX audit_by_tool ON audit (tool, ts)",
        ),
    ),
    Migration(
        "filtered events, channel cursors, connected channels",
        (
            # SQLite cannot change a CHECK in place: the events table is rebuilt with the new
            # status 'filtered' (stored, countable, never handed to a session), keeping every
            # row, its seq, and the AUTOINCREMENT counter (so a seq is never reused).
            """CREATE TABLE events_v3 (
                seq INTEGER PRIMARY KEY AUTOINCREMENT,
                id TEXT NOT NULL UNIQUE,
                session TEXT NOT NULL,
                kind TEXT NOT NULL,
                ts TEXT NOT NULL,
                status TEXT NOT NULL CHECK (status IN ('pending', 'consumed', 'filtered')),
                data TEXT NOT NULL
            )""",
            "INSERT INTO events_v3 (seq, id, session, kind, ts, status, data) "
            "SELECT seq, id, session, kind, ts, status, data FROM events ORDER BY seq",
            "DELETE FROM sqlite_sequence WHERE name = 'events_v3'",
            "INSERT INTO sqlite_sequence (name, seq) "
            "SELECT 'events_v3', seq FROM sqlite_sequence WHERE name = 'events'",
            "DROP TABLE events",
            "ALTER TABLE events_v3 RENAME TO events",
            "CREATE INDEX events_by_status ON events (status, session, seq)",
            "CREATE INDEX events_by_session ON events (session, seq)",
            # How far each channel has read its source (an IMAP UIDVALIDITY and last UID, an
            # update offset): advanced only after the events up to it were stored.
            """CREATE TABLE channel_cursors (
                channel TEXT NOT NULL,
                key TEXT NOT NULL,
                value TEXT NOT NULL,
                updated_at TEXT NOT NULL,
                PRIMARY KEY (channel, key)
            )""",
            # Channels the agent connected while running (connect_channel), reconnected on the
            # next start; those of wakeful.toml are not stored here.
            """CREATE TABLE connected_channels (
                name TEXT PRIMARY KEY,
                kind TEXT NOT NULL,
                settings TEXT NOT NULL,
                filter TEXT NOT NULL,
                connected_at TEXT NOT NULL
            )""",
        ),
    ),
    Migration(
        "messages to the user, their deliveries and read state",
        (
            # One row per message whatever the channels it went to; `body` is the JSON of its
            # text, attachments (by reference), card and title. Read state is one fact: the
            # first channel that saw it read sets `read_at` and `read_on`.
            """CREATE TABLE messages (
                seq INTEGER PRIMARY KEY AUTOINCREMENT,
                id TEXT NOT NULL UNIQUE,
                session TEXT NOT NULL,
                created_at TEXT NOT NULL,
                urgency TEXT NOT NULL,
                kind TEXT NOT NULL CHECK (kind IN ('text', 'card', 'notification')),
                body TEXT NOT NULL,
                read_at TEXT,
                read_on TEXT
            )""",
            "CREATE INDEX messages_by_session ON messages (session, seq)",
            "CREATE INDEX messages_unread ON messages (session, seq) WHERE read_at IS NULL",
            # Where each message went: one row per (message, channel), never moving back.
            """CREATE TABLE message_deliveries (
                message_id TEXT NOT NULL REFERENCES messages (id),
                channel TEXT NOT NULL,
                state TEXT NOT NULL
                    CHECK (state IN ('queued', 'sent', 'delivered', 'read', 'failed')),
                updated_at TEXT NOT NULL,
                sent_at TEXT,
                read_at TEXT,
                channel_message_id TEXT,
                error TEXT,
                PRIMARY KEY (message_id, channel)
            )""",
            "CREATE INDEX deliveries_by_channel_id ON message_deliveries "
            "(channel, channel_message_id) WHERE channel_message_id IS NOT NULL",
        ),
    ),
    Migration(
        "subagents: child sessions, their trees and results",
        (
            # One row per child agent; `result` is handed to the parent once (`delivered`).
            """CREATE TABLE subagents (
                seq INTEGER PRIMARY KEY AUTOINCREMENT,
                id TEXT NOT NULL UNIQUE,
                parent TEXT NOT NULL,
                parent_call TEXT NOT NULL,
                root TEXT NOT NULL,
                depth INTEGER NOT NULL,
                agent TEXT NOT NULL,
                task TEXT NOT NULL,
                mode TEXT NOT NULL CHECK (mode IN ('sync', 'async', 'stream')),
                context_strategy TEXT NOT NULL,
                status TEXT NOT NULL
                    CHECK (status IN ('running', 'done', 'failed', 'cancelled')),
                created_at TEXT NOT NULL,
                finished_at TEXT,
                result TEXT,
                error TEXT,
                tokens INTEGER NOT NULL DEFAULT 0,
                delivered INTEGER NOT NULL DEFAULT 0
            )""",
            "CREATE INDEX subagents_by_parent ON subagents (parent, seq)",
            "CREATE INDEX subagents_unsettled ON subagents (seq) "
            "WHERE status = 'running' OR delivered = 0",
        ),
    ),
    Migration(
        "cases: the decisions people made on requests, for the learning loop",
        (
            # One row per decision; `number` is the id people and models cite ("case 12").
            """CREATE TABLE cases (
                number INTEGER PRIMARY KEY AUTOINCREMENT,
                session TEXT NOT NULL,
                kind TEXT NOT NULL CHECK (kind IN ('approval', 'input')),
                tool TEXT NOT NULL,
                request TEXT NOT NULL,
                reasons TEXT NOT NULL,
                context TEXT NOT NULL,
                decision TEXT NOT NULL
                    CHECK (decision IN ('approved', 'denied', 'answered', 'declined')),
                reason TEXT NOT NULL,
                decided_at TEXT NOT NULL,
                timed_out INTEGER NOT NULL DEFAULT 0,
                request_id TEXT NOT NULL DEFAULT '',
                answer TEXT
            )""",
        ),
    ),
    Migration(
        "human requests: requests to a person, their outcome and its delivery",
        (
            # One row per request; `data`, `decision` and `late` are JSON text. An open request,
            # or an outcome not yet `delivered` to its session, is taken up again at start.
            """CREATE TABLE human_requests (
                seq INTEGER PRIMARY KEY AUTOINCREMENT,
                id TEXT NOT NULL UNIQUE,
                session TEXT NOT NULL,
                kind TEXT NOT NULL CHECK (kind IN ('approval', 'input')),
                question TEXT NOT NULL,
                priority TEXT NOT NULL,
                opened_at TEXT NOT NULL,
                deadline TEXT,
                data TEXT NOT NULL,
                status TEXT NOT NULL
                    CHECK (status IN ('open', 'answered', 'timed_out', 'ended')),
                decision TEXT,
                closed_at TEXT,
                delivered INTEGER NOT NULL DEFAULT 0,
                late TEXT NOT NULL DEFAULT '[]'
            )""",
            "CREATE INDEX human_requests_by_session ON human_requests (session, seq)",
            "CREATE INDEX human_requests_unsettled ON human_requests (seq) "
            "WHERE status = 'open' OR delivered = 0",
        ),
    ),
)


def _now_iso() -> str:
    return datetime.now(UTC).isoformat()


def connect(path: Path, *, read_only: bool) -> sqlite3.Connection:
    """A connection to `path` whose first read proves the file is a SQLite database."""
    if read_only:
        if not path.is_file():
            raise StoreError(
                f"There is no wakeful store at {path}. Check the path (or --data-dir), or start "
                "the runtime once to create it."
            )
        target, uri = f"{path.resolve().as_uri()}?{read_only_mode(path)}", True
    else:
        if path.is_dir():
            raise StoreError(
                f"{path} is a directory, not a store file. Give a file path such as "
                f"{path / 'wakeful.db'}."
            )
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(
                f"Cannot create the directory for the store {path}: {exc}. Create it, or choose "
                "a writable location."
            ) from exc
        target, uri = str(path), False
    try:
        conn = sqlite3.connect(
            target,
            uri=uri,
            isolation_level=None,
            check_same_thread=False,
            timeout=BUSY_TIMEOUT_MS / 1000,
        )
    except sqlite3.Error as exc:
        raise StoreError(
            f"Cannot open the store {path}: {exc}. Check that the path exists and is readable "
            "and writable by this user."
        ) from exc
    try:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise not_a_store(path, exc) from exc
    return conn


def read_only_mode(path: Path) -> str:
    """How to read the store at `path` without changing it: "mode=ro", or "immutable=1" where
    its folder is not writable (SQLite could not make the -shm file a WAL reader needs there)."""
    return "mode=ro" if os.access(path.parent, os.W_OK | os.X_OK) else "immutable=1"


def not_a_store(path: Path, exc: sqlite3.Error) -> StoreError:
    """The error for a file SQLite cannot read as a database."""
    return StoreError(
        f"{path} is not a readable wakeful store (SQLite says: {exc}). It is either not a SQLite "
        "database or it is damaged. Nothing in it was changed. If the path is wrong, fix it. If "
        "it is your store, keep the file: `wakeful doctor --store <file>` says more, and "
        '`sqlite3 <file> ".recover"` may recover a copy of what it holds.'
    )


def read_schema_version(conn: sqlite3.Connection, path: Path) -> int:
    """The file's schema version: 0 for an empty database; StoreError for a foreign one."""
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if "schema_version" not in tables:
        foreign = sorted(t for t in tables if not t.startswith("sqlite_"))
        if foreign:
            raise StoreError(
                f"{path} is a SQLite database but not a wakeful store (it has the tables "
                f"{', '.join(foreign)} and no schema_version). Nothing in it was changed. Point "
                "wakeful at another file."
            )
        return 0
    row = conn.execute("SELECT max(version) FROM schema_version").fetchone()
    return int(row[0] or 0)


def check_not_newer(version: int, path: Path, known: int) -> None:
    """Refuse a file whose schema is newer than the `known` versions of this wakeful."""
    if version > known:
        raise StoreError(
            f"The store {path} has schema version {version}, written by a newer wakeful; this "
            f"version understands up to {known}. Upgrade wakeful, or point it at another file. "
            "Nothing in the store was changed."
        )


def apply_migrations(
    conn: sqlite3.Connection, path: Path, migrations: Sequence[Migration] = MIGRATIONS
) -> int:
    """Bring the schema of `conn` up to date, one transaction per step; return the new version.

    A step that fails is rolled back whole, so the file stays at the last good version and keeps
    everything it held.
    """
    while True:
        conn.execute("BEGIN IMMEDIATE")
        version: int | None = None
        try:
            # Read the version inside the write lock: another process may have migrated meanwhile.
            version = read_schema_version(conn, path)
            check_not_newer(version, path, len(migrations))
            if version == len(migrations):
                conn.execute("COMMIT")
                return version
            step = migrations[version]
            for statement in step.statements:
                conn.execute(statement)
            conn.execute(
                "INSERT INTO schema_version (version, description, applied_at) VALUES (?, ?, ?)",
                (version + 1, step.description, _now_iso()),
            )
            if version == 0:
                conn.execute(
                    "INSERT INTO meta (key, value) VALUES ('created_at', ?)", (_now_iso(),)
                )
            conn.execute("COMMIT")
            log.info(
                "store %s migrated to schema version %d (%s)", path, version + 1, step.description
            )
        except sqlite3.Error as exc:
            conn.execute("ROLLBACK")
            if version is None:
                raise not_a_store(path, exc) from exc
            raise StoreError(
                f"Upgrading the store {path} to schema version {version + 1} failed: {exc}. The "
                f"store was left at version {version}, unchanged. Report this as a wakeful bug."
            ) from exc
        except BaseException:
            conn.execute("ROLLBACK")
            raise
