"""The idempotency_keys table on PostgreSQL: one claim per (tool, key), then the outcome of its
action; the same semantics as :class:`wakeful.store.idempotency.SqliteIdempotencyKeys`."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Final

from ...core.records import IdempotencyEntry
from ..events import utc_key
from ..rows import IDEMPOTENCY_COLUMNS, idempotency_state
from .access import Connection, PostgresAccess

__all__ = ["PostgresIdempotencyKeys"]

_SELECT_ENTRY: Final = (
    f"SELECT {IDEMPOTENCY_COLUMNS} FROM idempotency_keys WHERE tool = %s AND key = %s"
)


class PostgresIdempotencyKeys:
    """The :class:`~wakeful.core.repositories.IdempotencyRepository` of a PostgreSQL store.

    Claims are made in the name of `instance_id`, which names this opening of the store (one
    worker's run), as in the SQLite store; the check and the claim are one statement (an insert
    that does nothing on conflict), so two workers claiming one key at once cannot both win.

    With one process, a claim of another instance was made by a run that has stopped: its outcome
    is unknown. With several workers on one database, another instance may be a live worker whose
    action is still running, and telling the model "unknown, retry with a new key" would then
    invite a second action beside the first. So each claim also records the registered worker
    of the claiming store (``workers``, schema version 4) and the database's time of the claim,
    and :meth:`running_elsewhere` says whether that worker's run is still alive: registered, not
    stopped, its heartbeat younger than its lease, and started before the claim (a worker
    restarted under the same name is another run). Such a claim is "still running, check
    later"; once that worker stops or its heartbeat lapses, its claim is of unknown outcome. The
    database's clock decides, as for leases, so workers' clocks do not matter. A store used
    without a registered worker (one process) records none: another instance's claim is then
    never alive elsewhere, the SQLite store's meaning.
    """

    def __init__(self, access: PostgresAccess, instance_id: str) -> None:
        self._access = access
        self._instance_id = instance_id

    async def claim(
        self, tool: str, key: str, arguments_hash: str, started_at: datetime
    ) -> IdempotencyEntry | None:
        row = (
            tool,
            key,
            arguments_hash,
            self._instance_id,
            started_at.astimezone(UTC),
            self._access.worker,
        )

        async def apply(conn: Connection) -> IdempotencyEntry | None:
            # A claim made meanwhile by another worker makes the insert wait for that worker's
            # commit and then do nothing; the select (a fresh snapshot) then sees its row. Should
            # that claim be released between the two statements, the loop claims again.
            while True:
                cursor = await conn.execute(
                    "INSERT INTO idempotency_keys (tool, key, arguments_hash, state, owner, "
                    "started_at, worker, claimed_at) "
                    "VALUES (%s, %s, %s, 'running', %s, %s, %s, clock_timestamp()) "
                    "ON CONFLICT (tool, key) DO NOTHING",
                    row,
                )
                if cursor.rowcount == 1:
                    return None
                cursor = await conn.execute(_SELECT_ENTRY, (tool, key))
                found = await cursor.fetchone()
                if found is not None:
                    return _entry(found)

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
        params = (idempotency_state(result), finished_at.astimezone(UTC), result, error, tool, key)

        async def apply(conn: Connection) -> None:
            await conn.execute(
                "UPDATE idempotency_keys SET state = %s, finished_at = %s, result = %s, "
                "error = %s WHERE tool = %s AND key = %s",
                params,
            )

        await self._access.write(apply, f"the outcome of idempotency key {key!r} of {tool}")

    async def release(self, tool: str, key: str) -> None:
        async def apply(conn: Connection) -> None:
            await conn.execute(
                "DELETE FROM idempotency_keys WHERE tool = %s AND key = %s", (tool, key)
            )

        await self._access.write(apply, f"the release of idempotency key {key!r} of {tool}")

    async def entry(self, tool: str, key: str) -> IdempotencyEntry | None:
        rows = await self._access.read(_SELECT_ENTRY, (tool, key))
        return _entry(rows[0]) if rows else None

    async def running_elsewhere(self, entry: IdempotencyEntry) -> bool:
        """Whether `entry` is a running claim of another instance whose worker is alive and
        still the run that claimed it: its action may still be going on (see the class docs)."""
        rows = await self._access.read(
            "SELECT EXISTS (SELECT 1 FROM idempotency_keys k JOIN workers w ON w.id = k.worker "
            "WHERE k.tool = %s AND k.key = %s AND k.state = 'running' AND k.owner = %s "
            "AND k.owner <> %s AND w.stopped_at IS NULL AND w.started_at <= k.claimed_at "
            "AND w.heartbeat_at + make_interval(secs => w.lease_seconds) > clock_timestamp())",
            (entry.tool, entry.key, entry.owner, self._instance_id),
        )
        return bool(rows[0][0])


def _entry(row: Sequence[Any]) -> IdempotencyEntry:
    """An entry from its row, its times written as the SQLite store writes them."""
    tool, key, arguments_hash, state, owner, started_at, finished_at, result, error = row
    return IdempotencyEntry(
        tool,
        key,
        arguments_hash,
        state,
        owner,
        utc_key(started_at) or "",
        utc_key(finished_at),
        result,
        error,
    )
