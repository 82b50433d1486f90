"""Session memory: RSS, live asyncio tasks and time as 100,000 short sessions pass through one
runtime, with idle sessions evicted and, side by side, without eviction.

Each session is one user event (a new session id) answered by a `FunctionModel` in one turn of
plain text, through a Runtime with the SQLite store in a temporary directory (the default
`store_synchronous="normal"`), without the core tools and timers. Sessions are submitted in
waves of 100 concurrent events, each wave followed by `Runtime.wait_idle()`. With eviction, a
session idle for `--evict-after` seconds (0.5 by default) leaves memory; without it
(`evict_idle_after_seconds=None`) every session stays loaded, so that run is shorter
(`--baseline-sessions`, 20,000 by default) and its rows stop there. The model's log of requests
(`FunctionModel.requests`, a test aid) is cleared after every wave so that it is not counted.

Every `--every` sessions a row gives the resident set size (VmRSS from /proc/self/status), the
live asyncio tasks (`len(asyncio.all_tasks())`), the sessions in memory, and the mean time per
1,000 sessions since the previous row. Each configuration runs in a fresh interpreter, so one
run's memory does not show in the other's RSS.

    python bench/session_memory.py [--sessions 100000] [--baseline-sessions 20000] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import anyio

from report import Table, header, rss_bytes
from wakeful.events import user_input
from wakeful.messages import Message
from wakeful.models import FunctionModel, Turn, say
from wakeful.models.base import ToolDefinition
from wakeful.runtime import Runtime

WAVE = 100
WAVE_TIMEOUT_SECONDS = 60.0


@dataclass(frozen=True)
class Row:
    sessions: int
    rss_mib: float
    asyncio_tasks: int
    in_memory: int
    seconds_per_1000: float


async def run(count: int, every: int, evict_after: float | None) -> list[Row]:
    def answer(messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> Turn:
        return say("Noted.")

    model = FunctionModel(answer)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        rt = Runtime(
            model=model,
            with_core_tools=False,
            with_timers=False,
            store_path=Path(tmp) / "bench.db",
            evict_idle_after_seconds=evict_after,
        )
        async with rt:
            since = time.perf_counter()
            done = 0
            while done < count:
                wave = min(WAVE, count - done)
                with anyio.fail_after(WAVE_TIMEOUT_SECONDS):
                    async with anyio.create_task_group() as tg:
                        for i in range(done, done + wave):
                            tg.start_soon(rt.submit, user_input("Remember: milk.", session=f"s{i}"))
                    await rt.wait_idle()
                model.requests.clear()
                done += wave
                if done % every == 0 or done == count:
                    elapsed = time.perf_counter() - since
                    span = done - (rows[-1].sessions if rows else 0)
                    rows.append(
                        Row(
                            sessions=done,
                            rss_mib=rss_bytes() / 2**20,
                            asyncio_tasks=len(asyncio.all_tasks()),
                            in_memory=len(rt.sessions),
                            seconds_per_1000=elapsed / span * 1000,
                        )
                    )
                    since = time.perf_counter()
            if rt.store is not None and await rt.store.pending_events():
                raise RuntimeError("Some events were left pending: a session lost its event.")
    return rows


def run_in_child(count: int, every: int, evict_after: float | None) -> list[Row]:
    """Run one configuration in a fresh interpreter and read its rows back."""
    command = [sys.executable, __file__, "--child", str(count), str(every), str(evict_after)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"The run {command} failed:\n{done.stderr}")
    return [Row(**row) for row in json.loads(done.stdout)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=100_000)
    parser.add_argument("--baseline-sessions", type=int, default=20_000)
    parser.add_argument("--every", type=int, default=10_000)
    parser.add_argument("--evict-after", type=float, default=0.5)
    parser.add_argument("--quick", action="store_true", help="5,000 sessions, a row every 1,000")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        count, every, evict = args.child
        evict_after = None if evict == "None" else float(evict)
        rows = anyio.run(run, int(count), int(every), evict_after)
        print(json.dumps([asdict(row) for row in rows]))
        return
    sessions, baseline, every = args.sessions, args.baseline_sessions, args.every
    if args.quick:
        sessions, baseline, every = 5000, 5000, 1000
    evicting = run_in_child(sessions, every, args.evict_after)
    keeping = run_in_child(min(baseline, sessions), every, None)

    header(
        f"Session memory: {sessions:,} short sessions (one event, one model turn, SQLite store) "
        f"through one Runtime in waves of {WAVE}; evicting sessions idle for "
        f"{args.evict_after:g} s, and without eviction for {min(baseline, sessions):,} sessions"
    )
    table = Table(
        [
            "sessions",
            "RSS MiB",
            "asyncio tasks",
            "in memory",
            "s / 1,000",
            "no eviction: RSS MiB",
            "asyncio tasks",
            "in memory",
            "s / 1,000",
        ]
    )
    kept = {row.sessions: row for row in keeping}
    for row in evicting:
        other = kept.get(row.sessions)
        table.add(
            row.sessions,
            row.rss_mib,
            row.asyncio_tasks,
            row.in_memory,
            row.seconds_per_1000,
            *(
                (other.rss_mib, other.asyncio_tasks, other.in_memory, other.seconds_per_1000)
                if other is not None
                else ("-", "-", "-", "-")
            ),
        )
    table.print()


if __name__ == "__main__":
    main()
