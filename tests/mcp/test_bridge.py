"""Our Tool objects served over MCP through the in-memory client: listing, calls, errors."""

from __future__ import annotations

import json
import re
from typing import Annotated, Any

import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS
from pydantic import Field

from mcp import Client
from wakeful.errors import ToolError, UserError
from wakeful.mcp.bridge import build_server
from wakeful.tools.spec import ToolAnnotations, ToolContext, ToolResult, tool


@tool(
    annotations=ToolAnnotations(read_only=True, idempotent=True),
    examples=({"n": 2}, {"n": 5, "label": "five"}),
)
async def square(
    n: Annotated[int, Field(ge=0, le=1000, description="A number, e.g. 4.")],
    label: Annotated[str, Field(description="A name for it, e.g. 'four'.")] = "",
) -> dict[str, Any]:
    """Square a number."""
    if n == 13:
        raise ToolError("13 is unlucky: pass another number.")
    return {"n": n, "square": n * n, "label": label}


@tool(annotations=ToolAnnotations(destructive=True, open_world=True))
async def where(ctx: ToolContext) -> str:
    """Say which session and tool this is."""
    return f"{ctx.session} {ctx.tool_name} {ctx.services.workdir}"


@tool
async def listing() -> list[int]:
    """A list result."""
    return [1, 2, 3]


@tool
async def plain() -> ToolResult:
    """A plain text result."""
    return ToolResult("just text")


@tool
async def broken() -> str:
    """Always fails with a bug."""
    raise RuntimeError("bug inside")


SERVER = build_server(
    "test-bridge", [square, where, listing, plain, broken], instructions="For tests."
)


@pytest.mark.anyio
async def test_tools_are_listed_with_schema_annotations_and_examples() -> None:
    async with Client(SERVER) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
    assert list(listed) == ["square", "where", "listing", "plain", "broken"]
    sq = listed["square"]
    assert sq.input_schema == square.spec.input_schema
    assert sq.description is not None
    description, examples = sq.description.split("\n\nExamples:\n")
    assert description == "Square a number."
    assert [json.loads(line) for line in examples.splitlines()] == [
        {"n": 2},
        {"n": 5, "label": "five"},
    ]
    assert sq.annotations is not None
    assert sq.annotations.read_only_hint is True
    assert sq.annotations.idempotent_hint is True
    assert sq.annotations.destructive_hint is False
    assert sq.annotations.open_world_hint is False
    wh = listed["where"]
    assert wh.description == "Say which session and tool this is."
    assert wh.annotations is not None
    assert wh.annotations.destructive_hint is True
    assert wh.annotations.open_world_hint is True
    assert wh.annotations.read_only_hint is False


@pytest.mark.anyio
async def test_a_call_returns_text_and_structured_content() -> None:
    async with Client(SERVER) as client:
        result = await client.call_tool("square", {"n": 3, "label": "three"})
        listed = await client.call_tool("listing", {})
        text_only = await client.call_tool("plain", {})
        context = await client.call_tool("where", {})
    assert result.is_error is False
    assert result.structured_content == {"n": 3, "square": 9, "label": "three"}
    assert json.loads(_text(result)) == {"n": 3, "square": 9, "label": "three"}
    assert listed.structured_content == {"result": [1, 2, 3]}
    assert text_only.structured_content is None
    assert _text(text_only) == "just text"
    # Each connection is a session of its own: JSON-RPC ids restart with every connection.
    assert re.fullmatch(r"mcp:test-bridge:c[0-9a-f]{8} where None", _text(context))


@pytest.mark.anyio
async def test_errors_become_error_results_with_our_messages() -> None:
    async with Client(SERVER) as client:
        unlucky = await client.call_tool("square", {"n": 13})
        wrong_type = await client.call_tool("square", {"n": "many"})
        missing = await client.call_tool("square", {})
        extra = await client.call_tool("square", {"n": 1, "colour": "red"})
        too_big = await client.call_tool("square", {"n": 10**12})
        with pytest.raises(MCPError) as unknown:  # a protocol error, per the specification
            await client.call_tool("cube", {"n": 1})
        bug = await client.call_tool("broken", {})
    assert unlucky.is_error and _text(unlucky) == "13 is unlucky: pass another number."
    assert wrong_type.is_error and "field `n`" in _text(wrong_type)
    assert missing.is_error and "field `n` is required" in _text(missing)
    assert extra.is_error and "`colour` is not a parameter" in _text(extra)
    assert too_big.is_error and "less than or equal to 1000" in _text(too_big)
    assert unknown.value.code == INVALID_PARAMS
    assert "Unknown tool 'cube'" in unknown.value.message and "square" in unknown.value.message
    assert bug.is_error and "RuntimeError: bug inside" in _text(bug)


def test_two_tools_with_one_name_are_refused() -> None:
    with pytest.raises(UserError, match="already registered"):
        build_server("dup", [square, square])


def _text(result: Any) -> str:
    (block,) = result.content
    text: str = block.text
    return text


@pytest.mark.anyio
async def test_server_info_names_the_wakeful_version() -> None:
    from importlib import metadata

    async with Client(SERVER) as client:
        info = client.server_info
    assert info is not None and info.version == metadata.version("wakeful")


@tool
async def split_emoji() -> ToolResult:
    """Text with half of an emoji's UTF-16 pair, as a tool that decoded bytes badly returns."""
    return ToolResult("half \ud83d here", structured={"text": "half \ud83d"})


@pytest.mark.anyio
async def test_a_result_with_a_lone_surrogate_still_reaches_the_client() -> None:
    # No JSON encoder can send a lone surrogate: the reply failed as a whole before.
    async with Client(build_server("test-surrogates", [split_emoji])) as client:
        result = await client.call_tool("split_emoji", {})
    assert result.is_error is False
    assert _text(result) == "half \ufffd here"
    assert result.structured_content == {"text": "half \ufffd"}
