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
