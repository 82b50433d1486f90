"""Loading catalogs and labelled queries, and the errors bad files get."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolsets_data import TOOLSETS, needs_toolsets
from wakeful.discovery import Catalog, CatalogServer, CatalogTool, load_queries
from wakeful.errors import UserError

DATA = TOOLSETS

CATALOG = {
    "name": "tiny",
    "source": "tests",
    "servers": [
        {
            "name": "finance",
            "description": "Stock prices and company data.",
            "tools": [
                {
                    "name": "get_stock_price",
                    "description": "Get the current price of a stock symbol.",
                    "inputSchema": {"type": "object", "properties": {"symbol": {"type": "string"}}},
                },
                {"name": "get_news", "description": "Company news.", "inputSchema": {}},
            ],
        },
        {"name": "empty", "description": "No tools yet.", "tools": []},
    ],
}


def write(path: Path, data: object) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_load_from_a_folder_or_the_file(tmp_path: Path) -> None:
    write(tmp_path / "catalog.json", CATALOG)
    for source in (tmp_path, tmp_path / "catalog.json"):
        catalog = Catalog.load(source)
        assert list(catalog.servers) == ["finance", "empty"]
        assert len(catalog) == 2
        tool = catalog.tool("finance", "get_stock_price")
        assert tool is not None
        assert tool.server == "finance"
        assert tool.input_schema["properties"] == {"symbol": {"type": "string"}}
        assert tool.annotations == {}
        assert catalog.tool("finance", "nope") is None
        assert catalog.tool("nope", "get_news") is None
        assert [t.name for t in catalog.tools()] == ["get_stock_price", "get_news"]


def test_from_servers_keeps_order_and_the_later_duplicate() -> None:
    a1 = CatalogServer("a", "first", ())
    b = CatalogServer("b", "", (CatalogTool("b", "t", "", {}),))
    a2 = CatalogServer("a", "second", ())
    catalog = Catalog.from_servers([a1, b, a2])
    assert list(catalog.servers) == ["a", "b"]
    assert catalog.servers["a"].description == "second"
    assert len(catalog) == 1


@needs_toolsets
@pytest.mark.parametrize("name", ["metatool", "livemcpbench"])
def test_the_development_sets_load(name: str) -> None:
    catalog = Catalog.load(DATA / name)
    queries = load_queries(DATA / name / "queries.jsonl")
    assert len(catalog) > 100
    assert queries
    for query in queries[:50]:
        for server, tool in query.expected:
            assert catalog.tool(server, tool) is not None


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not valid UTF-8 JSON"),
        ("[]", 'must be a JSON object with a "servers" list'),
        ('{"servers": [3]}', "server #1"),
        ('{"servers": [{"description": "x"}]}', 'non-empty string "name"'),
        ('{"servers": [{"name": "s", "tools": {}}]}', "\"tools\" of the server 's'"),
        ('{"servers": [{"name": "s", "tools": [{"name": ""}]}]}', "tool #1 of the server"),
        (
            '{"servers": [{"name": "s", "tools": [{"name": "t", "inputSchema": []}]}]}',
            "\"inputSchema\" of the tool 't'",
        ),
    ],
)
def test_bad_catalogs_name_file_and_problem(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(UserError, match=r"bad\.json") as caught:
        Catalog.load(path)
    assert message in str(caught.value)


def test_missing_catalog_and_folder_without_one(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="does not exist"):
        Catalog.load(tmp_path / "nope.json")
    with pytest.raises(UserError, match=r"holds no catalog\.json"):
        Catalog.load(tmp_path)


def test_load_queries(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text(
        '{"id": "a", "query": "price", "expected": [{"server": "s", "tool": "t"}]}\n'
        "\n"
        '{"id": 7, "query": "none known"}\n',
        encoding="utf-8",
    )
    first, second = load_queries(path)
    assert (first.id, first.query, first.expected) == ("a", "price", (("s", "t"),))
    assert (second.id, second.expected) == (7, ())


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{oops", "not valid JSON"),
        ("[1]", "not a JSON object"),
        ('{"id": "a", "query": ""}', 'non-empty string "query"'),
        ('{"query": "x"}', 'needs an "id"'),
        ('{"id": "a", "query": "x", "expected": {"server": "s"}}', "must be a list"),
        ('{"id": "a", "query": "x", "expected": [{"server": "s"}]}', 'string "server"'),
    ],
)
def test_bad_query_lines_name_the_line(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text('{"id": "ok", "query": "fine"}\n' + line + "\n", encoding="utf-8")
    with pytest.raises(UserError, match="line 2 of") as caught:
        load_queries(path)
    assert message in str(caught.value)


def test_missing_queries_file(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="Cannot read the queries file"):
        load_queries(tmp_path / "nope.jsonl")
