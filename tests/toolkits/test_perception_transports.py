"""The perception server over real transports: stdio in a subprocess and Streamable HTTP, and
the `serve perception` command's handling of bad options."""

from __future__ import annotations

import base64
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import BlobResourceContents, TextResourceContents
from perception_tree import AWKWARD, make_tree, text_of
from typer.testing import CliRunner

from loopback_http import mcp_server_over_http
from mcp import Client, StdioServerParameters
from wakeful.cli.mcp import mcp_app, parse_http_address


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return make_tree(tmp_path)


def serve_command(root: Path) -> list[str]:
    return [sys.executable, "-m", "wakeful.cli.mcp", "serve", "perception", "--root", str(root)]


async def exercise(client: Client) -> None:
    names = [t.name for t in (await client.list_tools()).tools]
    assert names[:4] == ["find_file", "grep_file", "read_file", "list_dir"]
    assert {"read_document", "web_search", "get_weather", "calendar_events"} <= set(names)
    result = await client.call_tool("read_file", {"path": "awkward.txt", "limit": 1})
    assert text_of(result).split("\n")[1] == "     1\t“Curly” quotes and ‘single’ ones\r"
    refused = await client.call_tool("read_file", {"path": "escape.txt"})
    assert refused.is_error and "symlink" in text_of(refused)
    found = await client.call_tool("find_file", {"pattern": "*.toml"})
    assert found.structured_content == {
        "matches": ["src/app.toml"],
        "total": 1,
        "next_cursor": None,
    }
    # The server features: the root's files as resources, confined; the skills as prompts.
    listed = await client.list_resources()
    numbers = next(r for r in listed.resources if r.name == "numbers.txt")
    assert numbers.uri.startswith("file:///") and numbers.mime_type == "text/plain"
    read = (await client.read_resource(numbers.uri)).contents[0]
    assert isinstance(read, TextResourceContents) and read.text.startswith("line 1\n")
    awkward = next(r for r in listed.resources if r.name == "awkward.txt")
    raw = (await client.read_resource(awkward.uri)).contents[0]  # NUL and bad bytes: a blob
    assert isinstance(raw, BlobResourceContents) and base64.b64decode(raw.blob) == AWKWARD
    with pytest.raises(MCPError, match="symlink"):
        await client.read_resource(awkward.uri.replace("awkward.txt", "escape.txt"))
    prompts = [p.name for p in (await client.list_prompts()).prompts]
    assert "writing-wakeful-tools" in prompts
    assert client.server_capabilities is not None
    assert client.server_capabilities.completions is not None


@pytest.mark.anyio
async def test_over_stdio_in_a_subprocess(root: Path) -> None:
    command, *args = serve_command(root)
    with anyio.fail_after(15):
        async with Client(StdioServerParameters(command=command, args=args)) as client:
            await exercise(client)


@pytest.mark.anyio
async def test_logging_set_level_over_stdio_on_a_handshake_era_connection(root: Path) -> None:
    command, *args = serve_command(root)
    with anyio.fail_after(15):
        params = StdioServerParameters(command=command, args=args)
        async with Client(params, mode="legacy") as client:
            assert client.server_capabilities is not None
            assert client.server_capabilities.logging is not None
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # logging is deprecated in the 2026 protocol
                await client.set_logging_level("debug")
            assert (await client.list_resources()).resources


@pytest.fixture
def http_server(root: Path) -> Iterator[str]:
    with mcp_server_over_http(serve_command(root)) as url:
        yield url


@pytest.mark.anyio
async def test_over_streamable_http(http_server: str) -> None:
    with anyio.fail_after(15):
        async with Client(http_server) as client:
            await exercise(client)


# --- the command line ---------------------------------------------------------------------------


runner = CliRunner()


def test_a_missing_root_exits_1_with_a_clear_message(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    result = runner.invoke(mcp_app, ["serve", "perception", "--root", str(missing)])
    assert result.exit_code == 1
    assert "does not exist" in result.output and "--root" in result.output


def test_a_file_as_root_exits_1(tmp_path: Path) -> None:
    file = tmp_path / "file.txt"
    file.write_text("x")
    result = runner.invoke(mcp_app, ["serve", "perception", "--root", str(file)])
    assert result.exit_code == 1
    assert "is a file, not a directory" in result.output


@pytest.mark.parametrize(
    "bad", ["8080", "localhost", "127.0.0.1:", "127.0.0.1:99999", ":80", "h:x"]
)
def test_a_bad_http_address_is_a_usage_error(tmp_path: Path, bad: str) -> None:
    result = runner.invoke(mcp_app, ["serve", "perception", "--root", str(tmp_path), "--http", bad])
    assert result.exit_code == 2
    assert "HOST:PORT" in result.output


def test_http_addresses_parse() -> None:
    assert parse_http_address("127.0.0.1:8765") == ("127.0.0.1", 8765)
    assert parse_http_address("[::1]:80") == ("::1", 80)
    assert parse_http_address(None) is None
