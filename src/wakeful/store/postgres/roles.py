"""Roles on PostgreSQL that one worker holds at a time: a channel that pulls from its source (an
IMAP mailbox, a Telegram bot's getUpdates, an XMPP login) runs only on the worker holding the
role "channel:<full name>" (:class:`wakeful.runtime.channels.RuntimeChannels`).

A role is a ``role_leases`` row naming its `owner` (a worker id) with an `expires_at`; taking it
(free, expired, or left by an earlier run under the same worker name) gives a new `epoch`, and
renewing it is one ``UPDATE`` that matches owner, epoch and an unexpired lease, so a renewal
after the role moved finds no row and reports it lost. Every time is the database's
(``clock_timestamp()``), as for session leases (:mod:`.leases`), so workers' clocks play no part.
Each operation is one statement in a transaction of its own: none stays open on a worker's side,
so a worker frozen mid-call holds no row lock. A take waits at most a quarter of the lease (1 s
at most) for a row a cursor write has locked, then answers "not now" (see :meth:`take`).

Lease rows rather than advisory locks: an advisory lock lives as long as its connection, so a
frozen process (SIGSTOP, a long pause) or one cut off from the database keeps its lock, and the
channel stays unread, until the server notices the dead connection (minutes, or never for a
frozen one whose TCP connection stays up); a lease expires after `lease_seconds` by the
database's clock whatever the holder does, and its epoch tells a holder that it lost it.

Failure modes, and what happens:

- **The holder dies** (kill -9): it stops renewing; after `lease_seconds` another worker's next
  attempt takes the role (standby workers try every third of the lease).
- **The holder freezes** past its lease: another worker takes the role. When the holder resumes,
  its renewal finds the row taken and reports the role lost, and the runtime cancels the
  channel. Its cursor writes are refused before that: the runtime refuses them once its own
  monotonic clock says the lease may have expired, and each write checks the role lease in its
  own transaction (see below), so a write already past the first check cannot commit either.
- **The database cannot be reached**: renewals fail; the runtime stops the channel after the
  first failed renewal (well before the lease ends) and tries to take the role again; an
  earlier run's row under the same worker name is taken over at once.
- **A clean stop**: the role is released (owner NULL, expired now), so a standby worker takes
  it at its next attempt instead of after the lease time.

Cursor writes are fenced by the role (:meth:`.channel_cursors.PostgresChannelCursors.held_by`):
each checks, in its own transaction, that the ``role_leases`` row still has the writer's owner
and epoch and an unexpired lease, locking it ``FOR SHARE`` so that no take can commit in
between; else :class:`~wakeful.core.channel.RoleLost` and nothing is written. A holder resumed
after a freeze therefore cannot write over the new holder's cursors, whatever its own clock says.

Hand-overs (schema version 7, ``role_handoffs``): a worker whose session sends a message on a
channel another worker runs stores the message (its delivery there "queued") and then a row
(role, message id) with :meth:`PostgresRoleLeases.hand_over`; the holder polls its roles' rows
(:meth:`~PostgresRoleLeases.handed_over`, oldest first, by an index on (role, seq)), sends each
message whose delivery is still "queued", records the outcome, and deletes the row
(:meth:`~PostgresRoleLeases.done_with`). Rows stay while nobody holds the role, so the next
holder sends them; those older than the look-back (a day) are dropped unsent. A holder that dies
after sending but before recording leaves the row, and the next holder sends the message again:
delivery across holders is at least once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import psycopg
from psycopg.rows import TupleRow
from psycopg_pool import AsyncConnectionPool

from ...core.channel import RoleHolder, RoleLease, RoleLost
from ...errors import StoreError, UserError

__all__ = ["PostgresRoleLeases", "check_role", "roles_by_owner"]

_Connection = psycopg.AsyncConnection[TupleRow]
_Pool = AsyncConnectionPool[_Connection]

_EXPIRY: Final = "clock_timestamp() + make_interval(secs => %s::double precision)"

# One statement: a new role's row is inserted held; an existing row is taken only when nobody
# holds it, its lease expired, or an earlier run of this worker holds it. Two takers at once:
# the second's conflict waits for the first's commit and re-checks the condition on the row it
# wrote, so exactly one of them gets a row back.
_TAKE: Final = (
    "INSERT INTO role_leases AS r (role, owner, epoch, acquired_at, renewed_at, expires_at) "
    f"VALUES (%s, %s, 1, clock_timestamp(), clock_timestamp(), {_EXPIRY}) "
    "ON CONFLICT (role) DO UPDATE SET owner = excluded.owner, epoch = r.epoch + 1, "
    "acquired_at = excluded.acquired_at, renewed_at = excluded.renewed_at, "
    "expires_at = excluded.expires_at "
    "WHERE r.owner IS NULL OR r.owner = excluded.owner OR r.expires_at <= clock_timestamp() "
    "RETURNING epoch, expires_at"
)
# How long a take waits for the role's row while a cursor write locks it: a quarter of the lease
# (standby workers try every third), within these bounds.
_TAKE_MIN_WAIT_MS: Final = 50
_TAKE_MAX_WAIT_MS: Final = 1000
_RENEW: Final = (
    f"UPDATE role_leases SET renewed_at = clock_timestamp(), expires_at = {_EXPIRY} "
    "WHERE role = %s AND owner = %s AND epoch = %s AND expires_at > clock_timestamp() "
    "RETURNING expires_at"
)
_RELEASE: Final = (
    "UPDATE role_leases SET owner = NULL, expires_at = clock_timestamp() "
    "WHERE role = %s AND owner = %s AND epoch = %s"
)
_HOLDER: Final = (
    "SELECT owner, epoch, extract(epoch FROM expires_at - clock_timestamp())::double precision "
    "FROM role_leases WHERE role = %s AND owner IS NOT NULL AND expires_at > clock_timestamp()"
)
_HAND_OVER: Final = (
    "INSERT INTO role_handoffs (role, message_id, handed_at) VALUES (%s, %s, clock_timestamp()) "
    "ON CONFLICT (role, message_id) DO NOTHING"
)
# Drops the role's hand-overs older than the look-back and reads the rest, oldest first.
_HANDED_OVER: Final = (
    "WITH cutoff AS "
    "(SELECT clock_timestamp() - make_interval(secs => %s::double precision) AS at), "
    "dropped AS "
    "(DELETE FROM role_handoffs WHERE role = %s AND handed_at <= (SELECT at FROM cutoff)) "
    "SELECT message_id FROM role_handoffs "
    "WHERE role = %s AND handed_at > (SELECT at FROM cutoff) ORDER BY seq LIMIT %s"
)
_DONE_WITH: Final = "DELETE FROM role_handoffs WHERE role = %s AND message_id = %s"
_HELD_ROLES: Final = (
    "SELECT owner, role FROM role_leases "
    "WHERE owner IS NOT NULL AND expires_at > clock_timestamp() ORDER BY owner, role"
)


async def check_role(conn: _Connection, lease: RoleLease, what: str) -> None:
    """In the caller's transaction: lock the role's row ``FOR SHARE`` (a take, which updates
    the row, waits until this transaction ends) and raise :class:`RoleLost` unless it still has
    `lease`'s owner and epoch and an unexpired lease, by the database's clock."""
    cursor = await conn.execute(
        "SELECT owner, epoch, expires_at > clock_timestamp() FROM role_leases "
        "WHERE role = %s FOR SHARE",
        (lease.role,),
    )
    row = await cursor.fetchone()
    if row is not None and row[0] == lease.owner and row[1] == lease.epoch and row[2]:
        return
    now = "nobody" if row is None or row[0] is None else f"worker {row[0]} (epoch {row[1]})"
    raise RoleLost(
        f"Worker {lease.owner} no longer holds the role {lease.role!r} (epoch {lease.epoch}): "
        f"its lease expired or the role moved, and {now} holds it now; so {what} was not "
        "written. The channel waits in standby while the holder runs it."
    )


async def roles_by_owner(pool: _Pool, where: str) -> dict[str, tuple[str, ...]]:
    """The roles each worker holds now (unexpired leases, by the database's clock), for
    ``wakeful workers``."""
    try:
        async with pool.connection() as conn:
            cursor = await conn.execute(_HELD_ROLES)
            rows = await cursor.fetchall()
    except psycopg.Error as exc:
        raise StoreError(
            f"Could not read which worker holds which role on {where}: {str(exc).strip()}. "
            "Check that the server runs and is reachable."
        ) from exc
    held: dict[str, tuple[str, ...]] = {}
    for owner, role in rows:
        held[owner] = (*held.get(owner, ()), role)
    return held


class PostgresRoleLeases:
    """The roles one worker (`owner`) takes, renews and releases on a PostgreSQL store (see the
    module docs); a :class:`wakeful.core.channel.RoleLeases`. Use
    ``PostgresStore.role_leases(owner, lease_seconds=…)``."""

    def __init__(self, pool: _Pool, where: str, owner: str, lease_seconds: float) -> None:
        if not lease_seconds > 0:
            raise UserError(
                f"lease_seconds of role leases must be more than 0, got {lease_seconds}; use "
                "the workers' lease time ([store] lease_seconds, 15 s by default)."
            )
        if not owner:
            raise UserError("Role leases need the id of the worker that holds them; got ''.")
        self._pool = pool
        self._where = where
        self._owner = owner
        self._lease_seconds = lease_seconds

    @property
    def owner(self) -> str:
        return self._owner

    @property
    def lease_seconds(self) -> float:
        return self._lease_seconds

    async def take(self, role: str) -> RoleLease | None:
        """Take `role` (a new epoch) unless another worker holds an unexpired lease on it.

        None too, after a short wait, while a cursor write locks the role's row: a holder frozen
        inside one keeps it locked until the server ends its transaction
        (``idle_in_transaction_session_timeout``), and the next attempt takes the role then."""
        wait_ms = max(_TAKE_MIN_WAIT_MS, min(_TAKE_MAX_WAIT_MS, self._lease_seconds * 250))
        try:
            async with self._pool.connection() as conn, conn.transaction():
                await conn.execute(f"SET LOCAL lock_timeout = {int(wait_ms)}")
                cursor = await conn.execute(
                    _TAKE.encode(), (role, self._owner, self._lease_seconds)
                )
                row = await cursor.fetchone()
        except psycopg.errors.LockNotAvailable:
            return None
        except psycopg.Error as exc:
            raise self._error(f"take the role {role!r}", exc) from exc
        if row is None:
            return None
        return RoleLease(role, self._owner, int(row[0]), row[1])

    async def renew(self, lease: RoleLease) -> RoleLease | None:
        """Extend `lease` by the lease time from now, in one statement; None when the role was
        taken over, released or had expired (it is lost: stop acting on it)."""
        row = await self._one(
            _RENEW,
            (self._lease_seconds, lease.role, lease.owner, lease.epoch),
            f"renew the role {lease.role!r}",
        )
        if row is None:
            return None
        return RoleLease(lease.role, lease.owner, lease.epoch, row[0])

    async def release(self, lease: RoleLease) -> bool:
        """Give the role up at once; False when `lease` no longer held it."""
        try:
            async with self._pool.connection() as conn:
                cursor = await conn.execute(_RELEASE, (lease.role, lease.owner, lease.epoch))
        except psycopg.Error as exc:
            raise self._error(f"release the role {lease.role!r}", exc) from exc
        return cursor.rowcount == 1

    async def holder(self, role: str) -> RoleHolder | None:
        """Who holds `role` now (an unexpired lease), by the database's clock; None if nobody."""
        row = await self._one(_HOLDER, (role,), f"read who holds the role {role!r}")
        if row is None:
            return None
        return RoleHolder(str(row[0]), int(row[1]), float(row[2]))

    async def hand_over(self, role: str, message_id: str) -> None:
        """Leave the stored message `message_id` to the holder of `role` (see the module docs);
        a second hand-over of it changes nothing."""
        await self._all(_HAND_OVER, (role, message_id), f"hand message {message_id} to {role!r}")

    async def handed_over(self, role: str, *, within_s: float, limit: int) -> list[str]:
        """The messages handed to `role` in the last `within_s` seconds, oldest first, at most
        `limit`; older ones are dropped (never sent)."""
        rows = await self._all(
            _HANDED_OVER,
            (within_s, role, role, limit),
            f"read the messages handed to {role!r}",
        )
        return [str(message_id) for (message_id,) in rows]

    async def done_with(self, role: str, message_id: str) -> None:
        """Forget the hand-over of `message_id` to `role` (it was sent, failed, or needs
        nothing)."""
        await self._all(
            _DONE_WITH, (role, message_id), f"forget message {message_id} handed to {role!r}"
        )

    async def _one(self, query: str, params: tuple[object, ...], what: str) -> TupleRow | None:
        rows = await self._all(query, params, what)
        return rows[0] if rows else None

    async def _all(self, query: str, params: Sequence[object], what: str) -> list[TupleRow]:
        try:
            async with self._pool.connection() as conn:
                cursor = await conn.execute(query.encode(), params)
                return await cursor.fetchall() if cursor.description else []
        except psycopg.Error as exc:
            raise self._error(what, exc) from exc

    def _error(self, what: str, exc: psycopg.Error) -> StoreError:
        return StoreError(
            f"Could not {what} for worker {self._owner} on {self._where}: {str(exc).strip()}. "
            "Check that the server runs and is reachable; the role is tried again."
        )
