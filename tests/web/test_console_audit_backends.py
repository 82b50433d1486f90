"""The web console's audit figures come from the store's audit log on either backend: a runtime
on a SQLite file and one on a shared PostgreSQL database show the same counts for the same calls
(before, a console on PostgreSQL showed none)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx2
import pytest
from web_harness import ORIGIN, TOKEN, reply_to_user

from wakeful.models import ScriptedModel, call, say, use
from wakeful.runtime.runtime import Runtime
from wakeful.safety.gate import CallGate
from wakeful.tools.spec import ToolContext, tool
from wakeful.web import ConsoleAuth, WebConsole
from wakeful.web.auth import COOKIE

pytestmark = pytest.mark.anyio


@tool()
async def lookup(ctx: ToolContext, word: str) -> str:
    """Look a word up (a test tool). Use it to look up a word, e.g. word="cat"; it cannot look up
    an empty word. Returns the word's meaning as text. Cost: instant.

    Examples: lookup(word="cat")
    """
    if not word:
        raise ValueError("an empty word has no meaning; give a word")
    return f"{word}: a meaning"


async def console_audit(runtime_store: Any, tmp_path: Path) -> dict[str, Any]:
    """Run three calls of `lookup` (one failing) through a runtime on `runtime_store`, then read
    the figures the console's state shows."""
    model = ScriptedModel(
        [
            use(call("lookup", word="cat"), call("lookup", word="dog"), call("lookup", word="")),
            say("done"),
        ]
    )
    runtime = Runtime(
        model=model,
        tools=[reply_to_user, lookup],
        with_core_tools=False,
        with_timers=False,
        workdir=tmp_path,
        gate=CallGate(),
        **runtime_store.options,
    )
    async with runtime as rt:
        web = WebConsole(rt, ConsoleAuth.for_address(TOKEN, "127.0.0.1", 8787))
        transport = httpx2.ASGITransport(app=web.app)
        async with httpx2.AsyncClient(transport=transport, base_url=ORIGIN) as client:
            client.cookies.set(COOKIE, TOKEN)
            csrf = {"origin": ORIGIN, "x-csrf-token": web.auth.csrf_token}
            sent = await client.post("/api/send", json={"text": "look these up"}, headers=csrf)
            assert sent.status_code == 200
            await rt.wait_idle()
            assert rt.store is not None
            await rt.store.flush()
            state = (await client.get("/api/state")).json()
    audit: dict[str, Any] = state["audit"]
    return audit


async def test_the_console_shows_the_audit_figures_of_either_backend(
    runtime_store: Any, tmp_path: Path
) -> None:
    audit = await console_audit(runtime_store, tmp_path)
    figures = audit["lookup"]
    assert (figures["calls"], figures["errors"], figures["denied"]) == (3, 1, 0)
    assert figures["error_rate"] == pytest.approx(1 / 3)
    assert figures["p50_ms"] is not None and figures["p95_ms"] >= figures["p50_ms"]
