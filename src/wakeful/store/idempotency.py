"""The idempotency_keys table: one claim per (tool, key), then the outcome of its action."""

from __future__ import annotations

import sqlite3
from datetime import datetime
from functools import partial

from ..core.records import IdempotencyEntry
from .access import StoreAccess
from .events import utc_key
from .rows import IDEMPOTENCY_COLUMNS, idempotency_state

__all__ = ["SqliteIdempotencyKeys"]


class SqliteIdempotencyKeys:
    """The :class:`~wakeful.core.repositories.IdempotencyRepository` of a SQLite store.

    Claims are made in the name of `instance_id`, which names this opening of the file: a claim
    made by another instance (one that has since stopped or crashed) is known not to be running
    here.
    """

    def __init__(self, access: StoreAccess, instance_id: str) -> None:
        self._access = access
        self._instance_id = instance_id

    async def claim(
        self, tool: str, key: str, arguments_hash: str, started_at: datetime
    ) -> IdempotencyEntry | None:
        row = (tool, key, arguments_hash, self._instance_id, utc_key(started_at))

        def apply(conn: sqlite3.Connection) -> IdempotencyEntry | None:
            found = conn.execute(
                f"SELECT {IDEMPOTENCY_COLUMNS} FROM idempotency_keys WHERE tool = ? AND key = ?",
                (tool, key),
            ).fetchone()
            if found is not None:
                return IdempotencyEntry(*found)
            conn.execute(
                "INSERT INTO idempotency_keys (tool, key, arguments_hash, state, owner, "
                "started_at) VALUES (?, ?, ?, 'running', ?, ?)",
                row,
            )
            return None

        return await self._access.write(apply, f"the idempotency key {key!r} of {tool}")

    async def finish(
        self,
        tool: str,
        key: str,
        finished_at: datetime,
        *,
        result: str | None = None,
        error: str | None = None,
    ) -> None:
        params = (idempotency_state(result), utc_key(finished_at), result, error, tool, key)

        def apply(conn: sqlite3.Connection) -> None:
            conn.execute(
                "UPDATE idempotency_keys SET state = ?, finished_at = ?, result = ?, error = ? "
                "WHERE tool = ? AND key = ?",
                params,
            )

        await self._access.write(apply, f"the outcome of idempotency key {key!r} of {tool}")

    async def release(self, tool: str, key: str) -> None:
        def apply(conn: sqlite3.Connection) -> None:
            conn.execute("DELETE FROM idempotency_keys WHERE tool = ? AND key = ?", (tool, key))

        await self._access.write(apply, f"the release of idempotency key {key!r} of {tool}")

    async def entry(self, tool: str, key: str) -> IdempotencyEntry | None:
        reader = self._access.reader
        return await self._access.read(partial(reader.idempotency_entry, tool, key))

    async def running_elsewhere(self, entry: IdempotencyEntry) -> bool:
        # One runtime per file (the store's lock): another instance's claim is of a run that
        # stopped or crashed, never of one still at work.
        return False
