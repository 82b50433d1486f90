"""Scale-out on PostgreSQL: events handled per second by 1, 2 and 4 worker processes sharing one
PostgreSQL store, against one process on a SQLite store, with independent sessions and a
zero-latency handler.

Each worker is tests/runtime/ownership_worker.py: a :class:`wakeful.runtime.worker.SessionOwnership`
(leases, wake-ups, claims) with the handler a session would be, minus the model: for each owned
session with pending events, read them, load the trajectory once per lease (so nothing an earlier
owner appended is appended twice), append one message per event through the fenced store view,
then mark the events consumed (two fenced writes, each checking the lease in its own statement).

A run: the workers are started and ready (listening); the bench process stores every event in
one transaction (`--sessions` sessions, `--per-session` events each), whose commit wakes every
worker; the clock runs from that commit until no event is pending (polled every 5 ms by a query
that stops at the first pending row, so polling loads the server little). The SQLite row does the
same work in one process (four concurrent consumers, as the workers have), on the SQLite store's
repositories, without leases. Each row is the median of `--repeat` runs, each on a fresh
database.

    python bench/workers_scaling.py [--sessions 500] [--per-session 4] [--repeat 3] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from report import Table, header, median

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from servers.postgres import PostgresServer, postgres_missing, start_postgres  # noqa: E402
from wakeful.events import Event, user_input  # noqa: E402
from wakeful.messages import UserMessage  # noqa: E402

if TYPE_CHECKING:
    import psycopg

WORKER = ROOT / "tests" / "runtime" / "ownership_worker.py"
CONSUMERS = 4
RUN_TIMEOUT_S = 300.0


def make_events(sessions: int, per_session: int) -> list[Event]:
    return [
        user_input(f"m{n}", session=f"s{s:05}") for n in range(per_session) for s in range(sessions)
    ]


def start_workers(url: str, count: int, claim_batch: int) -> list[subprocess.Popen[str]]:
    options = ["--lease", "10", "--claim-batch", str(claim_batch)]
    workers = [
        subprocess.Popen(
            [sys.executable, str(WORKER), url, "--name", f"w{n}", *options],
            stdout=subprocess.PIPE,
            text=True,
        )
        for n in range(count)
    ]
    for worker in workers:
        assert worker.stdout is not None
        ready = json.loads(worker.stdout.readline() or "{}")
        assert "ready" in ready, f"worker {worker.pid} did not start"
    return workers


def stop_workers(workers: list[subprocess.Popen[str]]) -> list[int]:
    """Stop the workers cleanly; how many events each handled."""
    handled = []
    for worker in workers:
        os.kill(worker.pid, signal.SIGTERM)
    for worker in workers:
        out, _ = worker.communicate(timeout=30)
        handled += [json.loads(line)["handled"] for line in out.splitlines() if "handled" in line]
    return handled


def cpu_seconds(pids: Iterable[int]) -> float:
    """The CPU seconds (user + system) processes `pids` have used so far, from Linux's /proc (0
    for a process gone, or where there is no /proc)."""
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def server_pids(server: PostgresServer) -> list[int]:
    """The PostgreSQL server's processes: its postmaster and the postmaster's children (one per
    connection, and its helpers), not those of another server on the machine."""
    postmaster = int((server.data_dir / "postmaster.pid").read_text().split()[0])
    children = []
    for entry in Path("/proc").iterdir():
        try:
            parent = int(entry.joinpath("stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError):
            continue
        if parent == postmaster:
            children.append(int(entry.name))
    return [postmaster, *children]


@dataclass
class Run:
    """One run: its seconds, the events each worker handled, and the CPU seconds its workers
    and the server used meanwhile (the wall clock varies with the rest of the machine's load;
    the CPU a run costs much less)."""

    seconds: float
    handled: list[int]
    worker_cpu_s: float
    server_cpu_s: float


async def postgres_run(
    server: PostgresServer, url: str, workers: int, events: list[Event], claim_batch: int
) -> Run:
    """Seconds from the commit of `events` until none is pending, with `workers` workers."""
    import psycopg

    from wakeful.store.postgres import PostgresStore

    async with (
        await PostgresStore.open(url, pool_size=2) as store,
        await psycopg.AsyncConnection.connect(url, autocommit=True) as poll,
    ):
        started = await anyio.to_thread.run_sync(start_workers, url, workers, claim_batch)
        try:
            await store.events.add_many(events)
            committed = time.perf_counter()
            worker_pids = [worker.pid for worker in started]
            cpu_before = cpu_seconds(worker_pids), cpu_seconds(server_pids(server))
            with anyio.fail_after(RUN_TIMEOUT_S):
                while await any_pending(poll):  # noqa: ASYNC110
                    await anyio.sleep(0.005)
            took = time.perf_counter() - committed
            worker_cpu = cpu_seconds(worker_pids) - cpu_before[0]
            server_cpu = cpu_seconds(server_pids(server)) - cpu_before[1]
        finally:
            handled = await anyio.to_thread.run_sync(stop_workers, started)
    return Run(took, handled, worker_cpu, server_cpu)


async def any_pending(conn: psycopg.AsyncConnection[Any]) -> bool:
    """Whether an event is still pending. It stops at the first pending row: the store's
    `count()`, which groups every event by status, cost the server about 1 ms a poll (a fifth
    of its time in a run), a load the workers measured here do not make."""
    cursor = await conn.execute("SELECT EXISTS (SELECT FROM events WHERE status = 'pending')")
    row = await cursor.fetchone()
    return bool(row and row[0])


async def sqlite_run(path: Path, events: list[Event]) -> Run:
    """The same work in one process on a SQLite store: seconds from the commit until none is
    pending (its CPU: this process's)."""
    from wakeful.store.sqlite import Store

    store = await Store.open(path)
    try:
        await store.events.add_many(events)
        committed, cpu_before = time.perf_counter(), time.process_time()
        sessions = sorted({event.session for event in events})
        send, receive = anyio.create_memory_object_stream[str](len(sessions))
        for session in sessions:
            send.send_nowait(session)
        send.close()

        async def consume() -> None:
            async for session in receive.clone():
                pending = await store.events.pending(session)
                trajectory = await store.trajectories.load(session)
                seen = {i for m in trajectory if isinstance(m, UserMessage) for i in m.event_ids}
                fresh = [event for event in pending if event.id not in seen]
                content = json.dumps({"worker": "sqlite", "epoch": 0})
                messages = [UserMessage(content=content, event_ids=[e.id]) for e in fresh]
                await store.trajectories.append(session, messages)
                await store.events.mark([event.id for event in pending], "consumed")

        async with anyio.create_task_group() as tg:
            for _ in range(CONSUMERS):
                tg.start_soon(consume)
        receive.close()
        took, cpu = time.perf_counter() - committed, time.process_time() - cpu_before
        assert (await store.events.count()).get("pending", 0) == 0
    finally:
        await store.close()
    return Run(took, [len(events)], cpu, 0.0)


def results_table(rows: list[tuple[str, list[Run]]], total: int) -> Table:
    """One row per store and worker count: the median run by seconds, and the median CPU."""
    table = Table(
        [
            "store",
            "events/s",
            "seconds",
            "vs 1 worker",
            "worker CPU ms/event",
            "server CPU ms/event",
            "events per worker",
        ]
    )
    base = next(
        (
            median([r.seconds for r in runs])
            for label, runs in rows
            if label.startswith("PostgreSQL, 1 ")
        ),
        0.0,
    )
    for label, runs in rows:
        took = median([run.seconds for run in runs])
        middle = sorted(runs, key=lambda run: run.seconds)[len(runs) // 2]
        postgres = label.startswith("PostgreSQL")
        table.add(
            label,
            f"{total / took:,.0f}",
            f"{took:.2f}",
            f"{base / took:.2f}x" if postgres and base else "",
            f"{1000 * median([r.worker_cpu_s for r in runs]) / total:.2f}",
            f"{1000 * median([r.server_cpu_s for r in runs]) / total:.2f}" if postgres else "-",
            "/".join(str(h) for h in middle.handled) if postgres else "-",
        )
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=500)
    parser.add_argument("--per-session", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--claim-batch", type=int, default=10, help="sessions per claim")
    parser.add_argument("--quick", action="store_true", help="200 sessions x 2 events, once")
    args = parser.parse_args()
    if args.quick:
        args.sessions, args.per_session, args.repeat = 200, 2, 1
    missing = postgres_missing()
    if missing:
        sys.exit(f"Cannot run: {missing}")
    counts = [int(n) for n in args.workers.split(",")]
    total = args.sessions * args.per_session
    header("Scale-out on PostgreSQL: events handled per second by 1, 2 and 4 workers")
    print(f"{total} events: {args.sessions} independent sessions x {args.per_session} events")
    rows: list[tuple[str, list[Run]]] = []
    with tempfile.TemporaryDirectory() as folder:
        runs = []
        for n in range(args.repeat):
            events = make_events(args.sessions, args.per_session)
            runs.append(anyio.run(sqlite_run, Path(folder) / f"run{n}.db", events))
        rows.append(("SQLite, 1 process", runs))
    server: PostgresServer = start_postgres()
    try:
        for workers in counts:
            runs = []
            for _ in range(args.repeat):
                url = server.url(server.create_database())
                events = make_events(args.sessions, args.per_session)
                run = anyio.run(postgres_run, server, url, workers, events, args.claim_batch)
                assert sum(run.handled) == total, run.handled
                runs.append(run)
            rows.append((f"PostgreSQL, {workers} worker{'s' if workers > 1 else ''}", runs))
    finally:
        server.stop()
    print(results_table(rows, total).render())
    print(
        f"Machine: {os.cpu_count()} CPUs shared by the workers, the PostgreSQL server and this "
        "process. Each session's batch of events costs two reads and two fenced writes (the "
        "lease checked in each write's statement; writes queued together share a transaction) "
        "and a share of the claim passes; workers and server are CPU-bound, so scaling bends "
        "once workers + server outnumber the cores."
    )


if __name__ == "__main__":
    main()
