"""Webhook ingress: signed deliveries stored and acknowledged per second, the latency of each
acknowledgement, and how fast the events reach the agent, over a real loopback HTTP server.

"ingress → Runtime" rows: a wakeful Runtime with one webhook channel (uvicorn + Starlette) runs
in a process of its own, with its SQLite store in WAL mode. Each delivery's Standard Webhooks
signature (HMAC-SHA256 over the raw body) is checked, the delivery becomes an event, the
runtime's Inbox scans it for injected instructions and stores it, and only then is it answered
200; the event is then handed to the session, whose (scripted, instant) model takes it in with
the others queued meanwhile. "visible/s" counts the deliveries over the time from the first one
sent until the last was consumed by the agent (read from the store).

"ingress → store" rows: the same ingress delivering to an Inbox that only stores the event
(duplicates recognised): the floor of what an acknowledgement costs.

The senders run in this process on C keep-alive connections, each sending its next delivery as
soon as the last one is answered; deliveries are built and signed before the clock starts
(signing is the sender's cost). Latency is from the first byte of a request written to the last
byte of its answer read. After each row the server process is killed with SIGKILL and the store
opened again: every acknowledged delivery must be in it, once (a row that finds otherwise fails
the benchmark). "server CPU" is the user + system time the server process used per delivery:
1e6 / µs is what one core of this machine would sustain if the senders and the other tenants
left it alone.

    python bench/webhook_ingress.py [--deliveries 5000] [--quick]
"""

from __future__ import annotations

import argparse
import base64
import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import anyio
from anyio.streams.buffered import BufferedByteReceiveStream

from report import Table, header, percentile, verdict
from wakeful.channels.registry import ChannelSpec
from wakeful.channels.webhooks import WebhookIngress, WebhookSettings
from wakeful.channels.webhooks.signatures import sign_standard
from wakeful.core.channel import Delivery
from wakeful.events import Event
from wakeful.messages import Message
from wakeful.models import FunctionModel, Turn, say
from wakeful.models.base import ToolDefinition
from wakeful.runtime import Runtime
from wakeful.store.sqlite import Store, WriteSync

TARGET_PER_SECOND = 2000.0
KEY = b"bench-standard-webhooks-key-0032"
SECRET = "whsec_" + base64.b64encode(KEY).decode()
ENDPOINT = "orders"

# What the ingress delivers to: "bare", an Inbox that only stores; "runtime", a whole Runtime.
Path_ = Literal["bare", "runtime"]


# -- the server process --


