"""MCP tool-call round trip: wakeful's bridge server against a raw MCP SDK server.

Server side: both servers offer one trivial tool (`echo`). The raw one is the SDK's
`MCPServer` with a decorated function; ours is `wakeful.mcp.bridge.build_server` around a
`@tool`, so every call also goes through wakeful's JSON parsing, schema validation and error
mapping. Each transport is measured for both in one run: in-memory (the SDK client talks to
the server object), stdio (a subprocess) and Streamable HTTP (a subprocess on 127.0.0.1). The
target is our overhead on top of the SDK ≤ 10 % (p50 latency). Client side: the raw SDK
`Client` against wakeful's `MCPToolset` (per-call timeouts, progress, result mapping),
calling the raw server in memory.

    python bench/mcp_round_trip.py [--calls 500] [--quick]
    python bench/mcp_round_trip.py --serve raw|ours [--http PORT]   (used by the benchmark)
"""

from __future__ import annotations

import argparse
import logging
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any

import anyio
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.server import MCPServer
from pydantic import Field

from mcp import Client
from report import Table, header, percentile, verdict
from wakeful.events import Event
from wakeful.mcp.bridge import build_server
from wakeful.mcp.client import MCPToolset
from wakeful.services import Services
from wakeful.tools.spec import ToolContext, tool
from wakeful.tools.tasks import TaskManager

TARGET_OVERHEAD = 0.10
HERE = Path(__file__).resolve()


def raw_server() -> MCPServer:
    server = MCPServer("raw")

    @server.tool()
    def echo(text: str) -> str:
        """Echo the text."""
        return text

    return server


@tool(examples=({"text": "hi"},))
async def echo(text: Annotated[str, Field(description="What to echo, e.g. 'hi'")]) -> str:
    """Echo the text."""
    return text


def our_server() -> Any:
    return build_server("ours", [echo])


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def measure(client: Client, calls: int) -> list[float]:
    """Latencies of `calls` sequential calls, after 20 warm-up calls."""
    async with client:
        for _ in range(20):
            await client.call_tool("echo", {"text": "hi"})
        samples = []
        for _ in range(calls):
            start = time.perf_counter()
            await client.call_tool("echo", {"text": "hi"})
            samples.append(time.perf_counter() - start)
    return samples


async def measure_like_the_toolset(client: Client, calls: int) -> list[float]:
    """As `measure`, with the protocol features MCPToolset uses on every call: a progress token
    (a callback, so progress can extend the call's deadline) and the tools/list_changed
    subscription it keeps open to follow the server's tools. The like-for-like baseline."""

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        pass

    async with client, client.listen(tools_list_changed=True):
        for _ in range(20):
            await client.call_tool("echo", {"text": "hi"}, progress_callback=on_progress)
        samples = []
        for _ in range(calls):
            start = time.perf_counter()
            await client.call_tool("echo", {"text": "hi"}, progress_callback=on_progress)
            samples.append(time.perf_counter() - start)
    return samples


async def toolset_samples(calls: int) -> list[float]:
    """The same calls through wakeful's MCP client (MCPToolset → Tool.run), in memory."""

    async def drop(event: Event) -> None:
        pass

    async with MCPToolset([], in_process={"raw": raw_server()}) as toolset:
        [echo_tool] = [t for t in toolset.tools() if t.name == "echo"]
        async with anyio.create_task_group() as tg:
            services = Services(tasks=TaskManager(tg, drop), emit=drop)
            ctx = ToolContext("bench", "call", "echo", services)
            for _ in range(20):
                await echo_tool.run({"text": "hi"}, ctx)
            samples = []
            for _ in range(calls):
                start = time.perf_counter()
                await echo_tool.run({"text": "hi"}, ctx)
                samples.append(time.perf_counter() - start)
    return samples


def stdio_client_for(kind: str) -> Client:
    params = StdioServerParameters(command=sys.executable, args=[str(HERE), "--serve", kind])
    return Client(stdio_client(params))


