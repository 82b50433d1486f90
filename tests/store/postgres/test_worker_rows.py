"""Workers' rows over time, on a real PostgreSQL: long-gone workers are pruned (never a live one,
never one a lease, a running task or a running idempotency claim still names), and a worker
restarted under its name right after a kill -9 waits for its previous registration to expire
and takes the name, while a live duplicate is still refused and a frozen predecessor, resumed,
writes nothing."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import pytest
from worker_processes import worker_processes

from wakeful.errors import UserError

psycopg = pytest.importorskip("psycopg", reason="psycopg is missing: pip install -e '.[postgres]'")

from wakeful.store.postgres import PostgresStore  # noqa: E402
from wakeful.store.postgres.leases import KeptWorker, prune_workers  # noqa: E402

DAY_S = 86400.0
LEASE_S = 1.5


@asynccontextmanager
async def opened(url: str) -> AsyncIterator[PostgresStore]:
    async with await PostgresStore.open(url, pool_size=2) as store:
        yield store


async def run_sql(url: str, query: str, params: tuple[object, ...] = ()) -> None:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(query.encode(), params)


async def rows(url: str, query: str) -> list[tuple[object, ...]]:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cursor = await conn.execute(query.encode())
        return await cursor.fetchall()


async def gone_two_days_ago(url: str, worker: str) -> None:
    """Age a worker's row as if it had stopped (or last beat) two days ago."""
    await run_sql(
        url,
        "UPDATE workers SET started_at = clock_timestamp() - interval '3 days', "
        "heartbeat_at = clock_timestamp() - interval '2 days', "
        "stopped_at = CASE WHEN stopped_at IS NULL THEN NULL "
        "ELSE clock_timestamp() - interval '2 days' END WHERE id = %s",
        (worker,),
    )


@pytest.mark.anyio
async def test_prune_removes_only_long_gone_workers_nothing_names(postgres_url: str) -> None:
    async with opened(postgres_url) as store:
        live = await store.register_worker(lease_seconds=30, name="live")
        for name in ("old-stopped", "old-lapsed", "recent", "leasing", "tasked", "claiming"):
            await store.register_worker(lease_seconds=30, name=name)
        await store.workers()  # all registered
        for name in ("old-stopped", "recent"):
            await run_sql(
                postgres_url,
                "UPDATE workers SET stopped_at = clock_timestamp() WHERE id = %s",
                (name,),
            )
        for name in ("old-stopped", "old-lapsed", "leasing", "tasked", "claiming"):
            await gone_two_days_ago(postgres_url, name)
        # What still names a gone worker: a lease not yet expired, a running task's record, a
        # running idempotency claim.
        await run_sql(
            postgres_url,
            "INSERT INTO session_leases (session, owner, epoch, acquired_at, expires_at) VALUES "
            "('s1', 'leasing', 1, clock_timestamp(), clock_timestamp() + interval '1 hour')",
        )
        await run_sql(
            postgres_url,
            "INSERT INTO tasks (id, session, state, data, worker) "
            "SELECT 't1', 's2', 'running', '{}', 'tasked'",
        )
        await run_sql(
            postgres_url,
            "INSERT INTO idempotency_keys (tool, key, arguments_hash, state, owner, started_at, "
            "worker) VALUES ('send_email', 'k1', 'h', 'running', 'o', clock_timestamp(), "
            "'claiming')",
        )
        pruned = await prune_workers(store._access.pool, store.where, older_than_s=DAY_S)
        assert pruned.removed == ("old-lapsed", "old-stopped")
        assert pruned.kept == (
            KeptWorker("claiming", 0, 0, 1),
            KeptWorker("leasing", 1, 0, 0),
            KeptWorker("tasked", 0, 1, 0),
        )
        left = {info.id for info in await store.workers()}
        assert left == {"live", "recent", "leasing", "tasked", "claiming"}
        # Even "gone for 0 s" never takes a live worker.
        pruned = await prune_workers(store._access.pool, store.where, older_than_s=0)
        assert "live" not in pruned.removed and "recent" in pruned.removed
        assert live.id in {info.id for info in await store.workers()}
        with pytest.raises(UserError, match="older_than_s must be 0 or more"):
            await prune_workers(store._access.pool, store.where, older_than_s=-1)


@pytest.mark.anyio
async def test_the_list_says_how_long_each_gone_worker_has_been_gone(postgres_url: str) -> None:
    async with opened(postgres_url) as store:
        await store.register_worker(lease_seconds=30, name="live")
        stopped = await store.register_worker(lease_seconds=30, name="stopped")
        await stopped.stop()
        await store.register_worker(lease_seconds=30, name="lapsed")
        await gone_two_days_ago(postgres_url, "lapsed")
        found = {info.id: info for info in await store.workers()}
    assert found["live"].gone_for_s is None
    stopped_for = found["stopped"].gone_for_s
    assert stopped_for is not None and 0 <= stopped_for < 30
    lapsed_for = found["lapsed"].gone_for_s
    assert lapsed_for is not None and 2 * DAY_S <= lapsed_for < 2 * DAY_S + 60


