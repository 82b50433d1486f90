"""HTTP servers on 127.0.0.1 for tests: an ASGI app served by uvicorn in the test's own event
loop, or a `wakeful mcp serve` command run as a subprocess.

A fake service is one handler, a function of an `httpx2.Request` that returns an
`httpx2.Response`: `in_process` answers with it through a mock transport, `serving_handler` over a
real socket, so the same fake serves both.
"""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, Literal

import anyio
import httpx2
import uvicorn


class _Uvicorn(uvicorn.Server):
    """A uvicorn server that says when it is ready to accept connections."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = anyio.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        self.ready.set()


@asynccontextmanager
async def serving(app: Any, *, lifespan: Literal["on", "off"] = "off") -> AsyncIterator[int]:
    """Serve `app` until the block ends; yields the port. `lifespan="on"` for apps that need
    their startup (an MCP Streamable HTTP app starts its session manager there)."""
    config = uvicorn.Config(
        app,
        http="h11",
        ws="none",
        lifespan=lifespan,
        log_config=None,
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=1,
    )
    server = _Uvicorn(config)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve, [sock])
            with anyio.fail_after(5):
                await server.ready.wait()
            try:
                yield port
            finally:
                server.should_exit = True


Handler = Callable[[httpx2.Request], httpx2.Response]


def in_process(handler: Handler, base: str) -> httpx2.MockTransport:
    """A transport where `handler` answers every request to the host of `base`; a request to any
    other host fails as an unknown host would, so no test reaches the network by mistake."""
    host = httpx2.URL(base).host

    def answer(request: httpx2.Request) -> httpx2.Response:
        if request.url.host != host:
            raise httpx2.ConnectError(f"{request.url.host} is not served in-process (only {host})")
        return handler(request)

    return httpx2.MockTransport(answer)


@asynccontextmanager
async def serving_handler(handler: Handler) -> AsyncIterator[str]:
    """Serve `handler` on 127.0.0.1 until the block ends; yields the base URL."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        assert scope["type"] == "http", scope["type"]
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        path = scope["raw_path"] or scope["path"].encode()
        query = b"?" + scope["query_string"] if scope["query_string"] else b""
        request = httpx2.Request(
            scope["method"],
            (b"http://" + dict(scope["headers"])[b"host"] + path + query).decode("ascii"),
            headers=scope["headers"],
            content=body,
        )
        response = handler(request)
        await send(
            {
                "type": "http.response.start",
                "status": response.status_code,
                "headers": response.headers.raw,
            }
        )
        await send({"type": "http.response.body", "body": response.content})

    async with serving(app) as port:
        yield f"http://127.0.0.1:{port}"


@contextmanager
def mcp_server_over_http(command: list[str], *, cwd: Path | None = None) -> Iterator[str]:
    """Run `command --http 127.0.0.1:PORT` (a `wakeful mcp serve …` command) as a subprocess and
    yield its endpoint URL once it listens; stop it when the block ends."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [*command, "--http", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd=cwd,
    )
    try:
        _wait_until_listening(port, process)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        try:
            process.wait(timeout=5)
        finally:
            assert process.stderr is not None
            process.stderr.close()


def _wait_until_listening(port: int, process: subprocess.Popen[bytes]) -> None:
    for _ in range(300):
        if process.poll() is not None:
            assert process.stderr is not None
            raise AssertionError(f"the server exited: {process.stderr.read().decode()}")
        try:
            httpx2.get(f"http://127.0.0.1:{port}/", timeout=0.2)
            return
        except httpx2.TransportError:
            time.sleep(0.05)
    raise AssertionError("the server did not start listening within 15 s")