async def instant_answer(messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> Turn:
    return say("noted")


class BareStoreInbox:
    """Only what an acknowledgement needs: the event stored (a known id recognised and
    answered "duplicate"), nothing scanned, nothing handed to a session."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def deliver(self, event: Event, *, filtered: str | None = None) -> Delivery:
        [delivery] = await self.deliver_many([(event, filtered)])
        return delivery

    async def deliver_many(self, events: Sequence[tuple[Event, str | None]]) -> list[Delivery]:
        new = await self.store.events.add_new_many([(event, "pending") for event, _ in events])
        return ["stored" if n else "duplicate" for n in new]


async def serve_bare(store_path: Path, synchronous: WriteSync) -> None:
    settings = WebhookSettings.model_validate(
        {"name": ENDPOINT, "scheme": "standard", "secret": SECRET, "port": 0}
    )
    async with await Store.open(store_path, synchronous=synchronous) as store:
        ingress = WebhookIngress(settings, name=f"webhook:{ENDPOINT}", inbox=BareStoreInbox(store))
        async with anyio.create_task_group() as tg:
            await tg.start(ingress.run)
            print(ingress.url, flush=True)


async def serve_runtime(store_path: Path, synchronous: WriteSync) -> None:
    runtime = Runtime(
        model=FunctionModel(instant_answer),
        with_core_tools=False,
        with_timers=False,
        store_path=store_path,
        store_synchronous=synchronous,
        channels=[
            ChannelSpec(
                kind="webhook",
                name=ENDPOINT,
                settings={"scheme": "standard", "secret": SECRET, "port": 0},
            )
        ],
    )
    async with runtime:
        detail = runtime.channels[f"webhook:{ENDPOINT}"].detail
        print(detail.removeprefix("listening on ").split(";")[0], flush=True)
        await anyio.sleep_forever()


# -- the senders --


def signed_requests(count: int, port: int) -> list[bytes]:
    """Whole HTTP/1.1 requests, each a signed delivery of a small JSON order."""
    now = int(time.time())
    requests = []
    for n in range(count):
        body = json.dumps(
            {"type": "order.created", "timestamp": now, "data": {"order": n, "total": 4200}}
        ).encode()
        delivery_id = f"msg_{n:08d}"
        head = (
            f"POST /hooks/{ENDPOINT} HTTP/1.1\r\n"
            f"Host: 127.0.0.1:{port}\r\n"
            "Content-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n"
            f"webhook-id: {delivery_id}\r\n"
            f"webhook-timestamp: {now}\r\n"
            f"webhook-signature: {sign_standard(KEY, delivery_id, now, body)}\r\n"
            "\r\n"
        )
        requests.append(head.encode() + body)
    return requests


@dataclass(frozen=True)
class RowResult:
    seconds: float
    latencies: list[float]
    visible_seconds: float | None = None
    server_cpu_seconds: float = 0.0


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def send_all(port: int, requests: list[bytes], connections: int) -> RowResult:
    queue = iter(requests)
    latencies: list[float] = []

    async def connection() -> None:
        stream = await anyio.connect_tcp("127.0.0.1", port)
        reader = BufferedByteReceiveStream(stream)
        async with stream:
            for request in queue:
                start = time.perf_counter()
                await stream.send(request)
                head = await reader.receive_until(b"\r\n\r\n", 65536)
                status = head.split(b" ", 2)[1]
                length = next(
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                )
                body = await reader.receive_exactly(length)
                latencies.append(time.perf_counter() - start)
                if status != b"200":
                    raise RuntimeError(f"A delivery was answered {status.decode()}: {body!r}")

    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(connections):
            tg.start_soon(connection)
    return RowResult(time.perf_counter() - start, latencies)


def wait_consumed(store_path: Path, count: int) -> None:
    """Return once `count` events are consumed by the agent (polled every 10 ms)."""
    with Store.read_only(store_path) as reader:
        deadline = time.monotonic() + 120
        while reader.event_counts().get("consumed", 0) < count:
            if time.monotonic() > deadline:
                raise RuntimeError(f"The agent had not taken in {count} events after 120 s.")
            time.sleep(0.01)


async def stored_count(store_path: Path) -> tuple[int, int]:
    async with await Store.open(store_path) as store:
        rows = await store.events.recent(limit=10**7)
    return len(rows), len({row.event.id for row in rows})


def run_row(path: Path_, count: int, connections: int, synchronous: WriteSync) -> RowResult:
    with tempfile.TemporaryDirectory() as tmp:
        store_path = Path(tmp) / "bench.db"
        server = subprocess.Popen(
            [sys.executable, __file__, f"--serve-{path}", str(store_path), "--sync", synchronous],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert server.stdout is not None
            url = server.stdout.readline().strip()
            if not url.startswith("http://"):
                raise RuntimeError("The ingress process did not start; see its output above.")
            port = int(url.rsplit(":", 1)[1])
            requests = signed_requests(count, port)
            cpu_before = cpu_seconds(server.pid)
            start = time.perf_counter()
            sent = anyio.run(send_all, port, requests, connections)
            if path == "runtime":
                wait_consumed(store_path, count)
            result = RowResult(
                sent.seconds,
                sent.latencies,
                time.perf_counter() - start if path == "runtime" else None,
                cpu_seconds(server.pid) - cpu_before,
            )
        finally:
            # Acknowledged implies stored: what was answered must be in the store even after a
            # kill, so the server gets no chance to flush anything more.
            os.kill(server.pid, signal.SIGKILL)
            server.wait()
            if server.stdout is not None:
                server.stdout.close()
        rows, unique = anyio.run(stored_count, store_path)
    if rows != count or unique != count:
        raise RuntimeError(f"{count} deliveries acknowledged, {rows} stored ({unique} distinct).")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deliveries", type=int, default=5000)
    parser.add_argument("--quick", action="store_true", help="1,000 deliveries, fewer rows")
    parser.add_argument("--serve-bare", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--serve-runtime", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--sync", default="normal", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_bare:
        anyio.run(serve_bare, args.serve_bare, args.sync)
        return
    if args.serve_runtime:
        anyio.run(serve_runtime, args.serve_runtime, args.sync)
        return
    count = 1000 if args.quick else args.deliveries
    rows: list[tuple[Path_, int, WriteSync]] = (
        [("bare", 32, "normal"), ("runtime", 1, "normal"), ("runtime", 32, "normal")]
        if args.quick
        else [
            ("bare", 1, "normal"),
            ("bare", 32, "normal"),
            ("bare", 128, "normal"),
            ("bare", 32, "full"),
            ("runtime", 1, "normal"),
            ("runtime", 32, "normal"),
            ("runtime", 128, "normal"),
            ("runtime", 32, "full"),
        ]
    )
    run_row("runtime", 200, 8, "normal")  # warm-up: imports, page cache
    results = [(p, c, s, run_row(p, count, c, s)) for p, c, s in rows]

    parser_name = "httptools" if importlib.util.find_spec("httptools") else "h11 (pure Python)"
    header(
        "Webhook ingress: signed Standard Webhooks deliveries over loopback HTTP, each answered "
        "200 only once stored (SQLite WAL; sync = PRAGMA synchronous); visible = taken in by the "
        "agent; uvicorn's HTTP parser: " + parser_name
    )
    table = Table(
        [
            "into",
            "connections",
            "sync",
            "deliveries",
            "seconds",
            "acks/s",
            "p50 ms",
            "p99 ms",
            "visible/s",
            "server CPU µs/delivery",
            "target",
        ]
    )
    for path, connections, synchronous, result in results:
        rate = count / result.seconds
        table.add(
            "ingress → store" if path == "bare" else "ingress → Runtime",
            connections,
            synchronous,
            count,
            result.seconds,
            rate,
            percentile(result.latencies, 50) * 1e3,
            percentile(result.latencies, 99) * 1e3,
            count / result.visible_seconds if result.visible_seconds else "",
            result.server_cpu_seconds / count * 1e6,
            f"≥ {TARGET_PER_SECOND:,.0f}/s: "
            + verdict(rate, TARGET_PER_SECOND, higher_is_better=True),
        )
    table.print()


if __name__ == "__main__":
    main()
