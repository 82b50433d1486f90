"""Worker processes sharing one real PostgreSQL (tests/runtime/ownership_worker.py): events
submitted from another process are each consumed exactly once while workers are killed with
kill -9 at random moments; a killed worker's sessions move within the lease time + 1 s; a worker
frozen with SIGSTOP past its lease and then resumed writes nothing for the sessions it lost."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

import anyio
import pytest

pytest.importorskip("psycopg", reason="psycopg is missing: pip install -e '.[postgres]'")

import psycopg

from wakeful.events import Event, user_input
from wakeful.store.postgres import PostgresStore

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

SCRIPT = Path(__file__).with_name("ownership_worker.py")
LEASE_S = 2.0
READY_TIMEOUT_S = 30.0


def sql(url: str, query: str, params: tuple[object, ...] = ()) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        cursor = conn.execute(query.encode(), params)
        return cursor.fetchall() if cursor.description else []


class WorkerProcess:
    """One ownership_worker.py process."""

    def __init__(self, url: str, name: str, *options: str) -> None:
        self.name = name
        self._stderr: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 (closed by close())
        command = [sys.executable, str(SCRIPT), url, "--name", name, "--lease", str(LEASE_S)]
        self.process = subprocess.Popen(
            [*command, *options],
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
        )

    def wait_ready(self) -> None:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert json.loads(line or "{}").get("ready") == self.name, self.stderr()

    def stderr(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")[-3000:]

    def signal(self, signum: int) -> None:
        os.kill(self.process.pid, signum)

    def close(self) -> None:
        if self.process.poll() is None:
            self.signal(signal.SIGCONT)
            self.signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        assert self.process.stdout is not None
        self.process.stdout.close()
        self._stderr.close()


@contextmanager
def workers(url: str) -> Iterator[dict[str, WorkerProcess]]:
    started: dict[str, WorkerProcess] = {}
    try:
        yield started
    finally:
        for worker in started.values():
            worker.close()


async def start(
    url: str, started: dict[str, WorkerProcess], *names: str, options: tuple[str, ...] = ()
) -> None:
    for name in names:
        started[name] = WorkerProcess(url, name, *options)
    with anyio.fail_after(READY_TIMEOUT_S):
        for name in names:
            await anyio.to_thread.run_sync(started[name].wait_ready)


def held_by(url: str, worker: str) -> list[str]:
    rows = sql(
        url,
        "SELECT session FROM session_leases WHERE owner = %s AND expires_at > clock_timestamp()",
        (worker,),
    )
    return sorted(session for (session,) in rows)


async def takeover_time(url: str, dead: str, sessions: list[str], killed_at: float) -> float:
    """Seconds from `killed_at` until every one of `sessions` has a live owner other than
    `dead`."""
    while True:
        rows = sql(
            url,
            "SELECT count(*) FROM session_leases WHERE session = ANY(%s) AND owner IS NOT NULL "
            "AND owner <> %s AND expires_at > clock_timestamp()",
            (sessions, dead),
        )
        if rows[0][0] == len(sessions):
            return time.monotonic() - killed_at
        if time.monotonic() - killed_at > 4 * LEASE_S + 10:
            raise AssertionError(f"{dead}'s sessions were not taken over")
        await anyio.sleep(0.05)


async def wait_all_consumed(store: PostgresStore, within_s: float = 30.0) -> None:
    with anyio.fail_after(within_s):
        while (await store.events.count()).get("pending", 0):  # noqa: ASYNC110
            await anyio.sleep(0.1)


def check_handled_once(url: str, events: list[Event]) -> dict[tuple[str, int], str]:
    """Every event consumed, in exactly one trajectory message of its session; in each
    session's trajectory the lease epochs never go back (no two workers wrote for it at once).
    Returns who wrote under each (session, epoch)."""
    statuses = dict(sql(url, "SELECT id, status FROM events"))
    assert {statuses[event.id] for event in events} == {"consumed"}
    carried: dict[str, list[str]] = {}
    writer: dict[tuple[str, int], str] = {}
    last_epoch: dict[str, int] = {}
    for session, data in sql(url, "SELECT session, data FROM trajectory ORDER BY seq"):
        message = json.loads(data)
        stamp = json.loads(message["content"])
        epoch = int(stamp["epoch"])
        assert epoch >= last_epoch.get(session, 0), f"{session}: epoch {epoch} after a later one"
        last_epoch[session] = epoch
        assert writer.setdefault((session, epoch), stamp["worker"]) == stamp["worker"]
        for event_id in message["event_ids"]:
            carried.setdefault(event_id, []).append(session)
    for event in events:
        assert carried.get(event.id) == [event.session], (
            f"event {event.id}: {carried.get(event.id)}"
        )
    return writer


async def submit(store: PostgresStore, events: list[Event], batch: int = 25) -> None:
    for at in range(0, len(events), batch):
        await store.events.add_many(events[at : at + batch])
        await anyio.sleep(0.01)


async def test_killed_workers_lose_nothing_and_their_sessions_move(postgres_url: str) -> None:
    rng = random.Random(17)
    sessions = [f"s{i:03}" for i in range(200)]
    events = [user_input(f"m{i}", session=rng.choice(sessions)) for i in range(3000)]
    chunks = [events[at : at + 750] for at in range(0, len(events), 750)]
    takeovers: list[float] = []
    async with await PostgresStore.open(postgres_url, pool_size=2) as store:
        with workers(postgres_url) as started:
            await start(postgres_url, started, "w1", "w2", "w3")
            alive = ["w1", "w2", "w3"]
            for round_no, chunk in enumerate(chunks[:-1]):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(submit, store, chunk)
                    await anyio.sleep(rng.uniform(0.2, 1.5))
                    victim = rng.choice(alive)
                    owned = held_by(postgres_url, victim)
                    started[victim].signal(signal.SIGKILL)
                    killed_at = time.monotonic()
                    alive.remove(victim)
                    if owned:
                        takeovers.append(
                            await takeover_time(postgres_url, victim, owned, killed_at)
                        )
                replacement = f"w{4 + round_no}"
                await start(postgres_url, started, replacement)
                alive.append(replacement)
            await submit(store, chunks[-1])
            await wait_all_consumed(store)
    check_handled_once(postgres_url, events)
    print(f"takeover after kill -9 (s): {', '.join(f'{t:.2f}' for t in takeovers)}")
    assert takeovers, "no killed worker held a session"
    assert max(takeovers) <= LEASE_S + 1.0, takeovers


async def test_a_frozen_worker_resumed_after_takeover_writes_nothing(postgres_url: str) -> None:
    sessions = [f"s{i:02}" for i in range(20)]
    async with await PostgresStore.open(postgres_url, pool_size=2) as store:
        with workers(postgres_url) as started:
            # At most 10 sessions each: alpha surely holds half of them when it freezes.
            await start(postgres_url, started, "alpha", "beta", options=("--max-sessions", "10"))
            first = [user_input("one", session=s) for s in sessions]
            await submit(store, first)
            await wait_all_consumed(store)
            frozen = held_by(postgres_url, "alpha")
            assert len(frozen) == 10
            await start(postgres_url, started, "gamma")  # room for alpha's sessions
            epochs = dict(
                sql(
                    postgres_url,
                    "SELECT session, epoch FROM session_leases WHERE owner = 'alpha'",
                )
            )
            started["alpha"].signal(signal.SIGSTOP)
            # While alpha is frozen, its sessions get events: they wait for its lease to run out,
            # then another worker takes the sessions and consumes them.
            second = [user_input("two", session=s) for s in sessions]
            await submit(store, second)
            await wait_all_consumed(store, within_s=4 * LEASE_S + 10)
            assert held_by(postgres_url, "alpha") == []
            started["alpha"].signal(signal.SIGCONT)
            third = [user_input("three", session=s) for s in sessions]
            await submit(store, third)
            await wait_all_consumed(store)
            await anyio.sleep(LEASE_S)  # time for anything stale alpha might still attempt
    writer = check_handled_once(postgres_url, first + second + third)
    # Nothing written under the frozen leases after the takeover: each session's second and
    # third events were handled under later epochs.
    by_event = {}
    for session, data in sql(postgres_url, "SELECT session, data FROM trajectory ORDER BY seq"):
        message = json.loads(data)
        for event_id in message["event_ids"]:
            by_event[event_id] = (session, int(json.loads(message["content"])["epoch"]))
    for event in second + third:
        session, epoch = by_event[event.id]
        if session in epochs:
            assert epoch > epochs[session], f"{session}: written under alpha's frozen lease"
    assert {writer[(s, e)] for s, e in epochs.items()} == {"alpha"}


RUNTIME_SCRIPT = Path(__file__).with_name("runtime_worker.py")


async def test_runtime_workers_killed_ten_times_answer_every_event_and_timer_once(
    postgres_url: str, tmp_path: Path
) -> None:
    """The issue's test: three runtime processes (`Runtime.cluster`) on one PostgreSQL answer
    5,000 events for 200 sessions submitted from this process, while ten times one of them is
    killed with SIGKILL at a random moment and replaced. Every event is in exactly one trajectory
    message of its session, every trajectory is well-formed, and every timer that came due fired
    exactly once, cluster-wide."""
    from wakeful.core.records import TimerRecord
    from wakeful.events import TIMER_TRIGGER
    from wakeful.messages import check_trajectory

    rng = random.Random(7)
    sessions = [f"chat{i:03}" for i in range(200)]
    events = [user_input(f"m{i}", session=rng.choice(sessions)) for i in range(5000)]
    rounds = [events[at : at + 450] for at in range(0, 4500, 450)]  # ten kills
    started: dict[str, subprocess.Popen[str]] = {}

    def launch(name: str) -> None:
        command = [sys.executable, str(RUNTIME_SCRIPT), postgres_url, "--name", name]
        command += ["--workdir", str(tmp_path / name), "--lease", str(LEASE_S)]
        process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        started[name] = process
        assert process.stdout is not None
        assert json.loads(process.stdout.readline() or "{}") == {"ready": name}

    now = datetime.now(UTC)
    timers = [
        TimerRecord(
            id=f"tmr_{i:02}",
            session=rng.choice(sessions),
            note=f"timer {i}",
            kind="once",
            next_fire=now + timedelta(seconds=3 + 1.5 * i),
        )
        for i in range(20)
    ]
    kills = 0
    try:
        async with await PostgresStore.open(postgres_url, pool_size=2) as store:
            await store.timer_records.save_many(timers)
            for name in ("r1", "r2", "r3"):
                await anyio.to_thread.run_sync(launch, name)
            alive = ["r1", "r2", "r3"]
            for number, batch in enumerate(rounds):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(submit, store, batch, 15)
                    await anyio.sleep(rng.uniform(0.3, 2.0))
                    victim = rng.choice(alive)
                    started[victim].kill()
                    kills += 1
                    alive.remove(victim)
                replacement = f"r{4 + number}"
                await anyio.to_thread.run_sync(launch, replacement)
                alive.append(replacement)
            await submit(store, events[4500:], 15)
            await wait_all_consumed(store, within_s=180)
            # The sessions a killed worker left mid-turn with no event pending are taken over
            # once its leases expire, and repaired then.
            await _well_formed_within(postgres_url, 4 * LEASE_S + 10)
            for timer in timers:  # the last comes due about 32 s after the start
                await _fired_within(postgres_url, timer.id, 60)
            await wait_all_consumed(store, within_s=30)
            by_session = await _well_formed_within(postgres_url, 4 * LEASE_S + 10)
    finally:
        for process in started.values():
            if process.poll() is None:
                process.terminate()
            process.communicate(timeout=30)
    assert kills == 10
    fired = sql(
        postgres_url,
        "SELECT id, data::json->'source'->>'id' FROM events WHERE kind = %s",
        (TIMER_TRIGGER,),
    )
    by_timer: dict[str, list[str]] = {}
    for event_id, timer_id in fired:
        by_timer.setdefault(timer_id, []).append(event_id)
    assert {t: len(ids) for t, ids in by_timer.items()} == {t.id: 1 for t in timers}
    carried: dict[str, list[str]] = {}
    for session, trajectory in by_session.items():
        assert check_trajectory(trajectory) == [], session
        for message in trajectory:
            for event_id in getattr(message, "event_ids", []):
                carried.setdefault(event_id, []).append(session)
    for event in events:
        assert carried.get(event.id) == [event.session], f"{event.id}: {carried.get(event.id)}"
    for timer in timers:
        (event_id,) = by_timer[timer.id]
        assert carried.get(event_id) == [timer.session], f"{timer.id}: {carried.get(event_id)}"


async def _well_formed_within(url: str, seconds: float) -> dict[str, list[Any]]:
    """Every session's trajectory, once all of them are well-formed (waiting up to `seconds`)."""
    from wakeful.messages import check_trajectory, message_from_json

    deadline = time.monotonic() + seconds
    while True:
        by_session: dict[str, list[Any]] = {}
        for session, data in sql(url, "SELECT session, data FROM trajectory ORDER BY seq"):
            by_session.setdefault(session, []).append(message_from_json(data))
        broken = {s: check_trajectory(t) for s, t in by_session.items() if check_trajectory(t)}
        if not broken or time.monotonic() > deadline:
            assert not broken, f"still not well-formed after {seconds} s: {broken}"
            return by_session
        await anyio.sleep(0.25)


async def _fired_within(url: str, timer_id: str, seconds: float) -> None:
    query = "SELECT 1 FROM events WHERE kind = 'timer.trigger' AND data::json->'source'->>'id' = %s"
    with anyio.fail_after(seconds):
        while not sql(url, query, (timer_id,)):  # noqa: ASYNC110 - another process fires it
            await anyio.sleep(0.25)
