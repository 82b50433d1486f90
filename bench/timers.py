"""Timers: the memory 10,000 pending timers take, and how late they fire on the real clock.

Memory: 10,000 one-shot timers an hour away, set in a running TimerService without a store;
the growth of memory Python allocated (tracemalloc, in its own pass since tracing slows
everything) and of the process's resident set (RSS, in a pass without tracing).

Lateness: 10,000 timers set at once, due at random moments in a 5 s window that opens 2 s later
(time enough to set them all), so that all of them are pending together; lateness is the
wall-clock time from a timer's scheduled moment to the moment its `timer.trigger` event reaches
the emit callback. Four rows:
the TimerService alone (emit records the event); the TimerService with the SQLite store opened
with synchronous=NORMAL, as the Runtime opens it by default (every timer saved when set, and its
new state saved after each fire); and the timers of a Runtime with the store on, whose emit is
`Runtime.submit` (each event committed, then queued to a session that answers with a zero-latency
model), with the default `store_synchronous="normal"` and with `"full"` (an fsync per commit).
Timers are set from 64 concurrent tasks.

    python bench/timers.py [--timers 10000] [--window 5] [--quick]
"""

from __future__ import annotations

import argparse
import gc
import random
import tempfile
import time
import tracemalloc
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio

from report import Table, header, percentile, rss_bytes, verdict
from wakeful.agent.router import Decision
from wakeful.channels.timers import TimerService
from wakeful.events import TIMER_TRIGGER, Event
from wakeful.messages import Message
from wakeful.models import FunctionModel, Turn, say
from wakeful.models.base import ToolDefinition
from wakeful.runtime import Runtime
from wakeful.store.sqlite import Store, WriteSync

TARGET_P99_MS = 50.0
SETTERS = 64
MAX_WAIT_AFTER_WINDOW_SECONDS = 30.0


# --- memory --------------------------------------------------------------------------------------


async def memory_growth(count: int, *, traced: bool) -> int:
    """Bytes allocated (traced) or resident (RSS) more with `count` pending timers than before."""

    async def ignore(event: Event) -> None:
        pass

    gc.collect()
    if traced:
        tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0] if traced else rss_bytes()
    service = TimerService(None, ignore)
    async with anyio.create_task_group() as tg:
        await tg.start(service.run)
        when = datetime.now(UTC) + timedelta(hours=1)
        for i in range(count):
            await service.set_timer(session="main", note=f"reminder {i}", at=when)
        gc.collect()
        after = tracemalloc.get_traced_memory()[0] if traced else rss_bytes()
        if len(service.list_timers()) != count:
            raise RuntimeError(f"{len(service.list_timers())} of {count} timers are pending.")
        tg.cancel_scope.cancel()
    if traced:
        tracemalloc.stop()
    return after - before


# --- lateness ------------------------------------------------------------------------------------


@dataclass
class Fires:
    """How late each fire was (milliseconds), from the time the event says it was scheduled for."""

    expected: int
    lateness_ms: list[float] = field(default_factory=list)
    all_fired: anyio.Event = field(default_factory=anyio.Event)

    def record(self, event: Event) -> None:
        now = time.time()
        if event.kind != TIMER_TRIGGER:
            return
        scheduled = datetime.fromisoformat(event.context["scheduled_for"]).timestamp()
        self.lateness_ms.append((now - scheduled) * 1e3)
        if len(self.lateness_ms) == self.expected:
            self.all_fired.set()


@dataclass(frozen=True)
class Schedule:
    """`count` timers due at random moments in a `window`-second span opening `lead` s later."""

    count: int
    window: float
    lead: float

    def moments(self, seed: int = 0) -> list[datetime]:
        rng = random.Random(seed)
        opens = datetime.now(UTC) + timedelta(seconds=self.lead)
        return sorted(
            opens + timedelta(seconds=rng.uniform(0, self.window)) for _ in range(self.count)
        )


async def set_timers(service: TimerService, moments: Sequence[datetime]) -> float:
    """Set one timer per moment from SETTERS concurrent tasks; return the seconds it took."""
    start = time.perf_counter()

    async def setter(first: int) -> None:
        for i in range(first, len(moments), SETTERS):
            await service.set_timer(session="main", note=f"timer {i}", at=moments[i])

    async with anyio.create_task_group() as tg:
        for first in range(SETTERS):
            tg.start_soon(setter, first)
    return time.perf_counter() - start


@dataclass(frozen=True)
class LatenessRun:
    set_seconds: float
    fires: Fires


