"""Event throughput: events per second through `Runtime.submit` and `Store.add_event`.

`Runtime.submit_many` rows: one producer hands bursts of 10 or 100 events (a mailbox sync, a
webhook batch) to the runtime, which stores each burst in one write.

Runtime rows: the SQLite store is on (WAL), first with the Runtime's default
`store_synchronous="normal"` (no fsync per commit; a commit survives a crash of the process, not a
power loss), then with `store_synchronous="full"` (an fsync per commit). The session is busy in a
model turn that waits on a gate, and P concurrent producers submit N events that the router
queues (`webhook.received`, normal urgency). Each `submit` returns once its event is committed.
Then the gate opens and the session flushes every queued event into one user message (and marks
them consumed) at its next safe point. The rate counts both: N / (submit + flush).

Store rows: raw `Store.add_event` from P concurrent producers, N events in all, with
synchronous=NORMAL (the Runtime's default) and synchronous=FULL (`Store.open`'s own default;
concurrent writers share one commit, and so one fsync). Events are built before the clock starts.
Each row is the median of the repeats, after one discarded warm-up run.

    python bench/event_throughput.py [--events 10000] [--repeat 3] [--quick]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio

from report import Table, header, median, verdict
from wakeful.events import WEBHOOK_RECEIVED, Event, Source, user_input
from wakeful.messages import Message, UserMessage
from wakeful.models import FunctionModel, Turn, say
from wakeful.models.base import ToolDefinition
from wakeful.runtime import Runtime
from wakeful.store.sqlite import Store, WriteSync

TARGET_PER_SECOND = 5000.0
RUN_TIMEOUT_SECONDS = 120.0


def make_events(count: int) -> list[Event]:
    return [
        Event(
            kind=WEBHOOK_RECEIVED,
            source=Source(type="system", id="ci"),
            channel="webhook",
            content={"build": i, "status": "passed"},
        )
        for i in range(count)
    ]


async def produce(
    events: Sequence[Event], producers: int, submit: Callable[[Event], Awaitable[object]]
) -> None:
    """Submit `events` from `producers` concurrent tasks, each taking every P-th event in turn."""

    async def producer(start: int) -> None:
        for event in events[start::producers]:
            await submit(event)

    async with anyio.create_task_group() as tg:
        for start in range(producers):
            tg.start_soon(producer, start)


@dataclass(frozen=True)
class RuntimeTiming:
    submit_seconds: float
    flush_seconds: float

    @property
    def total(self) -> float:
        return self.submit_seconds + self.flush_seconds


async def runtime_run(
    count: int, producers: int, synchronous: WriteSync, batch: int = 1
) -> RuntimeTiming:
    gate = anyio.Event()
    busy = anyio.Event()

    async def script(messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> Turn:
        if not gate.is_set():
            busy.set()
            await gate.wait()
        return say("ok")

    events = make_events(count)
    with tempfile.TemporaryDirectory() as tmp:
        rt = Runtime(
            model=FunctionModel(script),
            with_core_tools=False,
            with_timers=False,
            store_path=Path(tmp) / "bench.db",
            store_synchronous=synchronous,
        )
        async with rt:
            with anyio.fail_after(RUN_TIMEOUT_SECONDS):
                await rt.submit(user_input("start the long job"))
                await busy.wait()
                start = time.perf_counter()
                if batch == 1:
                    await produce(events, producers, rt.submit)
                else:
                    bursts = [events[i : i + batch] for i in range(0, len(events), batch)]
                    for burst in bursts:  # one producer, one write per burst
                        await rt.submit_many(burst)
                submitted = time.perf_counter()
                gate.set()
                await rt.wait_idle()
                flushed = time.perf_counter()
            assert rt.store is not None
            pending = await rt.store.pending_events()
            carried = sum(
                len(m.event_ids)
                for m in rt.sessions["main"].trajectory.messages
                if isinstance(m, UserMessage)
            )
    if pending or carried != count + 1:
        raise RuntimeError(f"{len(pending)} events still pending, {carried} carried to the model.")
    return RuntimeTiming(submitted - start, flushed - submitted)


async def store_run(count: int, producers: int, synchronous: WriteSync) -> float:
    events = make_events(count)
    with tempfile.TemporaryDirectory() as tmp:
        async with await Store.open(Path(tmp) / "bench.db", synchronous=synchronous) as store:
            start = time.perf_counter()
            await produce(events, producers, store.add_event)
            elapsed = time.perf_counter() - start
            stored = len(await store.pending_events())
    if stored != count:
        raise RuntimeError(f"{stored} of {count} events were stored.")
    return elapsed


def median_timing(timings: Sequence[RuntimeTiming]) -> RuntimeTiming:
    return sorted(timings, key=lambda t: t.total)[len(timings) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="2,000 events, 1 repeat")
    args = parser.parse_args()
    count = 2000 if args.quick else args.events
    repeat = 1 if args.quick else args.repeat
    # One producer awaits every commit in turn; fewer events keep that row short.
    sequential_count = min(count, 2000)

    # (producers, events, sync, burst size: 1 = Runtime.submit, more = Runtime.submit_many)
    runtime_rows: list[tuple[int, int, WriteSync, int]] = [
        (1, sequential_count, "normal", 1),
        (1, count, "normal", 10),
        (1, count, "normal", 100),
        (16, count, "normal", 1),
        (64, count, "normal", 1),
        (1, sequential_count, "full", 1),
        (1, count, "full", 100),
        (16, count, "full", 1),
        (64, count, "full", 1),
    ]
    store_rows: list[tuple[int, int, WriteSync]] = [
        (1, sequential_count, "normal"),
        (8, count, "normal"),
        (64, count, "normal"),
        (1, sequential_count, "full"),
        (8, count, "full"),
        (64, count, "full"),
        (256, count, "full"),
    ]

    anyio.run(runtime_run, 500, 16, "normal")  # warm-up
    anyio.run(store_run, 500, 16, "normal")
    runtime_results: list[tuple[int, int, WriteSync, int, RuntimeTiming]] = []
    for producers, n, synchronous, burst in runtime_rows:
        timings = [anyio.run(runtime_run, n, producers, synchronous, burst) for _ in range(repeat)]
        runtime_results.append((producers, n, synchronous, burst, median_timing(timings)))
    store_results: list[tuple[int, int, WriteSync, float]] = []
    for producers, n, synchronous in store_rows:
        seconds = median([anyio.run(store_run, n, producers, synchronous) for _ in range(repeat)])
        store_results.append((producers, n, synchronous, seconds))

    header(
        f"Event throughput: median of {repeat} run(s) per row, SQLite store in WAL mode; "
        "sync = PRAGMA synchronous (the Runtime's default is normal)"
    )
    table = Table(
        ["path", "sync", "producers", "events", "submit ms", "flush ms", "events/s", "target"]
    )
    target = f"≥ {TARGET_PER_SECOND:,.0f}/s"
    for producers, n, synchronous, burst, timing in runtime_results:
        rate = n / timing.total
        path = "Runtime.submit" if burst == 1 else f"Runtime.submit_many ×{burst}"
        table.add(
            f"{path}, queued + flushed",
            synchronous,
            producers,
            n,
            timing.submit_seconds * 1e3,
            timing.flush_seconds * 1e3,
            rate,
            f"{target}: {verdict(rate, TARGET_PER_SECOND, higher_is_better=True)}",
        )
    for producers, n, synchronous, seconds in store_results:
        rate = n / seconds
        table.add(
            "Store.add_event",
            synchronous,
            producers,
            n,
            seconds * 1e3,
            "",
            rate,
            f"{target}: {verdict(rate, TARGET_PER_SECOND, higher_is_better=True)}",
        )
    table.print()


if __name__ == "__main__":
    main()
