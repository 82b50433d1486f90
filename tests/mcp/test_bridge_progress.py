"""Progress notifications while a call runs: in memory, over stdio and Streamable HTTP."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import mcp_types as types
import pytest

from loopback_http import serving
from mcp import Client, StdioServerParameters
from wakeful.mcp import bridge
from wakeful.safety.sandbox import SandboxSettings
from wakeful.toolkits.execution.server import execution_server

# A line every 0.2 s for about 2 s, then done.
TICKING = "for i in $(seq 1 10); do echo line-$i; sleep 0.2; done; echo finished"
INTERVAL = 0.3

# The execution server over stdio with the progress interval shortened, as a subprocess.
STDIO_SERVER = (
    "import sys, anyio\n"
    "from wakeful.mcp import bridge\n"
    f"bridge.PROGRESS_INTERVAL_SECONDS = {INTERVAL}\n"
    "from wakeful.cli.mcp import serve_stdio\n"
    "from wakeful.toolkits.execution.server import execution_server\n"
    "from pathlib import Path\n"
    "anyio.run(serve_stdio, execution_server(Path(sys.argv[1])))\n"
)

Progress = tuple[float, float | None, str | None]


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


@pytest.fixture
def short_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bridge, "PROGRESS_INTERVAL_SECONDS", INTERVAL)


async def call_ticking(client: Client, *, with_callback: bool) -> list[Progress]:
    seen: list[Progress] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    with anyio.fail_after(30):
        result = await client.call_tool(
            "shell_exec",
            {"command": TICKING},
            progress_callback=on_progress if with_callback else None,
        )
    assert not result.is_error, text_of(result)
    assert "finished" in text_of(result)
    return seen


def assert_live_progress(seen: list[Progress]) -> None:
    assert len(seen) >= 3, seen
    values = [progress for progress, _, _ in seen]
    assert values == sorted(values) and len(set(values)) == len(values), values
    messages = [message or "" for _, _, message in seen]
    assert any(m.startswith("line-") for m in messages), messages
    # The message is the latest line at that moment: later notifications show later lines.
    numbers = [int(m.split("-")[1]) for m in messages if m.startswith("line-")]
    assert numbers == sorted(numbers) and numbers[-1] > numbers[0], messages


def unconfined(root: Path) -> bridge.BridgeServer:
    return execution_server(root, settings=[SandboxSettings(backend="none")])


@pytest.mark.anyio
@pytest.mark.usefixtures("short_interval")
async def test_in_memory_a_long_call_sends_progress_with_the_latest_line(tmp_path: Path) -> None:
    async with Client(unconfined(tmp_path)) as client:
        assert_live_progress(await call_ticking(client, with_callback=True))


@pytest.mark.anyio
@pytest.mark.usefixtures("short_interval")
async def test_no_progress_is_sent_to_a_client_that_did_not_ask(tmp_path: Path) -> None:
    notified: list[object] = []

    async def on_message(message: object) -> None:
        notified.append(message)

    async with Client(unconfined(tmp_path), message_handler=on_message) as client:
        assert await call_ticking(client, with_callback=False) == []
    assert not [m for m in notified if isinstance(m, types.ProgressNotification)], notified


@pytest.mark.anyio
async def test_over_stdio_a_long_call_sends_progress(tmp_path: Path) -> None:
    server = StdioServerParameters(
        command=sys.executable, args=["-c", STDIO_SERVER, str(tmp_path)], cwd=tmp_path
    )
    async with Client(server) as client:
        assert_live_progress(await call_ticking(client, with_callback=True))
        assert await call_ticking(client, with_callback=False) == []


@asynccontextmanager
async def over_http(root: Path) -> AsyncIterator[str]:
    app = unconfined(root).streamable_http_app()
    async with serving(app, lifespan="on") as port:
        yield f"http://127.0.0.1:{port}/mcp"


@pytest.mark.anyio
@pytest.mark.usefixtures("short_interval")
async def test_over_streamable_http_a_long_call_sends_progress(tmp_path: Path) -> None:
    async with over_http(tmp_path) as url, Client(url) as client:
        assert_live_progress(await call_ticking(client, with_callback=True))