async def wait_for_fires(fires: Fires, plan: Schedule) -> None:
    with anyio.move_on_after(plan.lead + plan.window + MAX_WAIT_AFTER_WINDOW_SECONDS):
        await fires.all_fired.wait()


async def service_run(plan: Schedule, with_store: bool) -> LatenessRun:
    fires = Fires(plan.count)

    async def emit(event: Event) -> None:
        fires.record(event)

    with tempfile.TemporaryDirectory() as tmp:
        store = (
            await Store.open(Path(tmp) / "bench.db", synchronous="normal") if with_store else None
        )
        try:
            service = TimerService(store, emit)
            async with anyio.create_task_group() as tg:
                await tg.start(service.run)
                set_seconds = await set_timers(service, plan.moments())
                await wait_for_fires(fires, plan)
                tg.cancel_scope.cancel()
        finally:
            if store is not None:
                await store.close()
    return LatenessRun(set_seconds, fires)


class RecordingRuntime(Runtime):
    """A Runtime that notes each event the moment it is handed to its session (the path a
    timer's fire takes once the timer service has stored it; `submit` is the channels' path)."""

    fires: Fires | None = None

    async def _hand(self, event: Event) -> Decision:
        if self.fires is not None:
            self.fires.record(event)
        return await super()._hand(event)


async def runtime_run(plan: Schedule, synchronous: WriteSync) -> LatenessRun:
    fires = Fires(plan.count)

    def script(messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> Turn:
        return say("noted")

    with tempfile.TemporaryDirectory() as tmp:
        rt = RecordingRuntime(
            model=FunctionModel(script),
            with_core_tools=False,
            store_path=Path(tmp) / "bench.db",
            store_synchronous=synchronous,
        )
        rt.fires = fires
        async with rt:
            assert rt.timers is not None
            set_seconds = await set_timers(rt.timers, plan.moments())
            await wait_for_fires(fires, plan)
    return LatenessRun(set_seconds, fires)


# --- the report ----------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timers", type=int, default=10_000)
    parser.add_argument("--window", type=float, default=5.0, help="seconds the fires spread over")
    parser.add_argument("--quick", action="store_true", help="2,000 timers over 1 s")
    args = parser.parse_args()
    count = 2000 if args.quick else args.timers
    window = 1.0 if args.quick else args.window
    # Long enough to set every timer (with the store, ~0.1 ms each) before the first is due.
    plan = Schedule(count, window, lead=max(1.0, count / 5000))

    rss_growth = anyio.run(lambda: memory_growth(count, traced=False))
    traced_growth = anyio.run(lambda: memory_growth(count, traced=True))
    runs: dict[str, Callable[[], Awaitable[LatenessRun]]] = {
        "TimerService": lambda: service_run(plan, with_store=False),
        "TimerService + SQLite (normal)": lambda: service_run(plan, with_store=True),
        "Runtime + SQLite (emit = submit; normal, default)": lambda: runtime_run(plan, "normal"),
        "Runtime + SQLite (emit = submit; full)": lambda: runtime_run(plan, "full"),
    }
    anyio.run(lambda: service_run(Schedule(200, 0.2, lead=0.3), with_store=True))  # warm-up
    results = {name: anyio.run(run) for name, run in runs.items()}

    header(f"Timers: {count:,} pending at once, fires spread over {window:g} s, real clock")
    memory = Table(["memory with timers pending", "total MiB", "bytes/timer"])
    memory.add("tracemalloc (Python allocations)", traced_growth / 2**20, traced_growth / count)
    memory.add("RSS (resident set)", rss_growth / 2**20, rss_growth / count)
    memory.print()
    print()
    table = Table(
        ["lateness", "set s", "fired", "p50 ms", "p99 ms", "max ms", "target p99", "result"]
    )
    for name, run in results.items():
        lateness = run.fires.lateness_ms
        fired = f"{len(lateness):,}/{count:,}"
        if not lateness:
            table.add(name, run.set_seconds, fired, "-", "-", "-", "", "FAIL")
            continue
        p99 = percentile(lateness, 99)
        result = verdict(p99, TARGET_P99_MS) if len(lateness) == count else "FAIL (not all)"
        if run.set_seconds >= plan.lead:
            result += " (setting took longer than the lead)"
        table.add(
            name,
            run.set_seconds,
            fired,
            percentile(lateness, 50),
            p99,
            max(lateness),
            f"≤ {TARGET_P99_MS:g} ms",
            result,
        )
    table.print()


if __name__ == "__main__":
    main()
