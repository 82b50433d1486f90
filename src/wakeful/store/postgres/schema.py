"""The PostgreSQL store's schema: versioned, upgraded by ordered migrations, one transaction per
step, like the SQLite store's (:mod:`wakeful.store.schema`).

The two schemas hold the same rows with the same meaning; PostgreSQL's own types are used where
they help (identity columns for arrival order, `timestamptz` for times, `boolean`). Each table's
`seq` is what SQLite's rowid is: the order rows were first stored in. A database written by a
newer wakeful, or one holding another program's tables, is refused with a :class:`StoreError`
and left untouched. Workers that start together migrate one at a time (an advisory lock).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Final

import psycopg

from ...errors import StoreError
from ..schema import Migration
from .access import Connection

__all__ = ["MIGRATIONS", "apply_migrations", "read_schema_version"]

# Any constant that no other program on the database uses: the key of the migration lock.
MIGRATION_LOCK_KEY: Final = 0x77616B6566756C  # "wakeful"

# Version 2: idempotency keys, confirmations, the audit log, channel cursors, connected channels.
_V2_SAFETY_AND_CHANNELS: Final[tuple[str, ...]] = (
    # One row per (tool, key): claimed as 'running' (by the store instance `owner`, one worker's
    # run) before the action runs, so a duplicate call or a restart finds the claim instead of
    # running the action again. The primary key makes two claims at once conflict. `worker` (the
    # registered worker of the claiming store, NULL without one) and `claimed_at` (the database's
    # clock) tell whether the claim's run is still alive (see PostgresIdempotencyKeys).
    """CREATE TABLE idempotency_keys (
        tool text NOT NULL,
        key text NOT NULL,
        arguments_hash text NOT NULL,
        state text NOT NULL CHECK (state IN ('running', 'done', 'failed')),
        owner text NOT NULL,
        started_at timestamptz NOT NULL,
        finished_at timestamptz,
        result text,
        error text,
        worker text,
        claimed_at timestamptz NOT NULL DEFAULT clock_timestamp(),
        PRIMARY KEY (tool, key)
    )""",
    # Arguments are kept as hashes only (whole and per top-level field). `issued_at` and
    # `expires_at` are the issuer's own ISO texts, returned exactly as given (the safety layer
    # compares and shows them); `used_at` is written by the store.
    """CREATE TABLE confirmations (
        token text PRIMARY KEY,
        tool text NOT NULL,
        arguments_hash text NOT NULL,
        field_hashes text NOT NULL,
        preview text NOT NULL,
        issued_at text NOT NULL,
        expires_at text NOT NULL,
        state text NOT NULL CHECK (state IN ('issued', 'used', 'failed')),
        used_at timestamptz,
        error text
    )""",
    """CREATE TABLE audit (
        seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        ts timestamptz NOT NULL,
        session text NOT NULL,
        tool text NOT NULL,
        call_id text NOT NULL,
        status text NOT NULL,
        duration_ms double precision NOT NULL,
        data text NOT NULL
    )""",
    # Audit reads page by seq, filtered by time, session or tool.
    "CREATE INDEX audit_by_ts ON audit (ts)",
    "CREATE INDEX audit_by_session ON audit (session, seq)",
    "CREATE INDEX audit_by_tool ON audit (tool, seq)",
    # How far each channel has read its source: advanced only after the events up to it were
    # stored.
    """CREATE TABLE channel_cursors (
        channel text NOT NULL,
        key text NOT NULL,
        value text NOT NULL,
        updated_at timestamptz NOT NULL,
        PRIMARY KEY (channel, key)
    )""",
    # Channels the agent connected while running (connect_channel), reconnected on the next
    # start; those of wakeful.toml are not stored here.
    """CREATE TABLE connected_channels (
        name text PRIMARY KEY,
        kind text NOT NULL,
        settings text NOT NULL,
        filter text NOT NULL,
        connected_at timestamptz NOT NULL
    )""",
)

# Version 3: messages to the user, subagents, cases, requests to a person. Times are text here,
# as in the records and the SQLite store: a caller's ISO string is read back exactly as it was
# given (a timestamptz would rewrite "Z" as "+00:00"), and no query compares these times.
_V3_MESSAGES_AND_AGENTS: Final[tuple[str, ...]] = (
    # One row per message whatever the channels it went to; `body` is the JSON of its text,
    # attachments (by reference), card and title. Read state is one fact: the first channel
    # that saw it read sets `read_at` and `read_on`.
    """CREATE TABLE messages (
        seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        id text NOT NULL CONSTRAINT messages_id_unique UNIQUE,
        session text NOT NULL,
        created_at text NOT NULL,
        urgency text NOT NULL,
        kind text NOT NULL CHECK (kind IN ('text', 'card', 'notification')),
        body text NOT NULL,
        read_at text,
        read_on text
    )""",
    "CREATE INDEX messages_by_session ON messages (session, seq)",
    "CREATE INDEX messages_unread ON messages (session, seq) WHERE read_at IS NULL",
    # Where each message went: one row per (message, channel), never moving back; `seq` keeps
    # the order deliveries were first recorded in (SQLite's rowid).
    """CREATE TABLE message_deliveries (
        seq bigint GENERATED ALWAYS AS IDENTITY,
        message_id text NOT NULL REFERENCES messages (id),
        channel text NOT NULL,
        state text NOT NULL CHECK (state IN ('queued', 'sent', 'delivered', 'read', 'failed')),
        updated_at text NOT NULL,
        sent_at text,
        read_at text,
        channel_message_id text,
        error text,
        PRIMARY KEY (message_id, channel)
    )""",
    "CREATE INDEX deliveries_by_channel_id ON message_deliveries "
    "(channel, channel_message_id) WHERE channel_message_id IS NOT NULL",
    # One row per child agent; `result` is handed to the parent once (`delivered`).
    """CREATE TABLE subagents (
        seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        id text NOT NULL CONSTRAINT subagents_id_unique UNIQUE,
        parent text NOT NULL,
        parent_call text NOT NULL,
        root text NOT NULL,
        depth integer NOT NULL,
        agent text NOT NULL,
        task text NOT NULL,
        mode text NOT NULL CHECK (mode IN ('sync', 'async', 'stream')),
        context_strategy text NOT NULL,
        status text NOT NULL CHECK (status IN ('running', 'done', 'failed', 'cancelled')),
        created_at text NOT NULL,
        finished_at text,
        result text,
        error text,
        tokens bigint NOT NULL DEFAULT 0,
        delivered boolean NOT NULL DEFAULT false
    )""",
    "CREATE INDEX subagents_by_parent ON subagents (parent, seq)",
    "CREATE INDEX subagents_unsettled ON subagents (seq) WHERE status = 'running' OR NOT delivered",
    # One row per decision; `number` is the id people and models cite ("case 12"). A sequence
    # never hands a number out twice, but a write that failed leaves its number unused.
    """CREATE TABLE cases (
        number bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        session text NOT NULL,
        kind text NOT NULL CHECK (kind IN ('approval', 'input')),
        tool text NOT NULL,
        request text NOT NULL,
        reasons text NOT NULL,
        context text NOT NULL,
        decision text NOT NULL CHECK (decision IN ('approved', 'denied', 'answered', 'declined')),
        reason text NOT NULL,
        decided_at text NOT NULL,
        timed_out boolean NOT NULL DEFAULT false,
        request_id text NOT NULL DEFAULT '',
        answer text
    )""",
    # One row per request to a person, open until it ends; `id` is the short id people type,
    # lower-case. `data`, `decision` and `late` are JSON text (see HumanRequestRecord).
    """CREATE TABLE human_requests (
        seq bigint GENERATED ALWAYS AS IDENTITY,
        id text PRIMARY KEY,
        session text NOT NULL,
        kind text NOT NULL CHECK (kind IN ('approval', 'input')),
        question text NOT NULL,
        priority text NOT NULL,
        opened_at text NOT NULL,
        deadline text,
        data text NOT NULL,
        status text NOT NULL CHECK (status IN ('open', 'answered', 'timed_out', 'ended')),
        decision text,
        closed_at text,
        delivered boolean NOT NULL DEFAULT false,
        late text NOT NULL DEFAULT '[]'
    )""",
    "CREATE INDEX human_requests_by_session ON human_requests (session, seq)",
    "CREATE INDEX human_requests_unsettled ON human_requests (seq) "
    "WHERE status = 'open' OR NOT delivered",
)

# Version 4: workers and session leases (:mod:`.leases`), and the worker that runs each task.
_V4_WORKERS_AND_LEASES: Final[tuple[str, ...]] = (
    # `lease_seconds`: how long its leases last unrenewed; alive while heartbeat_at is younger.
    """CREATE TABLE workers (
        id text PRIMARY KEY,
        host text NOT NULL,
        pid integer NOT NULL,
        lease_seconds double precision NOT NULL,
        started_at timestamptz NOT NULL,
        heartbeat_at timestamptz NOT NULL,
        stopped_at timestamptz
    )""",
    # One row per session ever leased, kept on release (owner NULL) so that `epoch`, the fencing
    # token, only ever grows for a session.
    """CREATE TABLE session_leases (
        session text PRIMARY KEY,
        owner text,
        epoch bigint NOT NULL DEFAULT 0,
        acquired_at timestamptz,
        renewed_at timestamptz,
        expires_at timestamptz
    )""",
    "CREATE INDEX session_leases_by_owner ON session_leases (owner) WHERE owner IS NOT NULL",
    "CREATE INDEX session_leases_by_expiry ON session_leases (expires_at) WHERE owner IS NOT NULL",
    "ALTER TABLE tasks ADD COLUMN worker text",
    "CREATE INDEX tasks_running_by_worker ON tasks (worker, session) WHERE state = 'running'",
)

# Ordered: MIGRATIONS[i] produces schema version i + 1. Append new steps; never edit old ones.
MIGRATIONS: Final[tuple[Migration, ...]] = (
    Migration(
        "events, trajectories, tasks, timers",
        (
            """CREATE TABLE schema_version (
                version integer PRIMARY KEY,
                description text NOT NULL,
                applied_at timestamptz NOT NULL
            )""",
            """CREATE TABLE events (
                seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                id text NOT NULL CONSTRAINT events_id_unique UNIQUE,
                session text NOT NULL,
                kind text NOT NULL,
                ts timestamptz NOT NULL,
                status text NOT NULL CHECK (status IN ('pending', 'consumed', 'filtered')),
                data text NOT NULL
            )""",
            "CREATE INDEX events_by_status ON events (status, session, seq)",
            "CREATE INDEX events_by_session ON events (session, seq)",
            # `needs_work`: whether a trajectory ending with this message was cut off (a tool
            # call without its result, or a message that calls for a model turn); computed from
            # the message when it is appended, so start-up finds such sessions from one index.
            """CREATE TABLE trajectory (
                seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                session text NOT NULL,
                needs_work boolean NOT NULL,
                data text NOT NULL
            )""",
            "CREATE INDEX trajectory_by_session ON trajectory (session, seq)",
            """CREATE TABLE tasks (
                seq bigint GENERATED ALWAYS AS IDENTITY,
                id text PRIMARY KEY,
                session text NOT NULL,
                state text NOT NULL,
                data text NOT NULL
            )""",
            "CREATE INDEX tasks_by_state ON tasks (state, seq)",
            "CREATE INDEX tasks_by_session ON tasks (session, seq)",
            """CREATE TABLE timers (
                seq bigint GENERATED ALWAYS AS IDENTITY,
                id text PRIMARY KEY,
                session text NOT NULL,
                active boolean NOT NULL,
                next_fire timestamptz,
                data text NOT NULL
            )""",
            "CREATE INDEX timers_by_next_fire ON timers (active, next_fire)",
        ),
    ),
    Migration(
        "idempotency keys, confirmations, audit log, channel cursors, connected channels",
        _V2_SAFETY_AND_CHANNELS,
    ),
    Migration("messages, subagents, cases, requests to a person", _V3_MESSAGES_AND_AGENTS),
    Migration("workers and session leases", _V4_WORKERS_AND_LEASES),
    # Version 5: the transaction that stored each event (filled by the default, so no insert
    # changes), for a tail that never skips a row another worker commits late: it reads in
    # (xid, seq) order below the snapshot's xmin (see wakeful.store.postgres.reader). Rows stored
    # before this step get the id of its transaction, which is committed before any read.
    Migration(
        "the transaction of each event, for tails across workers",
        (
            "ALTER TABLE events ADD COLUMN xid xid8 NOT NULL DEFAULT pg_current_xact_id()",
            "CREATE INDEX events_by_xid ON events (xid, seq)",
        ),
    ),
    # Version 6: roles one worker holds at a time (:mod:`.roles`): a channel that pulls from its
    # source runs only on the worker holding "channel:<name>". A row per role ever taken, kept
    # on release (owner NULL) so that `epoch` only ever grows.
    Migration(
        "role leases, for channels run by one worker at a time",
        (
            """CREATE TABLE role_leases (
                role text PRIMARY KEY,
                owner text,
                epoch bigint NOT NULL DEFAULT 0,
                acquired_at timestamptz,
                renewed_at timestamptz,
                expires_at timestamptz
            )""",
        ),
    ),
    # Version 7: messages handed over to a role's holder (:mod:`.roles`): a worker whose session
    # writes to the user on a channel another worker runs leaves the message to that worker,
    # which polls this table by role (oldest first) and deletes each row once done with it.
    Migration(
        "messages handed over to the worker running their channel",
        (
            """CREATE TABLE role_handoffs (
                seq bigint GENERATED ALWAYS AS IDENTITY,
                role text NOT NULL,
                message_id text NOT NULL,
                handed_at timestamptz NOT NULL,
                PRIMARY KEY (role, message_id)
            )""",
            "CREATE INDEX role_handoffs_by_role ON role_handoffs (role, seq)",
        ),
    ),
)


async def read_schema_version(conn: Connection, where: str) -> int:
    """The schema version of the database: 0 when it is empty; refused when it holds tables of
    another program (tables, but no schema_version)."""
    cursor = await conn.execute("SELECT to_regclass('schema_version') IS NOT NULL")
    row = await cursor.fetchone()
    if row is not None and row[0]:
        cursor = await conn.execute("SELECT coalesce(max(version), 0) FROM schema_version")
        version = await cursor.fetchone()
        return int(version[0]) if version is not None else 0
    cursor = await conn.execute(
        "SELECT table_name FROM information_schema.tables "
        "WHERE table_schema = current_schema() ORDER BY table_name LIMIT 5"
    )
    tables = [name for (name,) in await cursor.fetchall()]
    if tables:
        raise StoreError(
            f"{where} is not a wakeful store: it holds other tables ({', '.join(tables)}) and "
            "no schema_version. Nothing was changed. Give wakeful a database of its own "
            "(CREATE DATABASE wakeful) or a schema of its own (options=-csearch_path=wakeful)."
        )
    return 0


async def apply_migrations(
    conn: Connection, where: str, migrations: Sequence[Migration] = MIGRATIONS
) -> int:
    """Bring the database up to the latest schema, one transaction per step; return the version
    it is at now. A newer schema is refused untouched. `conn` must be in autocommit mode."""
    await conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK_KEY,))
    try:
        version = await read_schema_version(conn, where)
        if version > len(migrations):
            raise StoreError(
                f"{where} has schema version {version}, written by a newer wakeful (this one "
                f"knows up to version {len(migrations)}). Nothing was changed. Upgrade wakeful "
                "on this worker."
            )
        for number, step in enumerate(migrations[version:], start=version + 1):
            try:
                async with conn.transaction():
                    for statement in step.statements:
                        await conn.execute(statement.encode())
                    await conn.execute(
                        "INSERT INTO schema_version (version, description, applied_at) "
                        "VALUES (%s, %s, %s)",
                        (number, step.description, datetime.now(UTC)),
                    )
            except psycopg.Error as exc:
                raise StoreError(
                    f"Upgrading {where} to schema version {number} ({step.description}) failed: "
                    f"{str(exc).strip()}. Nothing of that step was kept; the database stays at "
                    f"version {version}. Check that this user may create tables there."
                ) from exc
            version = number
        return version
    finally:
        await conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK_KEY,))
