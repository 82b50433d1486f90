"""The perception server's MCP server features through the official client: resources (and
their confinement), prompts (the built-in skills), logging and completions."""

from __future__ import annotations

import base64
import logging
import os
import warnings
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from mcp import Client
from wakeful.mcp import resources as resources_module
from wakeful.mcp.resources import MAX_RESOURCE_BYTES, RESOURCE_NOT_FOUND, FileResources
from wakeful.toolkits.perception.server import perception_server

pytestmark = pytest.mark.anyio


@pytest.fixture
def root(tmp_path: Path) -> Path:
    tree = tmp_path / "root"
    (tree / "docs").mkdir(parents=True)
    (tree / "docs" / "guide.md").write_text("# Guide\n", encoding="utf-8")
    (tree / "notes.txt").write_text("hello\n", encoding="utf-8")
    (tree / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    (tree / ".git").mkdir()
    (tree / ".git" / "config").write_text("[core]\n", encoding="utf-8")
    (tree / ".wakeful").mkdir()
    (tree / ".wakeful" / "store.db").write_bytes(b"secret")
    (tree / "wakeful.toml").write_text("[mcp]\n", encoding="utf-8")
    (tree / "etc-link").symlink_to("/etc/hostname")
    (tree / "inside-link").symlink_to("notes.txt")
    (tmp_path / "outside.txt").write_text("outside\n", encoding="utf-8")
    return tree


@pytest.fixture
async def client(root: Path) -> AsyncIterator[Client]:
    async with Client(perception_server(root)) as connected:
        yield connected


def prefix(root: Path) -> str:
    return FileResources(root.resolve()).prefix


def uri(root: Path, relative: str) -> str:
    return FileResources(root.resolve()).uri(relative)


async def refused(client: Client, address: str) -> MCPError:
    with pytest.raises(MCPError) as caught:
        await client.read_resource(address)
    return caught.value


# --- resources: escapes first -------------------------------------------------------------------


async def test_dot_dot_out_of_the_root_is_refused(client: Client, root: Path) -> None:
    error = await refused(client, prefix(root) + "../outside.txt")
    assert error.error.code == INVALID_PARAMS
    assert "outside the root" in error.error.message


async def test_percent_encoded_dot_dot_is_refused(client: Client, root: Path) -> None:
    error = await refused(client, prefix(root) + "%2e%2e/outside.txt")
    assert error.error.code == INVALID_PARAMS
    assert "outside.txt" in error.error.message
    double = await refused(client, prefix(root) + "%252e%252e/outside.txt")
    assert double.error.code == INVALID_PARAMS


async def test_an_absolute_path_elsewhere_is_refused(client: Client) -> None:
    error = await refused(client, "file:///etc/passwd")
    assert error.error.code == INVALID_PARAMS
    assert "outside the root" in error.error.message


async def test_a_symlink_to_etc_is_refused(client: Client, root: Path) -> None:
    error = await refused(client, uri(root, "etc-link"))
    assert "symlink" in error.error.message


async def test_a_symlink_inside_the_root_is_read(client: Client, root: Path) -> None:
    result = await client.read_resource(uri(root, "inside-link"))
    assert isinstance(result.contents[0], types.TextResourceContents)
    assert result.contents[0].text == "hello\n"


@pytest.mark.parametrize("relative", [".git/config", ".wakeful/store.db", "wakeful.toml"])
async def test_protected_paths_are_refused(client: Client, root: Path, relative: str) -> None:
    error = await refused(client, uri(root, relative))
    assert error.error.code == INVALID_PARAMS
    assert "protected" in error.error.message


def make_sparse(path: Path, size: int) -> None:
    with path.open("wb") as file:
        file.truncate(size)


async def test_a_huge_file_is_refused_with_the_way_to_read_it(client: Client, root: Path) -> None:
    make_sparse(root / "huge.log", 10 * 1024**3)  # 10 GiB, sparse: nothing is written
    error = await refused(client, uri(root, "huge.log"))
    assert f"more than the {MAX_RESOURCE_BYTES} bytes" in error.error.message
    assert "read_file" in error.error.message
    just_fits = await client.read_resource(uri(root, "notes.txt"))
    assert just_fits.contents


async def test_unknown_and_missing_resources(client: Client, root: Path) -> None:
    unknown = await refused(client, "wakeful://nothing")
    assert unknown.error.code == RESOURCE_NOT_FOUND
    missing = await refused(client, uri(root, "nope.txt"))
    assert missing.error.code == RESOURCE_NOT_FOUND
    directory = await refused(client, uri(root, "docs"))
    assert "not a regular file" in directory.error.message


# --- resources: listing and reading -------------------------------------------------------------


async def test_listing_leaves_out_protected_paths_and_symlinks(client: Client, root: Path) -> None:
    listed = await client.list_resources()
    assert [r.name for r in listed.resources] == ["docs/guide.md", "image.png", "notes.txt"]
    assert listed.next_cursor is None
    by_name = {r.name: r for r in listed.resources}
    assert by_name["notes.txt"].uri == uri(root, "notes.txt")
    assert by_name["notes.txt"].mime_type == "text/plain"
    assert by_name["image.png"].mime_type == "image/png"
    assert by_name["notes.txt"].size == 6


async def test_listing_comes_in_pages(
    client: Client, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(resources_module, "PAGE_SIZE", 2)
    first = await client.list_resources(cache_mode="refresh")
    assert [r.name for r in first.resources] == ["docs/guide.md", "image.png"]
    assert first.next_cursor is not None
    second = await client.list_resources(cursor=first.next_cursor, cache_mode="refresh")
    assert [r.name for r in second.resources] == ["notes.txt"]
    assert second.next_cursor is None
    with pytest.raises(MCPError) as bad:
        await client.list_resources(cursor="not-a-cursor", cache_mode="refresh")
    assert bad.value.error.code == INVALID_PARAMS


async def test_text_comes_as_text_and_binary_as_a_blob(client: Client, root: Path) -> None:
    text = (await client.read_resource(uri(root, "docs/guide.md"))).contents[0]
    assert isinstance(text, types.TextResourceContents)
    assert text.text == "# Guide\n" and text.mime_type == "text/markdown"
    blob = (await client.read_resource(uri(root, "image.png"))).contents[0]
    assert isinstance(blob, types.BlobResourceContents)
    assert base64.b64decode(blob.blob) == b"\x89PNG\r\n\x1a\n\x00\x00"
    assert blob.mime_type == "image/png"


async def test_a_name_with_spaces_round_trips(client: Client, root: Path) -> None:
    (root / "two words.txt").write_text("x", encoding="utf-8")
    listed = await client.list_resources(cache_mode="refresh")
    spaced = next(r for r in listed.resources if r.name == "two words.txt")
    assert "%20" in spaced.uri
    read = (await client.read_resource(spaced.uri)).contents[0]
    assert isinstance(read, types.TextResourceContents) and read.text == "x"


async def test_capabilities_declare_no_subscribe_nor_list_changed(client: Client) -> None:
    capabilities = client.server_capabilities
    assert capabilities is not None and capabilities.resources is not None
    assert not capabilities.resources.subscribe
    assert not capabilities.resources.list_changed
    assert capabilities.prompts is not None and capabilities.completions is not None


async def test_the_template_names_any_file(client: Client, root: Path) -> None:
    templates = (await client.list_resource_templates()).resource_templates
    assert [t.uri_template for t in templates] == [prefix(root) + "{+path}"]


# --- prompts ------------------------------------------------------------------------------------


async def test_built_in_skills_are_prompts(client: Client) -> None:
    prompts = (await client.list_prompts()).prompts
    names = [p.name for p in prompts]
    assert "writing-wakeful-tools" in names
    assert all(p.description and not p.arguments for p in prompts)
    got = await client.get_prompt("writing-wakeful-tools")
    message = got.messages[0]
    assert message.role == "user" and isinstance(message.content, types.TextContent)
    assert not message.content.text.startswith("---")
    assert "tool" in message.content.text


async def test_an_unknown_prompt_is_a_protocol_error(client: Client) -> None:
    with pytest.raises(MCPError) as caught:
        await client.get_prompt("no-such-skill")
    assert caught.value.error.code == INVALID_PARAMS
    assert "writing-wakeful-tools" in caught.value.error.message


# --- completions --------------------------------------------------------------------------------


def template_ref(root: Path) -> types.ResourceTemplateReference:
    return types.ResourceTemplateReference(type="ref/resource", uri=prefix(root) + "{+path}")


async def test_paths_complete_under_the_root(client: Client, root: Path) -> None:
    top = await client.complete(template_ref(root), {"name": "path", "value": ""})
    assert top.completion.values == ["docs/", "etc-link", "image.png", "inside-link", "notes.txt"]
    assert top.completion.has_more is False
    inside = await client.complete(template_ref(root), {"name": "path", "value": "docs/g"})
    assert inside.completion.values == ["docs/guide.md"]


async def test_completion_stops_at_the_root_and_at_100(client: Client, root: Path) -> None:
    outside = await client.complete(template_ref(root), {"name": "path", "value": "../"})
    assert outside.completion.values == []
    many = root / "many"
    many.mkdir()
    for number in range(120):
        (many / f"f{number:03}").write_text("", encoding="utf-8")
    listed = await client.complete(template_ref(root), {"name": "path", "value": "many/f"})
    assert len(listed.completion.values) == 100
    assert listed.completion.has_more is True and listed.completion.total == 120


async def test_completion_of_an_unknown_argument_or_template(client: Client, root: Path) -> None:
    with pytest.raises(MCPError) as argument:
        await client.complete(template_ref(root), {"name": "nope", "value": ""})
    assert argument.value.error.code == INVALID_PARAMS
    other = types.ResourceTemplateReference(type="ref/resource", uri="file:///{+x}")
    with pytest.raises(MCPError) as template:
        await client.complete(other, {"name": "path", "value": ""})
    assert template.value.error.code == INVALID_PARAMS


# --- logging ------------------------------------------------------------------------------------


async def test_set_level_sends_records_at_or_above_it(root: Path) -> None:
    received: list[types.LoggingMessageNotificationParams] = []
    both = anyio.Event()

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        received.append(params)
        if len(received) == 2:
            both.set()

    logger = logging.getLogger("wakeful.test_server_features")
    before = logging.getLogger("wakeful").level
    server = perception_server(root)
    async with Client(server, logging_callback=on_log, mode="legacy") as client:
        assert client.server_capabilities is not None
        assert client.server_capabilities.logging is not None
        logger.warning("before any setLevel")  # nothing is sent yet
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # logging is deprecated in the 2026 protocol
            await client.set_logging_level("info")
        logger.debug("below the level")
        logger.info("at the level %d", 1)
        logger.error("above it")
        with anyio.fail_after(5):
            await both.wait()
    assert [(r.level, r.logger, r.data) for r in received] == [
        ("info", "wakeful.test_server_features", "at the level 1"),
        ("error", "wakeful.test_server_features", "above it"),
    ]
    assert logging.getLogger("wakeful").level == before  # restored when the connection closed


async def test_set_level_with_a_bad_level_is_invalid_params(root: Path) -> None:
    async with Client(perception_server(root), mode="legacy") as client:
        with pytest.raises(MCPError) as caught:
            await client.session._dispatcher.send_raw_request(  # the client itself refuses it
                "logging/setLevel", {"level": "loud"}, None
            )
    assert caught.value.error.code == INVALID_PARAMS


def test_the_listing_leaves_out_fifos(root: Path) -> None:
    os.mkfifo(root / "pipe")
    files, more = FileResources(root.resolve())._files(0)
    assert [str(path) for path, _ in files] == ["docs/guide.md", "image.png", "notes.txt"]
    assert more is False
