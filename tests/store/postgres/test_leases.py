"""Session leases on a real PostgreSQL: acquire, renew, expire and take over with growing epochs;
fenced writes refused once the lease is lost (also for a worker process frozen with SIGSTOP past
its lease); a killed worker's sessions claimed by others, each exactly once."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from functools import partial

import anyio
import pytest

from wakeful.core.records import TaskRecord
from wakeful.errors import UserError
from wakeful.events import user_input
from wakeful.messages import UserMessage

psycopg = pytest.importorskip("psycopg", reason="psycopg is missing: pip install -e '.[postgres]'")

from worker_processes import worker_processes  # noqa: E402

from wakeful.store.postgres import PostgresStore  # noqa: E402
from wakeful.store.postgres.leases import LeaseLost, LostLease, check_lease  # noqa: E402

LEASE_S = 1.0


def sql(url: str, query: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        cursor = conn.execute(query.encode(), params)
        return cursor.fetchall() if cursor.description else []


def wait_until_expired(url: str, session: str, timeout: float = 10.0) -> None:
    """Wait until the database's clock says the lease on `session` has expired."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if sql(
            url,
            "SELECT 1 FROM session_leases WHERE session = %s AND expires_at <= clock_timestamp()",
            (session,),
        ):
            return
        time.sleep(0.05)
    raise AssertionError(f"the lease on {session!r} did not expire within {timeout} s")


async def wait_until_expired_async(url: str, session: str) -> None:
    await anyio.to_thread.run_sync(wait_until_expired, url, session)


def running_task(task_id: str, session: str) -> TaskRecord:
    return TaskRecord(
        id=task_id,
        session=session,
        tool="shell",
        call_id=f"call-{task_id}",
        description="a long build",
        state="running",
        background=True,
        started_at=datetime.now(UTC),
    )


@asynccontextmanager
async def opened(url: str) -> AsyncIterator[PostgresStore]:
    async with await PostgresStore.open(url, pool_size=2) as store:
        yield store


@pytest.mark.anyio
async def test_one_worker_holds_a_session_until_it_releases_it(postgres_url: str) -> None:
    async with opened(postgres_url) as a, opened(postgres_url) as b:
        alpha = await a.register_worker(lease_seconds=30, name="alpha")
        beta = await b.register_worker(lease_seconds=30, name="beta")
        lease = await alpha.acquire("s1")
        assert lease is not None and (lease.owner, lease.epoch) == ("alpha", 1)
        assert await beta.acquire("s1") is None  # held by a live worker
        again = await alpha.acquire("s1")  # the holder acquiring again renews, same epoch
        assert again is not None and again.epoch == 1 and again.expires_at >= lease.expires_at
        renewal = await alpha.renew()
        assert [r.session for r in renewal.renewed] == ["s1"] and renewal.lost == ()

        workers = {w.id: w for w in await b.workers()}
        assert workers["alpha"].alive and [s.session for s in workers["alpha"].sessions] == ["s1"]
        assert workers["alpha"].sessions[0].expires_in_s > 25
        assert workers["beta"].sessions == ()

        assert await alpha.release(lease) is True
        assert await alpha.release(lease) is False  # released already
        taken = await beta.acquire("s1")
        assert taken is not None and (taken.owner, taken.epoch) == ("beta", 2)


@pytest.mark.anyio
async def test_an_expired_lease_is_taken_over_and_the_old_owner_can_no_longer_write(
    postgres_url: str,
) -> None:
    async with opened(postgres_url) as a, opened(postgres_url) as b:
        alpha = await a.register_worker(lease_seconds=LEASE_S, name="alpha")
        beta = await b.register_worker(lease_seconds=LEASE_S, name="beta")
        old = await alpha.acquire("s1")
        assert old is not None
        await a.fenced(old).trajectories.append("s1", [UserMessage(content="before")])
        await a.events.add(user_input("pending one", session="s1"))

        await wait_until_expired_async(postgres_url, "s1")
        new = await beta.acquire("s1")
        assert new is not None and (new.owner, new.epoch) == ("beta", old.epoch + 1)

        stale = a.fenced(old)
        with pytest.raises(LeaseLost, match=r"session 's1'.*worker beta holds it now") as lost:
            await stale.trajectories.append("s1", [UserMessage(content="too late")])
        assert (lost.value.session, lost.value.owner) == ("s1", "beta")
        pending = await a.events.pending("s1")
        with pytest.raises(LeaseLost):
            await stale.events.mark([e.id for e in pending], "consumed")
        with pytest.raises(LeaseLost):
            await stale.task_records.save(running_task("t1", "s1"))

        # Nothing of the refused writes is stored; the new owner's writes are.
        await b.fenced(new).trajectories.append("s1", [UserMessage(content="after")])
        messages = await b.trajectories.load("s1")
        assert [m.content for m in messages if isinstance(m, UserMessage)] == ["before", "after"]
        assert [e.text for e in await b.events.pending("s1")] == ["pending one"]
        assert await b.task_records.find("s1") == []

        renewal = await alpha.renew()
        assert renewal.renewed == ()
        assert [(x.lease.session, x.owner, x.why) for x in renewal.lost] == [
            ("s1", "beta", f"worker beta holds it now (epoch {new.epoch})")
        ]
        assert "s1" not in alpha.held


