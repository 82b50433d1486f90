"""Start-up with many stored sessions: how long `async with Runtime(...)` takes to enter, and how
many sessions it loads, when the store holds 10,000 or 100,000 idle sessions and a few with work.

Each idle session is a finished exchange (system prompt, user message, assistant answer: three
trajectory rows); `--with-work` sessions (10 by default) each have one pending user event, so a
start must load them and answer them. The store is written once per size with plain SQL (after
`Store.open` made the schema) and copied for each run. Each run is a fresh interpreter that
enters a Runtime (SQLite store, no core tools, no timers, `FunctionModel` answering "ok"), waits
until it is idle, and leaves it; the row gives the seconds to enter, to settle, to leave, the
sessions in memory after the start and the resident set size.

    python bench/startup_sessions.py [--sizes 10000 100000] [--with-work 10] [--quick]

To compare with an earlier wakeful, run the script with that version's `src` first on
PYTHONPATH; it uses only `Runtime`, `Store.open` and `Runtime.sessions`.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
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
from wakeful.messages import AssistantMessage, Message, SystemMessage, UserMessage
from wakeful.models import FunctionModel, Turn, say
from wakeful.models.base import ToolDefinition
from wakeful.runtime import Runtime
from wakeful.store.sqlite import Store

SETTLE_TIMEOUT_SECONDS = 600.0


@dataclass(frozen=True)
class Row:
    idle: int
    with_work: int
    enter_seconds: float
    settle_seconds: float
    exit_seconds: float
    loaded: int
    rss_mib: float


async def write_store(path: Path, idle: int, with_work: int) -> None:
    """A store of `idle` finished sessions and `with_work` sessions with a pending event."""
    async with await Store.open(path, synchronous="normal"):
        pass  # the schema
    system = SystemMessage(content="You help.").model_dump_json()
    rows: list[tuple[str, str]] = []
    for i in range(idle):
        session = f"idle{i:06d}"
        rows.append((session, system))
        rows.append((session, UserMessage(content=f"hi {i}", mark="event").model_dump_json()))
        rows.append((session, AssistantMessage(content=f"hello {i}").model_dump_json()))
    events = [user_input(f"work {i}", session=f"work{i:03d}") for i in range(with_work)]
    with sqlite3.connect(path) as conn:
        conn.executemany("INSERT INTO trajectory (session, data) VALUES (?, ?)", rows)
        conn.executemany(
            "INSERT INTO events (id, session, kind, ts, status, data) "
            "VALUES (?, ?, ?, ?, 'pending', ?)",
            [(e.id, e.session, e.kind, e.ts.isoformat(), e.to_json()) for e in events],
        )
    conn.close()


async def start_once(path: Path, idle: int, with_work: int) -> Row:
    def answer(messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> Turn:
        return say("ok")

    rt = Runtime(
        model=FunctionModel(answer),
        store_path=path,
        with_core_tools=False,
        with_timers=False,
        gate=None,
    )
    start = time.perf_counter()
    await rt.__aenter__()
    entered = time.perf_counter()
    try:
        with anyio.fail_after(SETTLE_TIMEOUT_SECONDS):
            await rt.wait_idle()
        settled = time.perf_counter()
        loaded = len(rt.sessions)
        rss = rss_bytes() / 2**20
    finally:
        leaving = time.perf_counter()
        await rt.__aexit__(None, None, None)
    return Row(
        idle=idle,
        with_work=with_work,
        enter_seconds=entered - start,
        settle_seconds=settled - entered,
        exit_seconds=time.perf_counter() - leaving,
        loaded=loaded,
        rss_mib=rss,
    )


def run_in_child(path: Path, idle: int, with_work: int) -> Row:
    """Start a runtime on `path` in a fresh interpreter and read its row back."""
    command = [sys.executable, __file__, "--child", str(path), str(idle), str(with_work)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"The run {command} failed:\n{done.stderr}")
    return Row(**json.loads(done.stdout))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--with-work", type=int, default=10)
    parser.add_argument("--runs", type=int, default=1, help="starts per size (a row each)")
    parser.add_argument("--quick", action="store_true", help="1,000 and 10,000 idle sessions")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        path, idle, with_work = args.child
        row = anyio.run(start_once, Path(path), int(idle), int(with_work))
        print(json.dumps(asdict(row)))
        return
    sizes = [1_000, 10_000] if args.quick else args.sizes
    header(
        "Start-up with stored sessions: entering a Runtime on a store of idle sessions (3 "
        f"trajectory rows each) and {args.with_work} sessions with a pending event"
    )
    table = Table(["idle sessions", "enter s", "settle s", "exit s", "loaded", "RSS MiB"])
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            template = Path(tmp) / f"template-{size}.db"
            anyio.run(write_store, template, size, args.with_work)
            for _ in range(args.runs):
                copy = Path(tmp) / "run.db"
                shutil.copyfile(template, copy)
                row = run_in_child(copy, size, args.with_work)
                for leftover in Path(tmp).glob("run.db*"):
                    leftover.unlink()
                table.add(
                    row.idle,
                    row.enter_seconds,
                    row.settle_seconds,
                    row.exit_seconds,
                    row.loaded,
                    row.rss_mib,
                )
    table.print()


if __name__ == "__main__":
    main()