async def http_samples(kind: str, calls: int) -> list[float]:
    port = free_port()
    process = await anyio.open_process(
        [sys.executable, str(HERE), "--serve", kind, "--http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}/mcp"
        with anyio.fail_after(20):
            while True:
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                        break
                except OSError:
                    await anyio.sleep(0.05)
        return await measure(Client(url), calls)
    finally:
        process.terminate()
        with anyio.fail_after(10):
            await process.wait()
        await process.aclose()


def serve(kind: str, http_port: int | None) -> None:
    if kind == "raw":
        server = raw_server()
        if http_port is None:
            server.run("stdio")
        else:
            import uvicorn

            uvicorn.run(
                server.streamable_http_app(), host="127.0.0.1", port=http_port, log_level="warning"
            )
        return
    ours = our_server()
    if http_port is None:
        from mcp.server.stdio import stdio_server

        async def run_stdio() -> None:
            async with stdio_server() as (read, write):
                await ours.run(read, write, ours.create_initialization_options())

        anyio.run(run_stdio)
    else:
        import uvicorn

        uvicorn.run(
            ours.streamable_http_app(), host="127.0.0.1", port=http_port, log_level="warning"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--quick", action="store_true", help="100 calls per row")
    parser.add_argument("--serve", choices=["raw", "ours"])
    parser.add_argument("--http", type=int)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.http)
        return
    calls = 100 if args.quick else args.calls
    logging.getLogger("httpx2").setLevel(logging.WARNING)
    logging.getLogger("httpx").setLevel(logging.WARNING)

    transports: dict[str, Callable[[str], Awaitable[list[float]]]] = {
        "in-memory": lambda kind: measure(
            Client(raw_server() if kind == "raw" else our_server()), calls
        ),
        "stdio": lambda kind: measure(stdio_client_for(kind), calls),
        "streamable HTTP": lambda kind: http_samples(kind, calls),
    }
    rows = []
    for name, run in transports.items():
        raw = anyio.run(run, "raw")
        ours = anyio.run(run, "ours")
        rows.append((name, raw, ours))
    client_raw = anyio.run(measure, Client(raw_server()), calls)
    client_following = anyio.run(measure_like_the_toolset, Client(raw_server()), calls)
    client_ours = anyio.run(toolset_samples, calls)

    header(f"MCP tool-call round trip: {calls} sequential calls of `echo` per row")
    table = Table(["transport", "server", "p50 ms", "p99 ms", "calls/s", "overhead", "target"])
    for name, raw, ours in rows:
        raw_p50, ours_p50 = percentile(raw, 50), percentile(ours, 50)
        overhead = ours_p50 / raw_p50 - 1
        table.add(
            name,
            "raw MCPServer",
            raw_p50 * 1e3,
            percentile(raw, 99) * 1e3,
            len(raw) / sum(raw),
            "",
            "",
        )
        table.add(
            name,
            "wakeful bridge",
            ours_p50 * 1e3,
            percentile(ours, 99) * 1e3,
            len(ours) / sum(ours),
            f"{overhead:+.1%}",
            f"≤ +10%: {verdict(overhead, TARGET_OVERHEAD)}",
        )
    # The toolset asks for progress on every call and follows tool-list changes; it is measured
    # against a raw Client doing the same, and the bare Client is shown for reference.
    client_rows = [
        ("client: raw SDK Client", client_raw, None),
        ("client: raw Client + progress, list_changed", client_following, None),
        ("client: MCPToolset", client_ours, client_following),
    ]
    for label, samples, baseline in client_rows:
        shown = ["", ""]
        if baseline is not None:
            overhead = percentile(samples, 50) / percentile(baseline, 50) - 1
            shown = [f"{overhead:+.1%}", f"≤ +10%: {verdict(overhead, TARGET_OVERHEAD)}"]
        table.add(
            "in-memory",
            label,
            percentile(samples, 50) * 1e3,
            percentile(samples, 99) * 1e3,
            len(samples) / sum(samples),
            *shown,
        )
    table.print()


if __name__ == "__main__":
    main()
