"""The web console: how fast a message to the user shows in an open console, and what a console
with many stored messages costs to open.

A Runtime with a SQLite store serves the console on 127.0.0.1 (real uvicorn). Rows:

- a message sent to the user (`Outbox.send`: stored, then pushed) → its server-sent event read
  by a client holding the console's event stream open, one message at a time;
- with N messages stored, the first page: the page itself (`/`) and its message list
  (`/api/messages`, the latest 200), and the process's resident memory after serving them;
- paging back ("Load earlier messages"): the 200 messages before one half-way back, and one
  message with its deliveries (`/api/messages/<id>`, what the page refreshes).

    python bench/web_console.py [--quick]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import anyio
import httpx2

from report import Table, header, percentile, rss_bytes, verdict
from wakeful.models import ScriptedModel
from wakeful.runtime import Runtime
from wakeful.web import ConsoleAuth, WebConsole, serve_console

TOKEN = "bench-token"
TARGET_P99_MS = 100.0
REPEATS = 20


async def run(stored: int, pushed: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        rt = Runtime(
            model=ScriptedModel([]),
            with_core_tools=False,
            with_timers=False,
            store_path=Path(tmp) / "w.db",
        )
        async with rt, anyio.create_task_group() as tg:
            web = WebConsole(rt, ConsoleAuth.for_address(TOKEN, "127.0.0.1", 0))
            port = await tg.start(serve_console, web, "127.0.0.1", 0)
            ids = [(await rt.outbox.send("main", f"stored message {i}")).id for i in range(stored)]
            base = f"http://127.0.0.1:{port}"
            auth = {"authorization": f"Bearer {TOKEN}"}
            async with httpx2.AsyncClient(base_url=base, headers=auth, timeout=30) as client:
                started = time.perf_counter()
                listed = await client.get("/api/messages")
                listed_ms = (time.perf_counter() - started) * 1000
                started = time.perf_counter()
                page = await client.get("/")
                page_ms = (time.perf_counter() - started) * 1000
                assert listed.status_code == 200 and page.status_code == 200
                shown = len(listed.json()["messages"])
                rss = rss_bytes() / 2**20
                paging, single = [], []
                for _ in range(REPEATS):
                    started = time.perf_counter()
                    earlier = await client.get("/api/messages", params={"before": ids[stored // 2]})
                    paging.append((time.perf_counter() - started) * 1000)
                    assert len(earlier.json()["messages"]) == 200
                    started = time.perf_counter()
                    one = await client.get(f"/api/messages/{ids[stored // 2]}")
                    single.append((time.perf_counter() - started) * 1000)
                    assert one.status_code == 200

                latencies = []
                async with client.stream("GET", "/events") as stream:
                    lines = stream.aiter_lines()
                    await anext(lines)  # the stream is open
                    for i in range(pushed):
                        started = time.perf_counter()
                        await rt.outbox.send("main", f"pushed message {i}")
                        async for line in lines:
                            if line.startswith("data: "):
                                break
                        latencies.append((time.perf_counter() - started) * 1000)
            tg.cancel_scope.cancel()

    header(f"Web console: {pushed:,} messages pushed to an open console; {stored:,} stored")
    push = Table(["message → open console", "n", "p50 ms", "p99 ms", "max ms", "target"])
    p99 = percentile(latencies, 99)
    push.add(
        "Outbox.send → server-sent event read",
        len(latencies),
        percentile(latencies, 50),
        p99,
        max(latencies),
        f"p99 ≤ {TARGET_P99_MS:.0f} ms: {verdict(p99, TARGET_P99_MS)}",
    )
    push.print()
    print()
    first = Table(["first page", "stored", "shown", "ms", "process RSS MiB"])
    first.add("/api/messages (the latest 200)", stored, shown, listed_ms, rss)
    first.add("/ (the page)", stored, "", page_ms, "")
    first.print()
    print()
    back = Table(["paging back", "stored", "shown", "n", "p50 ms", "max ms"])
    for what, shown_here, times in (
        ("/api/messages?before= (half-way back)", 200, paging),
        ("/api/messages/<id> (its deliveries)", 1, single),
    ):
        back.add(what, stored, shown_here, len(times), percentile(times, 50), max(times))
    back.print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1,000 stored, 100 pushed")
    args = parser.parse_args()
    stored, pushed = (1_000, 100) if args.quick else (10_000, 300)
    anyio.run(run, stored, pushed)


if __name__ == "__main__":
    main()