@pytest.mark.anyio
async def test_a_lease_that_expired_untaken_is_lost_too(postgres_url: str) -> None:
    async with opened(postgres_url) as store:
        worker = await store.register_worker(lease_seconds=LEASE_S)
        lease = await worker.acquire("s1")
        assert lease is not None
        await wait_until_expired_async(postgres_url, "s1")
        with pytest.raises(LeaseLost, match="it expired before it was renewed"):
            await store.fenced(lease).trajectories.append("s1", [UserMessage(content="late")])
        renewal = await worker.renew()
        assert [x.why for x in renewal.lost] == ["it expired before it was renewed"]
        again = await worker.acquire("s1")  # acquiring again is a new epoch
        assert again is not None and again.epoch == lease.epoch + 1


@pytest.mark.anyio
async def test_a_fenced_write_in_flight_holds_off_a_takeover_but_not_a_renewal(
    postgres_url: str,
) -> None:
    async with opened(postgres_url) as a, opened(postgres_url) as b:
        alpha = await a.register_worker(lease_seconds=2 * LEASE_S, name="alpha")
        beta = await b.register_worker(lease_seconds=30, name="beta")
        lease = await alpha.acquire("s1")
        assert lease is not None
        async with await psycopg.AsyncConnection.connect(postgres_url) as conn:
            # A write of alpha's for s1 that has checked its lease and not yet committed.
            await check_lease(conn, lease, "a write")
            with anyio.fail_after(2):
                assert [r.session for r in (await alpha.renew()).renewed] == ["s1"]
            await wait_until_expired_async(postgres_url, "s1")
            assert await beta.claim() == []  # skipped while the write holds the row
            assert await beta.acquire("s1") is None  # gave up after its lock timeout
            await conn.commit()
        taken = await beta.acquire("s1")
        assert taken is not None and taken.epoch == lease.epoch + 1


@pytest.mark.anyio
async def test_a_fenced_view_writes_only_its_own_session(postgres_url: str) -> None:
    async with opened(postgres_url) as store:
        worker = await store.register_worker(lease_seconds=30)
        lease = await worker.acquire("s1")
        assert lease is not None
        fenced = store.fenced(lease)
        with pytest.raises(UserError, match=r"fenced by the lease on session 's1'.*'s2'"):
            await fenced.trajectories.append("s2", [UserMessage(content="x")])
        with pytest.raises(UserError, match="'s2'"):
            await fenced.events.add(user_input("x", session="s2"))
        with pytest.raises(UserError, match="claim_due on the store's timer_records"):
            await fenced.timer_records.claim_due(lambda timers, now: ([], []))
        # Marking through the view leaves other sessions' events alone.
        other = user_input("not mine", session="s2")
        await store.events.add(other)
        await fenced.events.mark([other.id], "consumed")
        assert [e.id for e in await store.events.pending("s2")] == [other.id]
        assert await store.trajectories.load("s2") == []


@pytest.mark.anyio
async def test_a_live_worker_name_is_not_taken_twice(postgres_url: str) -> None:
    async with opened(postgres_url) as a, opened(postgres_url) as b:
        alpha = await a.register_worker(lease_seconds=1, name="alpha")
        async with anyio.create_task_group() as tg:
            await tg.start(alpha.keep_leases, lambda lost: None)  # alive: renewing
            with pytest.raises(UserError, match=r"live worker named 'alpha'.*name of its own"):
                await b.register_worker(lease_seconds=1, name="alpha")
            tg.cancel_scope.cancel()
        await alpha.stop()
        again = await b.register_worker(lease_seconds=30, name="alpha")  # stopped: reusable
        assert again.id == "alpha"
        with pytest.raises(UserError, match="lease_seconds must be more than 0"):
            await b.register_worker(lease_seconds=0)