@pytest.mark.slow
def test_a_worker_restarted_after_kill_9_waits_for_its_old_registration_then_runs(
    postgres_url: str,
) -> None:
    with worker_processes(postgres_url) as start_worker:
        first = start_worker()
        assert first.ask("register", lease_seconds=LEASE_S, name="alpha") == {"worker": "alpha"}
        assert first.ask("acquire", session="s1") == {"epoch": 1}
        first.kill()
        # The supervisor restarts it at once, under the same name.
        second = start_worker()
        started = time.monotonic()
        assert second.ask("register", lease_seconds=LEASE_S, name="alpha") == {"worker": "alpha"}
        waited = time.monotonic() - started
        assert 0.5 < waited < LEASE_S + 10  # it waited, for about the lease, and went on
        log = second.stderr()
        assert log.count("waiting up to") == 1
        assert f"for the previous worker named alpha (pid {first.pid} on " in log
        # It continues the session of its previous run, with a new epoch.
        assert second.ask("acquire", session="s1") == {"epoch": 2}
        assert second.ask("append", session="s1", text="after the restart") == {"ok": True}


@pytest.mark.slow
def test_a_live_duplicate_is_still_refused_after_the_wait(postgres_url: str) -> None:
    with worker_processes(postgres_url) as start_worker:
        live = start_worker()
        live.ask("register", lease_seconds=LEASE_S, name="alpha")
        assert live.ask("keep_leases") == {"keeping": True}
        duplicate = start_worker()
        duplicate.send("register", lease_seconds=LEASE_S, name="alpha")
        # The duplicate's process ends with the error; its stderr tells the user.
        with pytest.raises(AssertionError, match="did not answer"):
            duplicate.answer(timeout=LEASE_S + 3)
        error = duplicate.stderr()
        assert "waiting up to" in error
        assert f"A live worker named 'alpha' (pid {live.pid} on " in error
        assert "Give each worker a name of its own" in error
        assert live.ask("renew") == {"renewed": [], "lost": []}


@pytest.mark.slow
def test_a_frozen_predecessor_resumed_after_the_restart_writes_nothing(postgres_url: str) -> None:
    with worker_processes(postgres_url) as start_worker:
        frozen = start_worker()
        frozen.ask("register", lease_seconds=LEASE_S, name="alpha")
        assert frozen.ask("acquire", session="s1") == {"epoch": 1}
        assert frozen.ask("append", session="s1", text="before") == {"ok": True}
        frozen.freeze()
        frozen.send("append", session="s1", text="written by the frozen one")
        frozen.send("save_task", session="s1", task_id="t-frozen")
        restarted = start_worker()
        assert restarted.ask("register", lease_seconds=30, name="alpha") == {"worker": "alpha"}
        assert restarted.ask("acquire", session="s1") == {"epoch": 2}
        frozen.thaw()
        for _ in range(2):
            answer = frozen.answer()
            assert answer["owner"] == "alpha"
            assert "worker alpha holds it now (epoch 2)" in answer["lease_lost"]
        assert frozen.ask("renew") == {"renewed": [], "lost": [["s1", "alpha"]]}
        assert restarted.ask("append", session="s1", text="after") == {"ok": True}
        texts = anyio.run(
            rows,
            postgres_url,
            "SELECT data::text FROM trajectory WHERE session = 's1' ORDER BY seq",
        )
        assert ["before" in str(t) for t in texts] == [True, False]
        assert "frozen" not in str(texts)
        assert anyio.run(rows, postgres_url, "SELECT count(*) FROM tasks") == [(0,)]


@pytest.mark.slow
def test_a_frozen_predecessor_resumed_after_the_restart_takes_nothing_back(
    postgres_url: str,
) -> None:
    with worker_processes(postgres_url) as start_worker:
        frozen = start_worker()
        frozen.ask("register", lease_seconds=LEASE_S, name="alpha")
        assert frozen.ask("acquire", session="s1") == {"epoch": 1}
        frozen.freeze()
        frozen.send("acquire", session="s1")
        frozen.send("stop")
        restarted = start_worker()
        restarted.ask("register", lease_seconds=30, name="alpha")
        assert restarted.ask("acquire", session="s1") == {"epoch": 2}
        frozen.thaw()
        assert frozen.answer() == {"epoch": None}  # held by the restarted worker
        assert frozen.answer() == {"stopped": True}
        # The restarted worker still holds s1 and is still registered as running.
        assert restarted.ask("append", session="s1", text="still mine") == {"ok": True}
        state = anyio.run(rows, postgres_url, "SELECT stopped_at FROM workers WHERE id = 'alpha'")
        assert state == [(None,)]
