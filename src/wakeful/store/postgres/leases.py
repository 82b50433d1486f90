"""Workers and session leases on PostgreSQL: which worker owns which session, for how long, and
the fencing token that keeps a worker that lost a session from writing for it.

A worker registers (a ``workers`` row, its heartbeat renewed with its leases) and owns a session
while it holds that session's lease: a ``session_leases`` row naming it as `owner` with an
`expires_at` in the future. The lease's `epoch` grows each time the session is acquired, and
every write a worker makes for a session carries the :class:`Lease` it holds
(:meth:`wakeful.store.postgres.PostgresStore.fenced`): the write's transaction first checks that
the row still has this owner and epoch and is unexpired, locking it ``FOR KEY SHARE``; otherwise
the write fails with :class:`LeaseLost` and nothing of it is saved. Every takeover (an
acquisition or a claim) locks the row ``FOR UPDATE`` before it changes the owner, and that lock
conflicts with the write's, so no takeover can commit between the check and the write: the write
commits first, and the new owner, which loads the session after its takeover, sees it. (``FOR
KEY SHARE`` rather than ``FOR SHARE``: a renewal, a plain ``UPDATE`` of the expiry, does not
conflict with it, so renewing never waits for the worker's own writes, and the two cannot
deadlock when a batch of writes fences several sessions.) Every time is judged by the database's
clock (``clock_timestamp()``), never a worker's, so clocks that differ between machines do not
matter.

Leases are rows with an expiry rather than advisory locks: an advisory lock lives as long as its
connection, so a worker cut off from the database keeps it until the server notices the dead TCP
connection (minutes), and a lock carries no token a write could be checked against.

Failure modes, and what happens:

- **A worker dies** (kill -9, the machine goes down): it stops renewing; its leases expire after
  `lease_seconds`; :meth:`Worker.claim` on another worker takes the sessions (``FOR UPDATE SKIP
  LOCKED``: two claimers never take one session), each with a new epoch. The new owner marks the
  dead worker's running tasks of the session lost (the fenced view's ``mark_running_lost``) and
  repairs the trajectory, exactly as after a crash of a single process.
- **A worker freezes** (SIGSTOP, a long GC pause, a VM migration) past its lease: another worker
  takes its sessions. When it resumes, every write it attempts for them fails with
  :class:`LeaseLost` (the epoch changed) and its next renewal reports them lost, so it stops
  working on them. A worker frozen *inside* a write transaction keeps the lease row locked:
  claimers skip the row and :meth:`Worker.acquire` gives up after a short lock timeout, until the
  server ends that transaction (``idle_in_transaction_session_timeout``, set on the store's
  connections to :data:`IDLE_IN_TRANSACTION_TIMEOUT_S`).
- **A network partition** between a worker and the database: it cannot renew; its fenced writes
  cannot reach the database either. :meth:`Worker.keep_leases` counts a lease lost once
  `lease_seconds` have passed on the worker's monotonic clock since the start of its last
  successful renewal, so the worker stops acting on those sessions at about the moment others
  may take them; if a write still gets through later, the fence refuses it.
- **The database restarts**: leases are rows, so they survive it; renewals fail while it is down
  and resume when it is back. If it was down longer than `lease_seconds`, every lease has expired
  and is claimed again (by its old owner too), with new epochs.
- **A clock jumps**: the database's wall clock decides expiry; a jump of the server's clock
  expires leases early (forward) or keeps dead workers' leases longer (backward). Workers' wall
  clocks play no part; their local estimate of a lease uses the monotonic clock.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Final

import anyio
import psycopg
import psycopg.errors
from anyio.abc import TaskStatus
from psycopg.rows import TupleRow
from psycopg_pool import AsyncConnectionPool

from ...errors import SessionMoved, StoreError, UserError

__all__ = [
    "IDLE_IN_TRANSACTION_TIMEOUT_S",
    "LEASE_FOUND",
    "LEASE_HELD",
    "LEASE_ROW",
    "HeldSession",
    "KeptWorker",
    "Lease",
    "LeaseLost",
    "LostLease",
    "PrunedWorkers",
    "Renewal",
    "Worker",
    "WorkerInfo",
    "check_lease",
    "lease_row_params",
    "list_workers",
    "prune_workers",
    "refuse_unless_held",
    "register_worker",
]

log = logging.getLogger(__name__)

_Connection = psycopg.AsyncConnection[TupleRow]
_Pool = AsyncConnectionPool[_Connection]

# How long the server lets a transaction of the store wait on its client before ending it; what
# bounds the time a worker frozen inside a write keeps a lease row locked.
IDLE_IN_TRANSACTION_TIMEOUT_S: Final = 10.0
# How long :meth:`Worker.acquire` waits for a lease row another transaction has locked.
ACQUIRE_LOCK_TIMEOUT_MS: Final = 1000

_EXPIRY: Final = "clock_timestamp() + make_interval(secs => %s::double precision)"


@dataclass(frozen=True)
class Lease:
    """A worker's ownership of a session: the token its writes for the session carry.

    `epoch` grows each time the session is acquired; `expires_at` is when the database will let
    another worker take the session unless the lease is renewed (as of the last renewal).
    """

    session: str
    owner: str
    epoch: int
    expires_at: datetime


@dataclass(frozen=True)
class LostLease:
    """A lease its worker no longer holds: `owner` and `epoch` are the session's now (owner None:
    nobody holds it; the same owner and epoch: it expired before it was renewed)."""

    lease: Lease
    owner: str | None
    epoch: int | None

    @property
    def why(self) -> str:
        if self.owner is None:
            return "nobody holds it now (it was released)"
        if self.owner != self.lease.owner or self.epoch != self.lease.epoch:
            return f"worker {self.owner} holds it now (epoch {self.epoch})"
        return "it expired before it was renewed"


class LeaseLost(SessionMoved):
    """Raised by a fenced write (and so by the store) when the worker's lease on the session is no
    longer valid: another worker took the session over, or the lease expired. Nothing of the
    write was saved; the worker must stop working on the session."""

    def __init__(self, lost: LostLease, what: str) -> None:
        lease = lost.lease
        super().__init__(
            f"Worker {lease.owner} no longer holds the lease on session {lease.session!r} "
            f"(epoch {lease.epoch}): {lost.why}. Nothing of {what} was saved. Stop working on "
            "this session here; its current owner continues it from the store."
        )
        self.lost = lost
        self.session = lease.session
        self.owner = lost.owner


# The head of a fenced write's statement (a WITH item, parameters: owner, epoch, session): the
# lease row locked ``FOR KEY SHARE`` (no takeover can commit until the write's transaction ends:
# each locks the row ``FOR UPDATE`` first), with whether the lease is still held. A write folds
# the check into its own statement by changing rows only where :data:`LEASE_HELD` and ending
# with :data:`LEASE_FOUND`, then passes that row to :func:`refuse_unless_held`: the check and
# the write are one round trip, and the write is skipped in the server when the lease is lost.
LEASE_ROW: Final = (
    "lease AS MATERIALIZED (SELECT owner, epoch, "
    "owner = %s AND epoch = %s AND expires_at > clock_timestamp() AS held "
    "FROM session_leases WHERE session = %s FOR KEY SHARE)"
)
LEASE_HELD: Final = "coalesce((SELECT held FROM lease), false)"
LEASE_FOUND: Final = "SELECT owner, epoch, held FROM lease"


def lease_row_params(lease: Lease) -> tuple[str, int, str]:
    """The parameters of :data:`LEASE_ROW` for `lease`."""
    return (lease.owner, lease.epoch, lease.session)


def refuse_unless_held(found: TupleRow | None, lease: Lease, what: str) -> None:
    """Raise :class:`LeaseLost` unless `found` (the row of :data:`LEASE_FOUND`; None when the
    session has no lease row) says `lease` is still held."""
    if found is None:
        raise LeaseLost(LostLease(lease, None, None), what)
    owner, epoch, held = found
    if not held:
        raise LeaseLost(LostLease(lease, owner, None if epoch is None else int(epoch)), what)


async def check_lease(conn: _Connection, lease: Lease, what: str) -> None:
    """In the caller's transaction: lock the lease row of `lease.session` ``FOR KEY SHARE`` (no
    takeover can commit until this transaction ends: each locks the row ``FOR UPDATE`` first)
    and raise :class:`LeaseLost` unless it still has this owner and epoch and is unexpired. A
    round trip of its own, for writes of several statements; a write of one statement folds the
    check into it (:data:`LEASE_ROW`)."""
    cursor = await conn.execute(f"WITH {LEASE_ROW} {LEASE_FOUND}", lease_row_params(lease))
    refuse_unless_held(await cursor.fetchone(), lease, what)


@dataclass(frozen=True)
class Renewal:
    """What one renewal found: the leases renewed (with their new expiry) and those lost."""

    renewed: tuple[Lease, ...]
    lost: tuple[LostLease, ...]


@dataclass(frozen=True)
class HeldSession:
    """A session a worker holds, as ``wakeful workers`` shows it."""

    session: str
    epoch: int
    held_for_s: float
    expires_in_s: float


@dataclass(frozen=True)
class WorkerInfo:
    """A registered worker, as ``wakeful workers`` shows it (ages by the database's clock).
    `gone_for_s`: None while it is alive; else the seconds since it stopped, or since its last
    heartbeat when it lapsed (what ``wakeful workers`` hides old ones by)."""

    id: str
    host: str
    pid: int
    started_at: datetime
    heartbeat_age_s: float
    stopped_at: datetime | None
    alive: bool
    sessions: tuple[HeldSession, ...]
    gone_for_s: float | None = None


@dataclass(frozen=True)
class KeptWorker:
    """A stopped or lapsed worker :func:`prune_workers` left in place, and what still names it:
    unexpired leases, running tasks' records, running idempotency claims."""

    id: str
    leases: int
    running_tasks: int
    running_claims: int


@dataclass(frozen=True)
class PrunedWorkers:
    """What :func:`prune_workers` did: the workers it removed, and those old enough that it kept
    because something still names them."""

    removed: tuple[str, ...]
    kept: tuple[KeptWorker, ...]


@dataclass(frozen=True)
class _Registration:
    """The unexpired registration that holds a worker's name: where it runs, and in how many
    seconds (by the database's clock) it expires unless renewed."""

    host: str
    pid: int
    expires_in_s: float


def _store_error(where: str, what: str, exc: psycopg.Error) -> StoreError:
    error = StoreError(
        f"Could not {what} on {where}: {str(exc).strip()}. Check that the server runs and is "
        "reachable; the worker's leases are renewed again once it is."
    )
    error.__cause__ = exc
    return error


# The sessions with work waiting for an owner: pending events, requests to a person not settled
# (open, or an outcome not handed over), children running (their own session) and children's
# results not handed over (their parent's). UNION also makes them distinct.
_WAITING: Final = (
    "SELECT session FROM events WHERE status = 'pending' "
    "UNION SELECT session FROM human_requests WHERE status = 'open' OR NOT delivered "
    "UNION SELECT CASE WHEN status = 'running' THEN id ELSE parent END FROM subagents "
    "WHERE status = 'running' OR NOT delivered"
)


def _check_seconds(lease_seconds: float) -> None:
    if not lease_seconds > 0:
        raise UserError(f"lease_seconds must be more than 0, got {lease_seconds}.")


# A registration's name is free once it stopped or its heartbeat lapsed (its leases, renewed
# with the heartbeat, have run out too, but for one acquired since the last beat, which its
# epoch still fences: the restarted run's acquisition gets a new one).
_NAME_FREE: Final = (
    "w.stopped_at IS NOT NULL "
    "OR w.heartbeat_at + make_interval(secs => w.lease_seconds) <= clock_timestamp()"
)
# How much longer than the previous registration's time a restart waits before trying again:
# the database's clock and this process's sleep are not the same clock.
_EXPIRY_MARGIN_S: Final = 0.2


async def register_worker(
    pool: _Pool, where: str, *, lease_seconds: float, name: str | None = None
) -> Worker:
    """Register a worker (a ``workers`` row) and return it. `name` gives it a stable id (a
    restarted worker then finds its own tasks). A registration under that name that has not
    expired yet (a worker killed a moment ago, restarted by its supervisor) is waited for, at
    most its remaining lease time, logged once; a live worker of that name, which keeps
    renewing meanwhile, is refused (UserError)."""
    _check_seconds(lease_seconds)
    host, pid = socket.gethostname(), os.getpid()
    worker_id = name or f"{host}-{pid}-{secrets.token_hex(3)}"
    previous = await _take_name(pool, where, worker_id, host, pid, lease_seconds)
    if isinstance(previous, _Registration):
        log.warning(
            "waiting up to %.1f s for the previous worker named %s (pid %d on %s) to expire",
            previous.expires_in_s,
            worker_id,
            previous.pid,
            previous.host,
        )
        await anyio.sleep(previous.expires_in_s + _EXPIRY_MARGIN_S)
        previous = await _take_name(pool, where, worker_id, host, pid, lease_seconds)
    if isinstance(previous, _Registration):
        raise UserError(
            f"A live worker named {worker_id!r} (pid {previous.pid} on {previous.host}) is "
            f"registered on {where}. Give each worker a name of its own, or leave the name out "
            "to get a unique one."
        )
    return Worker(pool, where, worker_id, lease_seconds, registered_at=previous)


async def _take_name(
    pool: _Pool, where: str, worker_id: str, host: str, pid: int, lease_seconds: float
) -> datetime | _Registration:
    """Register `worker_id` (its `started_at`) unless an unexpired registration holds the
    name (that one). A registration deleted meanwhile (pruned) frees the name."""
    try:
        async with pool.connection() as conn:
            cursor = await conn.execute(
                "INSERT INTO workers AS w (id, host, pid, lease_seconds, started_at, heartbeat_at) "
                "VALUES (%s, %s, %s, %s, clock_timestamp(), clock_timestamp()) "
                "ON CONFLICT (id) DO UPDATE SET host = excluded.host, pid = excluded.pid, "
                "lease_seconds = excluded.lease_seconds, started_at = excluded.started_at, "
                f"heartbeat_at = excluded.heartbeat_at, stopped_at = NULL WHERE {_NAME_FREE} "
                "RETURNING started_at",
                (worker_id, host, pid, lease_seconds),
            )
            taken = await cursor.fetchone()
            if taken is not None:
                started: datetime = taken[0]
                return started
            cursor = await conn.execute(
                "SELECT host, pid, extract(epoch FROM heartbeat_at "
                "+ make_interval(secs => lease_seconds) - clock_timestamp())::double precision "
                "FROM workers WHERE id = %s",
                (worker_id,),
            )
            holder = await cursor.fetchone()
    except psycopg.Error as exc:
        raise _store_error(where, f"register worker {worker_id}", exc) from exc
    if holder is None:  # pruned between the two statements: the name is free now
        return await _take_name(pool, where, worker_id, host, pid, lease_seconds)
    other_host, other_pid, left = holder
    return _Registration(other_host, int(other_pid), max(float(left), 0.0))


async def list_workers(pool: _Pool, where: str) -> list[WorkerInfo]:
    """Every registered worker, oldest first, with the sessions it holds (lease ages by the
    database's clock)."""
    try:
        async with pool.connection() as conn:
            cursor = await conn.execute(
                "SELECT w.id, w.host, w.pid, w.started_at, "
                "extract(epoch FROM clock_timestamp() - w.heartbeat_at)::double precision, "
                "w.stopped_at, w.lease_seconds, "
                "extract(epoch FROM clock_timestamp() - w.stopped_at)::double precision, "
                "l.session, l.epoch, "
                "extract(epoch FROM clock_timestamp() - l.acquired_at)::double precision, "
                "extract(epoch FROM l.expires_at - clock_timestamp())::double precision "
                "FROM workers w LEFT JOIN session_leases l "
                "ON l.owner = w.id AND l.expires_at > clock_timestamp() "
                "ORDER BY w.started_at, w.id, l.session"
            )
            rows = await cursor.fetchall()
    except psycopg.Error as exc:
        raise _store_error(where, "list the workers", exc) from exc
    workers: dict[str, WorkerInfo] = {}
    for wid, host, pid, started, age, stopped, seconds, stopped_for, *lease in rows:
        info = workers.get(wid) or _worker_info(
            wid, host, pid, started, float(age), stopped, float(seconds), stopped_for
        )
        session, epoch, held, left = lease
        if session is not None:
            held_session = HeldSession(session, int(epoch), float(held), float(left))
            info = replace(info, sessions=(*info.sessions, held_session))
        workers[wid] = info
    return list(workers.values())


def _worker_info(
    wid: str,
    host: str,
    pid: int,
    started: datetime,
    age: float,
    stopped: datetime | None,
    lease_seconds: float,
    stopped_for: float | None,
) -> WorkerInfo:
    """A worker without its sessions: alive while not stopped and its heartbeat is younger
    than its lease; gone since it stopped, or since its last heartbeat when it lapsed."""
    alive = stopped is None and age < lease_seconds
    gone_for = None if alive else (age if stopped_for is None else float(stopped_for))
    return WorkerInfo(wid, host, int(pid), started, age, stopped, alive, (), gone_for)


async def prune_workers(pool: _Pool, where: str, *, older_than_s: float) -> PrunedWorkers:
    """Delete the rows of workers stopped, or lapsed, more than `older_than_s` seconds ago (by
    the database's clock), except those still named by an unexpired lease, a running task's
    record or a running idempotency claim (a restart under that name, or the claim's
    outcome, still needs them). A live worker is never removed: one statement re-checks each
    row as it deletes it, so a worker re-registering meanwhile keeps its row."""
    if not older_than_s >= 0:
        raise UserError(f"older_than_s must be 0 or more, got {older_than_s}.")
    gone = (
        "(w.stopped_at IS NOT NULL OR w.heartbeat_at + make_interval(secs => w.lease_seconds) "
        "<= clock_timestamp()) AND coalesce(w.stopped_at, w.heartbeat_at) "
        "<= clock_timestamp() - make_interval(secs => %(age)s::double precision)"
    )
    try:
        async with pool.connection() as conn:
            cursor = await conn.execute(
                "WITH old AS (SELECT w.id, "
                "(SELECT count(*) FROM session_leases l "
                "WHERE l.owner = w.id AND l.expires_at > clock_timestamp()) AS leases, "
                "(SELECT count(*) FROM tasks t WHERE t.worker = w.id AND t.state = 'running') "
                "AS tasks, "
                "(SELECT count(*) FROM idempotency_keys k "
                "WHERE k.worker = w.id AND k.state = 'running') AS claims "
                f"FROM workers w WHERE {gone}), "
                "removed AS (DELETE FROM workers w USING old WHERE w.id = old.id "
                f"AND old.leases = 0 AND old.tasks = 0 AND old.claims = 0 AND {gone} "
                "RETURNING w.id) "
                "SELECT old.id, old.leases, old.tasks, old.claims, "
                "old.id IN (SELECT id FROM removed) FROM old ORDER BY old.id",
                {"age": older_than_s},
            )
            rows = await cursor.fetchall()
    except psycopg.Error as exc:
        raise _store_error(where, "prune the workers", exc) from exc
    removed = tuple(wid for wid, *_, deleted in rows if deleted)
    kept = tuple(
        KeptWorker(wid, int(leases), int(tasks), int(claims))
        for wid, leases, tasks, claims, deleted in rows
        if not deleted
    )
    return PrunedWorkers(removed, kept)


class Worker:
    """One registered worker: acquires, renews, releases and claims session leases.

    Use :func:`register_worker` (or ``PostgresStore.register_worker``). The worker remembers
    the leases it holds (:attr:`held`), and :meth:`renew` renews all of them in one statement.
    """

    def __init__(
        self,
        pool: _Pool,
        where: str,
        worker_id: str,
        lease_seconds: float,
        *,
        registered_at: datetime | None = None,
    ) -> None:
        _check_seconds(lease_seconds)
        self.id = worker_id
        # When this run registered (`workers.started_at`): what tells its row from that of a
        # later run under the same name; None for a Worker made by hand (tests).
        self.registered_at = registered_at
        self.lease_seconds = lease_seconds
        self.held: dict[str, Lease] = {}
        self._pool = pool
        self._where = where
        # Monotonic time at which the last successful renewal (or acquisition) of each held
        # lease started: what the worker's own estimate of its leases counts from.
        self._confirmed: dict[str, float] = {}

    def _hold(self, lease: Lease, since: float) -> Lease:
        self.held[lease.session] = lease
        self._confirmed[lease.session] = since
        return lease

    def _drop(self, session: str) -> None:
        self.held.pop(session, None)
        self._confirmed.pop(session, None)

    async def acquire(self, session: str) -> Lease | None:
        """Take the lease on `session` (a new epoch), or renew it if this worker holds it; None
        when another worker holds an unexpired lease on it, or keeps its row locked for longer
        than a second (a write in progress): try again later."""
        since = time.monotonic()
        try:
            async with self._pool.connection() as conn, conn.transaction():
                await conn.execute(f"SET LOCAL lock_timeout = {ACQUIRE_LOCK_TIMEOUT_MS}")
                if not await self._still_registered(conn):
                    return None
                await conn.execute(
                    "INSERT INTO session_leases (session) VALUES (%s) ON CONFLICT DO NOTHING",
                    (session,),
                )
                cursor = await conn.execute(
                    "SELECT owner, epoch, expires_at > clock_timestamp() FROM session_leases "
                    "WHERE session = %s FOR UPDATE",
                    (session,),
                )
                row = await cursor.fetchone()
                assert row is not None  # inserted above, and lease rows are never deleted
                owner, epoch, live = row
                if owner is not None and live and owner != self.id:
                    return None
                # Held by this worker: renewed, same epoch. (A lease of an earlier run under
                # this worker's name is not this run's: it gets a new epoch.)
                mine = self.held.get(session)
                keep_epoch = (
                    owner == self.id and bool(live) and mine is not None and mine.epoch == epoch
                )
                cursor = await conn.execute(
                    f"UPDATE session_leases SET owner = %s, epoch = epoch + %s, "
                    f"acquired_at = CASE WHEN %s THEN acquired_at ELSE clock_timestamp() END, "
                    f"renewed_at = clock_timestamp(), expires_at = {_EXPIRY} "
                    "WHERE session = %s RETURNING epoch, expires_at",
                    (self.id, 0 if keep_epoch else 1, keep_epoch, self.lease_seconds, session),
                )
                updated = await cursor.fetchone()
                assert updated is not None
        except psycopg.errors.LockNotAvailable:
            return None
        except psycopg.Error as exc:
            raise _store_error(
                self._where, f"acquire the lease on session {session!r}", exc
            ) from exc
        return self._hold(Lease(session, self.id, int(updated[0]), updated[1]), since)

    async def _still_registered(self, conn: _Connection) -> bool:
        """In the caller's transaction: whether the name's registration is still this run's,
        its row locked until the transaction ends (a restart under the name waits for it); a
        run replaced by a restart under its name (it froze past its lease) takes nothing more."""
        if self.registered_at is None:
            return True
        cursor = await conn.execute(
            "SELECT 1 FROM workers WHERE id = %s AND started_at = %s FOR KEY SHARE",
            (self.id, self.registered_at),
        )
        return await cursor.fetchone() is not None

    async def renew(self) -> Renewal:
        """Renew every lease this worker holds, and its heartbeat, in one statement; the leases
        that were taken over or expired meanwhile are dropped from :attr:`held` and returned as
        lost."""
        held = list(self.held.values())
        since = time.monotonic()
        try:
            async with self._pool.connection() as conn:
                cursor = await conn.execute(
                    "WITH held AS (SELECT * FROM unnest(%s::text[], %s::bigint[]) "
                    "AS h(session, epoch)), "
                    "beat AS (UPDATE workers SET heartbeat_at = clock_timestamp() WHERE id = %s "
                    "AND started_at = coalesce(%s, started_at)), "
                    f"renewed AS (UPDATE session_leases l SET renewed_at = clock_timestamp(), "
                    f"expires_at = {_EXPIRY} FROM held WHERE l.session = held.session "
                    "AND l.epoch = held.epoch AND l.owner = %s "
                    "AND l.expires_at > clock_timestamp() "
                    "RETURNING l.session, l.expires_at) "
                    "SELECT held.session, renewed.expires_at, now_row.owner, now_row.epoch "
                    "FROM held LEFT JOIN renewed ON renewed.session = held.session "
                    "LEFT JOIN session_leases now_row ON now_row.session = held.session",
                    (
                        [lease.session for lease in held],
                        [lease.epoch for lease in held],
                        self.id,
                        self.registered_at,
                        self.lease_seconds,
                        self.id,
                    ),
                )
                rows = await cursor.fetchall()
        except psycopg.Error as exc:
            raise _store_error(self._where, f"renew the leases of worker {self.id}", exc) from exc
        renewed: list[Lease] = []
        lost: list[LostLease] = []
        for session, expires_at, owner, epoch in rows:
            lease = self.held.get(session)
            if lease is None:
                continue  # released meanwhile
            if expires_at is not None:
                renewed.append(self._hold(Lease(session, self.id, lease.epoch, expires_at), since))
            else:
                self._drop(session)
                lost.append(LostLease(lease, owner, None if epoch is None else int(epoch)))
        return Renewal(tuple(renewed), tuple(lost))

    async def release(self, lease: Lease) -> bool:
        """Give the session up (another worker may take it at once); False when this lease was
        no longer held."""
        self._drop(lease.session)
        try:
            async with self._pool.connection() as conn:
                cursor = await conn.execute(
                    "UPDATE session_leases SET owner = NULL, expires_at = clock_timestamp() "
                    "WHERE session = %s AND owner = %s AND epoch = %s",
                    (lease.session, lease.owner, lease.epoch),
                )
        except psycopg.Error as exc:
            raise _store_error(self._where, f"release session {lease.session!r}", exc) from exc
        return cursor.rowcount == 1

    async def claim(self, limit: int = 10, *, add_rows: bool = True) -> list[Lease]:
        """Take up to `limit` sessions nobody holds: unowned sessions with work waiting (pending
        events, a request to a person not settled, a child running or its result not handed
        over: a worker that stopped cleanly released them) and sessions whose lease expired
        (their worker died or was cut off). Claimers running together never take the same
        session (``FOR UPDATE SKIP LOCKED``). `add_rows=False` skips giving new sessions with
        work their lease rows first (a scan of the waiting work): for the later batches of one
        claim pass, whose first batch did it."""
        if limit < 1:
            raise UserError(f"limit must be at least 1, got {limit}.")
        since = time.monotonic()
        try:
            if add_rows:
                async with self._pool.connection() as conn:
                    # Every session with work waiting gets a lease row (an event is stored by
                    # any writer, without one), so that claiming is one locking query on the
                    # rows. Its own short transaction, in session order: claimers inserting the
                    # same new rows wait for each other in one order, never in a cycle.
                    await conn.execute(
                        "INSERT INTO session_leases (session) "
                        f"SELECT session FROM ({_WAITING}) AS waiting "
                        "ORDER BY session ON CONFLICT DO NOTHING"
                    )
            async with self._pool.connection() as conn, conn.transaction():
                if not await self._still_registered(conn):
                    return []  # a later run took this worker's name: it claims, not this one
                cursor = await conn.execute(
                    "WITH picked AS (SELECT l.session, l.owner AS previous FROM session_leases l "
                    "WHERE l.session IN (SELECT session FROM session_leases "
                    "WHERE owner IS NOT NULL AND expires_at <= clock_timestamp() "
                    f"UNION {_WAITING}) "
                    "AND (l.owner IS NULL OR l.expires_at <= clock_timestamp()) "
                    "ORDER BY l.session LIMIT %s FOR UPDATE OF l SKIP LOCKED) "
                    "UPDATE session_leases l SET owner = %s, epoch = l.epoch + 1, "
                    "acquired_at = clock_timestamp(), renewed_at = clock_timestamp(), "
                    f"expires_at = {_EXPIRY} FROM picked WHERE l.session = picked.session "
                    "RETURNING l.session, l.epoch, l.expires_at",
                    (limit, self.id, self.lease_seconds),
                )
                rows = await cursor.fetchall()
        except psycopg.Error as exc:
            raise _store_error(self._where, f"claim sessions for worker {self.id}", exc) from exc
        leases = [Lease(session, self.id, int(epoch), expires) for session, epoch, expires in rows]
        leases.sort(key=lambda lease: lease.session)
        return [self._hold(lease, since) for lease in leases]

    async def stop(self) -> None:
        """Release every lease of this worker and mark it stopped (a clean shutdown: its
        sessions can be claimed at once instead of after their leases expire)."""
        held = list(self.held.values())
        self.held.clear()
        self._confirmed.clear()
        try:
            async with self._pool.connection() as conn, conn.transaction():
                # Only this run's leases and row: a lease under its name with another epoch, or
                # a row with another start, is a later run's (a restart that took the name).
                await conn.execute(
                    "UPDATE session_leases l SET owner = NULL, expires_at = clock_timestamp() "
                    "FROM unnest(%s::text[], %s::bigint[]) AS h(session, epoch) "
                    "WHERE l.session = h.session AND l.epoch = h.epoch AND l.owner = %s",
                    ([lease.session for lease in held], [lease.epoch for lease in held], self.id),
                )
                await conn.execute(
                    "UPDATE workers SET stopped_at = clock_timestamp() WHERE id = %s "
                    "AND started_at = coalesce(%s, started_at)",
                    (self.id, self.registered_at),
                )
        except psycopg.Error as exc:
            raise _store_error(self._where, f"stop worker {self.id}", exc) from exc

    def expired_locally(self, now: float | None = None) -> list[LostLease]:
        """Drop and return the held leases whose time ran out by this worker's monotonic clock
        since their last successful renewal (the database may not have been reachable)."""
        now = time.monotonic() if now is None else now
        lost = []
        for session, since in list(self._confirmed.items()):
            if now - since >= self.lease_seconds:
                lease = self.held[session]
                self._drop(session)
                lost.append(LostLease(lease, lease.owner, lease.epoch))
        return lost

    async def keep_leases(
        self,
        on_lost: Callable[[Sequence[LostLease]], None],
        *,
        every_s: float | None = None,
        task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Renew the held leases every `every_s` (a third of the lease time by default) until
        cancelled, calling `on_lost` with those lost: taken over, expired, or (while the
        database cannot be reached) past their time by the worker's own clock."""
        interval = self.lease_seconds / 3 if every_s is None else every_s
        task_status.started()
        while True:
            try:
                lost: Iterable[LostLease] = (await self.renew()).lost
            except StoreError as exc:
                log.warning("Worker %s could not renew its leases: %s", self.id, exc)
                lost = self.expired_locally()
            lost = list(lost)
            if lost:
                on_lost(lost)
            await anyio.sleep(interval)