@pytest.mark.anyio
async def test_running_tasks_are_marked_lost_only_for_a_gone_worker(postgres_url: str) -> None:
    async with opened(postgres_url) as a, opened(postgres_url) as b:
        alpha = await a.register_worker(lease_seconds=30, name="alpha")
        beta = await b.register_worker(lease_seconds=30, name="beta")
        on_alpha = await alpha.acquire("s1")
        on_beta = await beta.acquire("s2")
        assert on_alpha is not None and on_beta is not None
        await a.fenced(on_alpha).task_records.save(running_task("t-alpha", "s1"))
        await b.fenced(on_beta).task_records.save(running_task("t-beta", "s2"))
        await a.task_records.save(running_task("t-alpha-2", "s1"))  # unfenced: the store's worker

    # alpha restarts under its name after a crash (its heartbeat is old by then): only its own
    # running tasks are lost, not beta's.
    sql(postgres_url, "UPDATE workers SET heartbeat_at = heartbeat_at - interval '1 hour'")
    async with opened(postgres_url) as a2, opened(postgres_url) as b:
        await a2.register_worker(lease_seconds=LEASE_S, name="alpha")
        lost = await a2.task_records.mark_running_lost()
        assert sorted(r.id for r in lost) == ["t-alpha", "t-alpha-2"]
        assert {r.id: r.state for r in await b.task_records.find()} == {
            "t-alpha": "lost",
            "t-beta": "running",
            "t-alpha-2": "lost",
        }

        # beta dies (its lease runs out); whoever takes s2 marks its tasks there lost, once.
        sql(postgres_url, "UPDATE session_leases SET expires_at = clock_timestamp()")
        gamma = await b.register_worker(lease_seconds=30, name="gamma")
        taken = await gamma.acquire("s2")
        assert taken is not None
        fenced = b.fenced(taken)
        assert [r.id for r in await fenced.task_records.mark_running_lost()] == ["t-beta"]
        assert await fenced.task_records.mark_running_lost() == []
        await fenced.task_records.save(running_task("t-gamma", "s2"))
        assert await fenced.task_records.mark_running_lost() == []  # its own task stays


@pytest.mark.anyio
async def test_claim_takes_unowned_sessions_with_pending_events_and_expired_leases(
    postgres_url: str,
) -> None:
    async with opened(postgres_url) as a, opened(postgres_url) as b:
        alpha = await a.register_worker(lease_seconds=30, name="alpha")
        beta = await b.register_worker(lease_seconds=30, name="beta")
        for session in ("p1", "p2", "held", "idle"):
            await a.events.add(user_input("hi", session=session), "pending")
        await a.events.mark([e.id for e in await a.events.pending("idle")], "consumed")
        held = await alpha.acquire("held")
        assert held is not None
        await alpha.acquire("dead")
        sql(
            postgres_url,
            "UPDATE session_leases SET expires_at = clock_timestamp() WHERE session = 'dead'",
        )

        claimed = await beta.claim(limit=2)
        claimed += await beta.claim(limit=2)
        assert sorted(lease.session for lease in claimed) == ["dead", "p1", "p2"]
        assert await beta.claim(limit=10) == []
        assert {lease.session: lease.epoch for lease in claimed}["dead"] == 2

        await alpha.stop()  # a clean stop hands its sessions over at once
        assert [lease.session for lease in await beta.claim()] == ["held"]
        assert {w.id: w.alive for w in await b.workers()} == {"alpha": False, "beta": True}


@pytest.mark.anyio
async def test_claim_takes_released_sessions_that_wait_on_a_person_or_a_child(
    postgres_url: str,
) -> None:
    """A worker that stops cleanly releases sessions with no event pending but work waiting:
    an open request to a person (its default must still come on time), a child running (its
    own session), a child's result not handed over (its parent's). Another worker takes them at
    once; a settled request or a delivered child leaves its session alone."""
    from test_fencing_more import child, request

    async with opened(postgres_url) as a, opened(postgres_url) as b:
        alpha = await a.register_worker(lease_seconds=30, name="alpha")
        beta = await b.register_worker(lease_seconds=30, name="beta")
        await a.human_requests.add(request("r1", session="asks"))
        await a.human_requests.add(request("r2", session="settled"))
        await a.human_requests.close("r2", "answered", "{}", delivered=True)
        await a.subagents.add(child("child-run", parent="parent-a", root="parent-a"))
        await a.subagents.add(child("child-done", parent="parent-b", root="parent-b"))
        await a.subagents.finish("child-done", "done", result="{}")
        await a.subagents.add(child("child-old", parent="parent-c", root="parent-c"))
        await a.subagents.finish("child-old", "done", result="{}")
        await a.subagents.mark_delivered("child-old")
        sessions = ("asks", "settled", "child-run", "parent-b", "parent-c")
        for session in sessions:
            assert await alpha.acquire(session) is not None
        assert await beta.claim() == []  # all held
        await alpha.stop()
        claimed = sorted(lease.session for lease in await beta.claim())
        assert claimed == ["asks", "child-run", "parent-b"]


