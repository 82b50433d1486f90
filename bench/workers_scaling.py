"""Scale-out on PostgreSQL: events handled per second by 1, 2 and 4 worker processes sharing one
PostgreSQL store, against one process on a SQLite store, with independent sessions and a
zero-latency handler.

Each worker is tests/runtime/ownership_worker.py: a :class:`wakeful.runtime.worker.SessionOwnership`
(leases, wake-ups, claims) with the handler a session would be, minus the model: for each owned
session with pending events, read them, load the trajectory once per lease (so nothing an earlier
owner appended is appended twice), append one message per event through the fenced store view,
then mark the events consumed (two fenced writes, each checking the lease in its transaction).

A run: the workers are started and ready (listening); the bench process stores every event in
one transaction (`--sessions` sessions, `--per-session` events each), whose commit wakes every
worker; the clock runs from that commit until no event is pending. The SQLite row does the same
work in one process (four concurrent consumers, as the workers have), on the SQLite store's
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
from pathlib import Path

import anyio

from report import Table, header, median

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from servers.postgres import PostgresServer, postgres_missing, start_postgres  # noqa: E402
from wakeful.events import Event, user_input  # noqa: E402
from wakeful.messages import UserMessage  # noqa: E402

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


async def postgres_run(
    url: str, workers: int, events: list[Event], claim_batch: int
) -> tuple[float, list[int]]:
    """Seconds from the commit of `events` until none is pending, with `workers` workers."""
    from wakeful.store.postgres import PostgresStore

    async with await PostgresStore.open(url, pool_size=2) as store:
        started = await anyio.to_thread.run_sync(start_workers, url, workers, claim_batch)
        try:
            await store.events.add_many(events)
            committed = time.perf_counter()
            with anyio.fail_after(RUN_TIMEOUT_S):
                while (await store.events.count()).get("pending", 0):  # noqa: ASYNC110
                    await anyio.sleep(0.005)
            took = time.perf_counter() - committed
        finally:
            handled = await anyio.to_thread.run_sync(stop_workers, started)
    return took, handled


async def sqlite_run(path: Path, events: list[Event]) -> float:
    """The same work in one process on a SQLite store: seconds from the commit until none is
    pending."""
    from wakeful.store.sqlite import Store

    store = await Store.open(path)
    try:
        await store.events.add_many(events)
        committed = time.perf_counter()
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
        took = time.perf_counter() - committed
        assert (await store.events.count()).get("pending", 0) == 0
    finally:
        await store.close()
    return took


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
    rows: list[tuple[str, float, str]] = []
    with tempfile.TemporaryDirectory() as folder:
        times = []
        for n in range(args.repeat):
            events = make_events(args.sessions, args.per_session)
            times.append(anyio.run(sqlite_run, Path(folder) / f"run{n}.db", events))
        rows.append(("SQLite, 1 process", median(times), "-"))
    server: PostgresServer = start_postgres()
    try:
        for workers in counts:
            times, spreads = [], []
            for _ in range(args.repeat):
                url = server.url(server.create_database())
                events = make_events(args.sessions, args.per_session)
                took, handled = anyio.run(postgres_run, url, workers, events, args.claim_batch)
                assert sum(handled) == total, handled
                times.append(took)
                spreads.append("/".join(str(h) for h in handled))
            label = f"PostgreSQL, {workers} worker{'s' if workers > 1 else ''}"
            rows.append((label, median(times), spreads[len(spreads) // 2]))
    finally:
        server.stop()
    base = next((t for label, t, _ in rows if label.startswith("PostgreSQL, 1 ")), None)
    table = Table(["store", "events/s", "seconds", "vs 1 worker", "events per worker"])
    for label, took, spread in rows:
        speedup = f"{base / took:.2f}x" if base and label.startswith("PostgreSQL") else ""
        table.add(label, f"{total / took:,.0f}", f"{took:.2f}", speedup, spread)
    print(table.render())
    print(
        f"Machine: {os.cpu_count()} CPUs shared by the workers, the PostgreSQL server and this "
        "process. Each event costs two fenced transactions per session batch plus reads; the "
        "workers are CPU-bound in Python, so scaling bends once workers + server outnumber "
        "the cores."
    )


if __name__ == "__main__":
    main()
