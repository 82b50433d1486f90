"""The PostgreSQL store: the store's repositories on a PostgreSQL database that several wakeful
workers can share (issue 17). SQLite (:mod:`wakeful.store.sqlite`) stays the default.

Driver: psycopg 3, async, with psycopg_pool. Chosen over asyncpg because it is the maintained
reference driver (libpq underneath, so every libpq connection URL, `PG*` variable, service file
and SSL option works unchanged), its typed API passes `mypy --strict`, its async and sync APIs
are the same (CLI commands can read synchronously with the same SQL), and its pool checks and
replaces broken connections. asyncpg is faster on raw round trips, but our writes are one
transaction per write and our reads few; its own protocol and `$1` placeholders would also fork
the SQL from the SQLite store's for no gain here.

What is here (the first slice):

- :class:`PostgresStore` with the core four repositories (:mod:`wakeful.core.repositories`):
  ``events`` (:class:`PostgresEvents`), ``trajectories``, ``task_records``, ``timer_records``,
  with the SQLite store's semantics (ids unique, redeliveries recognised by ``add_new``,
  statuses, arrival order, one transaction per write, writes applied in order, queued writes
  applied even when their caller is cancelled). ``tests/store/test_repositories_conformance.py``
  runs the same behaviours on both backends.
- Versioned migrations (:mod:`.schema`): a ``schema_version`` table, one transaction per step,
  workers migrating one at a time under an advisory lock; a newer schema or another program's
  tables are refused untouched.
- A connection pool for reads; one writer (:mod:`.access`) for writes, in order.

Not done yet (the next sessions continue from here):

- The other repositories: idempotency keys, confirmations, the audit log, channel cursors and
  connected channels, messages to the user, subagents, cases; and the façade's older delegating
  methods (``store.add_event`` …, :class:`wakeful.store.delegation.RepositoryMethods`), so the
  runtime cannot run on this store yet.
- ``wakeful run --store postgresql://…`` and ``[store] url`` in wakeful.toml (the runtime's
  assembly opens :class:`wakeful.store.sqlite.Store` only); CLI commands reading Postgres.
- Session leases (owner + expiry, renewed; fencing of writes by a worker whose lease expired),
  ``LISTEN/NOTIFY`` wake-ups across workers, claiming unowned sessions with
  ``FOR UPDATE SKIP LOCKED``, timers fired exactly once cluster-wide (today ``record_fires``
  stores fires and timers in one transaction, but two workers could both decide to fire),
  ``mark_running_lost`` scoped to one worker's tasks (today it marks every running task, which is
  right for one process only).
- Tailing by ``seq`` across workers: within one process the writer commits seqs in order, but
  two workers' transactions can commit out of seq order; a cross-worker tail needs a commit-order
  watermark (e.g. ``pg_snapshot_xmin``) before ``events tail`` reads Postgres.
- Full-disk handling: a "kept" write is an ordinary write here (PostgreSQL refuses a write on a
  full disk; nothing is held in memory), and ``watch_space`` / ``StoreFull`` are absent.
- Batching several writes in one transaction (the SQLite writer does); the writer applies one
  transaction per write, and reconnects only through the pool.
"""

from __future__ import annotations

from .events import PostgresEvents
from .schema import MIGRATIONS, apply_migrations
from .store import DEFAULT_POOL_SIZE, PostgresStore
from .tasks import PostgresTasks
from .timers import PostgresTimers
from .trajectories import PostgresTrajectories

__all__ = [
    "DEFAULT_POOL_SIZE",
    "MIGRATIONS",
    "PostgresEvents",
    "PostgresStore",
    "PostgresTasks",
    "PostgresTimers",
    "PostgresTrajectories",
    "apply_migrations",
]
