"""A real runtime (SQLite store, scripted model) with the web console over it, for the tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx2

from wakeful.models.base import Model
from wakeful.runtime import Runtime
from wakeful.toolkits.comms.reply import reply_to_user
from wakeful.tools.spec import Tool
from wakeful.web import ConsoleAuth, WebConsole

TOKEN = "test-token-0123456789"
ORIGIN = "http://127.0.0.1:8787"


@dataclass
class Console:
    runtime: Runtime
    web: WebConsole
    client: httpx2.AsyncClient

    @property
    def csrf(self) -> dict[str, str]:
        """The headers the console's own page sends with a change."""
        return {"origin": ORIGIN, "x-csrf-token": self.web.auth.csrf_token}


def new_runtime(model: Model, tmp_path: Path, *tools: Tool) -> Runtime:
    return Runtime(
        model=model,
        tools=[reply_to_user, *tools],
        with_core_tools=False,
        with_timers=False,
        workdir=tmp_path,
        store_path=tmp_path / "wakeful.db",
    )


@asynccontextmanager
async def web_console(model: Model, tmp_path: Path, *tools: Tool) -> AsyncIterator[Console]:
    """The console app, called in-process (no socket), with the client logged in by cookie."""
    async with new_runtime(model, tmp_path, *tools) as rt:
        web = WebConsole(rt, ConsoleAuth.for_address(TOKEN, "127.0.0.1", 8787))
        transport = httpx2.ASGITransport(app=web.app)
        async with httpx2.AsyncClient(transport=transport, base_url=ORIGIN) as client:
            yield Console(rt, web, client)
