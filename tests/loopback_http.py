"""An ASGI app served by uvicorn on a free port of 127.0.0.1, in the test's own event loop."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Literal

import anyio
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
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
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