@pytest.mark.anyio
async def test_keep_leases_reports_leases_lost_while_the_database_is_away(
    postgres_url: str,
) -> None:
    async with opened(postgres_url) as store:
        worker = await store.register_worker(lease_seconds=LEASE_S)
        assert await worker.acquire("s1") is not None
        # As if every renewal since had failed: the worker's own clock says the lease ran out.
        lost = worker.expired_locally(now=time.monotonic() + LEASE_S)
        assert [x.lease.session for x in lost] == ["s1"] and worker.held == {}

        assert await worker.acquire("s2") is not None
        reported: list[str] = []
        lost_reported = anyio.Event()

        def on_lost(lost: Sequence[LostLease]) -> None:
            reported.extend(x.lease.session for x in lost)
            lost_reported.set()

        async with anyio.create_task_group() as tg:
            await tg.start(partial(worker.keep_leases, on_lost, every_s=0.1))
            # Someone else takes s2 over (as after a pause of this worker past its lease).
            sql(
                postgres_url,
                "UPDATE session_leases SET owner = 'other', epoch = epoch + 1 WHERE session = 's2'",
            )
            with anyio.fail_after(5):
                await lost_reported.wait()
            tg.cancel_scope.cancel()
        assert reported == ["s2"]


@pytest.mark.slow
def test_a_frozen_worker_resumed_past_its_lease_writes_nothing(postgres_url: str) -> None:
    with worker_processes(postgres_url) as start_worker:
        frozen, other = start_worker(), start_worker()
        assert frozen.ask("register", lease_seconds=LEASE_S, name="frozen") == {"worker": "frozen"}
        other.ask("register", lease_seconds=30, name="other")
        assert frozen.ask("acquire", session="s1") == {"epoch": 1}
        assert frozen.ask("append", session="s1", text="before") == {"ok": True}
        event_id = other.ask("add_event", session="s1")["added"]

        frozen.freeze()
        # Its next writes are queued (in its stdin) while it is stopped.
        frozen.send("append", session="s1", text="written while it had lost the session")
        frozen.send("mark", session="s1", ids=[event_id])
        frozen.send("save_task", session="s1", task_id="t1")
        wait_until_expired(postgres_url, "s1")
        assert other.ask("acquire", session="s1") == {"epoch": 2}
        frozen.thaw()

        for _ in range(3):
            answer = frozen.answer()
            assert answer["owner"] == "other"
            assert "session 's1'" in answer["lease_lost"]
            assert "worker other holds it now (epoch 2)" in answer["lease_lost"]
        assert frozen.ask("renew") == {"renewed": [], "lost": [["s1", "other"]]}
        rows = sql(postgres_url, "SELECT data FROM trajectory WHERE session = 's1' ORDER BY seq")
        assert len(rows) == 1 and "before" in str(rows[0][0])
        status = sql(postgres_url, "SELECT status FROM events WHERE id = %s", (event_id,))
        assert status == [("pending",)]
        assert sql(postgres_url, "SELECT count(*) FROM tasks") == [(0,)]
        assert other.ask("append", session="s1", text="after") == {"ok": True}


@pytest.mark.slow
def test_a_killed_workers_sessions_are_claimed_once_by_concurrent_claimers(
    postgres_url: str,
) -> None:
    sessions = [f"s{n:02d}" for n in range(30)]
    with worker_processes(postgres_url) as start_worker:
        doomed = start_worker()
        doomed.ask("register", lease_seconds=2 * LEASE_S, name="doomed")
        for session in sessions:
            doomed.ask("add_event", session=session)
        assert len(doomed.ask("claim_all", limit=7)["claimed"]) == len(sessions)
        assert doomed.ask("keep_leases") == {"keeping": True}  # renewed until it is killed
        for session in sessions[:10]:
            assert doomed.ask("save_task", session=session, task_id=f"t-{session}") == {"ok": True}
        claimers = [start_worker() for _ in range(3)]
        for n, claimer in enumerate(claimers):
            claimer.ask("register", lease_seconds=30, name=f"claimer-{n}")

        doomed.kill()
        for session in sessions:
            wait_until_expired(postgres_url, session)
        for claimer in claimers:  # all at once
            claimer.send("claim_all", limit=2)
        claims = [claimer.answer()["claimed"] for claimer in claimers]
        taken = [session for claimed in claims for session, _ in claimed]
        assert sorted(taken) == sessions  # every session once, none twice
        assert {epoch for claimed in claims for _, epoch in claimed} == {2}
        for claimer in claimers:
            claimer.send("mark_lost_all")
        lost = [task for claimer in claimers for task in claimer.answer()["lost"]]
        assert sorted(lost) == [f"t-{s}" for s in sessions[:10]]
        owners = sql(postgres_url, "SELECT DISTINCT owner FROM session_leases ORDER BY owner")
        assert owners == [(f"claimer-{n}",) for n in range(3) if claims[n]]
