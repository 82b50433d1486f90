"""knowledge_base_search over a real folder: ranking, paging, and an index that follows changes."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tool_services import tool_services
from wakeful.errors import ToolError
from wakeful.services import Services
from wakeful.toolkits.perception.cursors import make_cursor
from wakeful.toolkits.perception.knowledge import (
    KNOWLEDGE_TOOLS,
    KnowledgeSettings,
    knowledge_base_search,
    tokenize,
)
from wakeful.tools.lint import lint_tool
from wakeful.tools.spec import ToolContext, ToolResult


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    kb = root / "kb"
    kb.mkdir(parents=True)
    filler = "".join(f"unrelated filler line {i}\n" for i in range(40))
    (kb / "keys.md").write_text(
        filler + "To rotate the API keys, run `rotateApiKeys` weekly.\nKeys live in vault.\n"
    )
    (kb / "deploy.md").write_text("# 部署流程\n先构建镜像，然后部署到生产环境。\n")
    (kb / "misc.txt").write_text("Lunch is at noon.\n")
    (kb / "code.py").write_text("rotate api keys here too\n")  # not an indexed extension
    (root / "outside.md").write_text("rotate api keys outside the folder\n")
    return root


@pytest.fixture
async def services(root: Path) -> AsyncIterator[Services]:
    async with tool_services(root) as (services, _events):
        services.settings[KnowledgeSettings] = KnowledgeSettings(folder="kb")
        yield services


async def search(services: Services, **arguments: Any) -> ToolResult:
    ctx = ToolContext("main", "call_1", "knowledge_base_search", services)
    return await knowledge_base_search.run(arguments, ctx)


def paths(result: ToolResult) -> list[str]:
    return [hit["path"] for hit in result.structured["results"]]


def test_the_description_meets_the_standard() -> None:
    assert (knowledge_base_search,) == KNOWLEDGE_TOOLS
    assert lint_tool(knowledge_base_search) == []


def test_tokens_split_identifiers_and_cjk() -> None:
    assert tokenize("parseHTTPResponse") == ["parsehttpresponse", "parse", "http", "response"]
    assert tokenize("max_file_bytes") == ["max_file_bytes", "max", "file", "bytes"]
    assert tokenize("部署流程!") == ["部", "署", "流", "程", "部署", "署流", "流程"]
    assert tokenize("--- ") == []


@pytest.mark.anyio
async def test_english_query_finds_the_passage_with_its_lines(services: Services) -> None:
    result = await search(services, query="rotate api keys")
    assert paths(result) == ["kb/keys.md"]
    hit = result.structured["results"][0]
    assert (hit["start_line"], hit["end_line"]) == (31, 42)
    assert "41\tTo rotate the API keys" in hit["snippet"]
    assert hit["score"] > 0
    assert result.content.startswith("1 passage for 'rotate api keys' in 'kb' (1–1 of 1)")


@pytest.mark.anyio
async def test_chinese_query_and_identifier_parts_match(services: Services) -> None:
    result = await search(services, query="部署")
    assert paths(result) == ["kb/deploy.md"]
    result = await search(services, query="rotate_api")
    assert paths(result) == ["kb/keys.md"]


@pytest.mark.anyio
async def test_no_match_and_bad_queries(services: Services) -> None:
    result = await search(services, query="zebra")
    assert result.structured == {"results": [], "total": 0, "next_cursor": None}
    assert result.content.startswith("No passage in 'kb' matches 'zebra'")
    with pytest.raises(ToolError, match="blank"):
        await search(services, query="   ")
    with pytest.raises(ToolError, match="no words or characters"):
        await search(services, query="?!")
    with pytest.raises(ToolError):
        await search(services, query="")
    with pytest.raises(ToolError):
        await search(services, query="keys", limit=0)
    with pytest.raises(ToolError, match="is not a cursor knowledge_base_search gave"):
        await search(services, query="keys", cursor="garbage!")
    with pytest.raises(ToolError, match="points past the last"):
        other = await search(services, query="keys")
        assert other.structured["total"] == 1
        digest_cursor = make_cursor(_digest("keys"), 5)
        await search(services, query="keys", cursor=digest_cursor)


def _digest(query: str) -> str:
    from wakeful.toolkits.perception.cursors import query_digest

    return query_digest("knowledge_base_search", query=query, folder="kb")


@pytest.mark.anyio
async def test_cursor_pages_through_hits(services: Services, root: Path) -> None:
    for i in range(3):
        (root / "kb" / f"lunch{i}.md").write_text(f"lunch menu {i}\n")
    first = await search(services, query="lunch", limit=2)
    assert first.structured["total"] == 4
    cursor = first.structured["next_cursor"]
    assert cursor and f"cursor={cursor!r}" in first.content
    second = await search(services, query="lunch", limit=2, cursor=cursor)
    assert second.structured["next_cursor"] is None
    assert set(paths(first)).isdisjoint(paths(second))


@pytest.mark.anyio
async def test_the_index_follows_changes_and_deletions(services: Services, root: Path) -> None:
    assert (await search(services, query="lunch")).structured["total"] == 1
    misc = root / "kb" / "misc.txt"
    misc.write_text("Dinner is at eight.\n")
    stat = misc.stat()
    os.utime(misc, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert (await search(services, query="lunch")).structured["total"] == 0
    assert paths(await search(services, query="dinner")) == ["kb/misc.txt"]
    misc.unlink()
    assert (await search(services, query="dinner")).structured["total"] == 0
    (root / "kb" / "new.md").write_text("dinner plans\n")
    assert paths(await search(services, query="dinner")) == ["kb/new.md"]


@pytest.mark.anyio
async def test_a_folder_outside_the_root_is_refused(services: Services) -> None:
    services.settings[KnowledgeSettings] = KnowledgeSettings(folder="../")
    with pytest.raises(ToolError, match="leads outside the root"):
        await search(services, query="keys")
