"""Protocol errors of wakeful's MCP server, spoken to over a real stdio transport as raw JSON-RPC
lines (as any client would send them): a list request with a cursor this server never gave is
-32602 "Invalid params" naming the cursor, and an `initialize` with a protocol version the server
does not support is answered with the version it does support (the specification's rule; the
SDK does this, and the test keeps it so)."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import Process
from anyio.streams.text import TextReceiveStream
from mcp_types.version import LATEST_HANDSHAKE_VERSION

pytestmark = pytest.mark.anyio


class RawClient:
    """Sends JSON-RPC lines to a server process and reads its answers by id."""

    def __init__(self, process: Process) -> None:
        assert process.stdin is not None and process.stdout is not None
        self.process = process
        self._lines = TextReceiveStream(process.stdout)
        self._buffer = ""
        self._next_id = 0

    async def send(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self._next_id += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self._next_id, "method": method}
        if params is not None:
            message["params"] = params
        await self._write(message)
        with anyio.fail_after(30):
            while True:
                answer = await self._read()
                if answer.get("id") == self._next_id:
                    return answer

    async def notify(self, method: str) -> None:
        await self._write({"jsonrpc": "2.0", "method": method})

    async def _write(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send((json.dumps(message) + "\n").encode())

    async def _read(self) -> dict[str, Any]:
        while "\n" not in self._buffer:
            self._buffer += await self._lines.receive()
        line, self._buffer = self._buffer.split("\n", 1)
        answer: dict[str, Any] = json.loads(line)
        return answer


@asynccontextmanager
async def perception_server(root: Path) -> AsyncIterator[RawClient]:
    command = [sys.executable, "-m", "wakeful.cli.mcp", "serve", "perception", "--root", str(root)]
    async with await anyio.open_process(command, stderr=None) as process:
        try:
            yield RawClient(process)
        finally:
            process.terminate()
            with anyio.move_on_after(10):
                await process.wait()


async def initialized(client: RawClient, version: str = LATEST_HANDSHAKE_VERSION) -> dict[str, Any]:
    answer = await client.send(
        "initialize",
        {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"},
        },
    )
    await client.notify("notifications/initialized")
    return answer


async def test_a_cursor_this_server_never_gave_is_invalid_params(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a")
    async with perception_server(tmp_path) as client:
        await initialized(client)
        for method in ("tools/list", "prompts/list", "resources/templates/list"):
            answer = await client.send(method, {"cursor": "bogus-cursor"})
            assert "result" not in answer, method
            assert answer["error"]["code"] == -32602, method
            assert "Invalid params" in answer["error"]["message"]
            assert "'bogus-cursor'" in answer["error"]["message"]
            assert method in answer["error"]["message"]
        for cursor in ("bogus-cursor", "999999"):
            answer = await client.send("resources/list", {"cursor": cursor})
            assert answer["error"]["code"] == -32602, cursor
            assert repr(cursor) in answer["error"]["message"]
        # Without a cursor every list still answers.
        for method in ("tools/list", "prompts/list", "resources/list", "resources/templates/list"):
            assert "result" in await client.send(method, {}), method


async def test_an_unsupported_protocol_version_is_answered_with_a_supported_one(
    tmp_path: Path,
) -> None:
    async with perception_server(tmp_path) as client:
        answer = await initialized(client, "1999-01-01")
        assert answer["result"]["protocolVersion"] == LATEST_HANDSHAKE_VERSION
        assert answer["result"]["serverInfo"]["name"]
        # The session works at the version the server chose.
        listed = await client.send("tools/list", {})
        assert any(t["name"] == "read_file" for t in listed["result"]["tools"])
