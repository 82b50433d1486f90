"""`wakeful tools search` through typer's CliRunner on an app built with `register`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner, Result

from toolsets_data import TOOLSETS, needs_toolsets
from wakeful.cli.tools_search import register

DATA = TOOLSETS

CATALOG = {
    "name": "tiny",
    "servers": [
        {
            "name": "finance",
            "description": "Stock market data.",
            "tools": [
                {"name": "get_stock_price", "description": "Current price of a stock symbol."},
                {"name": "get_company_news", "description": "News about a company."},
            ],
        },
        {
            "name": "weather",
            "description": "Forecasts.",
            "tools": [{"name": "get_forecast", "description": "Weather forecast for a city."}],
        },
    ],
}


def run(*args: str) -> Result:
    app = typer.Typer()

    @app.callback()
    def root() -> None:
        """The test's stand-in for `wakeful tools`."""

    register(app)
    return CliRunner().invoke(app, ["search", *args], env={"COLUMNS": "200"})


@pytest.fixture
def catalog(tmp_path: Path) -> Path:
    folder = tmp_path / "tiny"
    folder.mkdir()
    (folder / "catalog.json").write_text(json.dumps(CATALOG), encoding="utf-8")
    return folder


def write_queries(path: Path, *lines: str) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_queries_json_lines_in_input_order(catalog: Path, tmp_path: Path) -> None:
    queries = write_queries(
        tmp_path / "q.jsonl",
        '{"id": "w", "query": "weather forecast for Paris", "expected": []}',
        '{"id": 2, "query": "stock price of Apple"}',
        '{"id": "none", "query": "bake a chocolate cake"}',
    )
    result = run("--catalog", str(catalog), "--queries", str(queries), "--k", "2", "--json")
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [line["id"] for line in lines] == ["w", 2, "none"]
    assert lines[0]["results"][0] == {
        "server": "weather",
        "tool": "get_forecast",
        "score": pytest.approx(lines[0]["results"][0]["score"]),
    }
    assert isinstance(lines[0]["results"][0]["score"], float)
    assert lines[1]["results"][0]["tool"] == "get_stock_price"
    assert all(len(line["results"]) <= 2 for line in lines)
    scores = [r["score"] for r in lines[1]["results"]]
    assert scores == sorted(scores, reverse=True)
    assert lines[0]["found"] is True  # always there, true or false
    assert lines[2]["found"] is False


def test_a_batch_judges_each_query_exactly_as_a_single_need(catalog: Path, tmp_path: Path) -> None:
    needs = [
        "weather forecast for Paris",
        "stock price of Apple",
        "bake a chocolate cake",
        "news",
        "turn off the lights",
    ]
    queries = write_queries(
        tmp_path / "q.jsonl", *(json.dumps({"id": i, "query": n}) for i, n in enumerate(needs))
    )
    batch = run("--catalog", str(catalog), "--queries", str(queries), "--k", "3", "--json")
    assert batch.exit_code == 0, batch.output
    for line, need in zip(batch.stdout.splitlines(), needs, strict=True):
        single = json.loads(run("--catalog", str(catalog), "--k", "3", "--json", need).stdout)
        judged = json.loads(line)
        assert judged["found"] is single["found"], need
        if single["found"]:
            assert judged["results"][: len(single["results"])] == single["results"]


def test_table_cells_show_the_description_on_one_line(tmp_path: Path) -> None:
    folder = tmp_path / "indented"
    folder.mkdir()
    described = {
        "name": "indented",
        "servers": [
            {
                "name": "finance",
                "description": "Stock market data.",
                "tools": [
                    {
                        "name": "get_stock_price",
                        "description": "Current price\n        of a stock   symbol.\n\n    Args: x",
                    }
                ],
            }
        ],
    }
    (folder / "catalog.json").write_text(json.dumps(described), encoding="utf-8")
    result = run("--catalog", str(folder), "current stock price")
    assert result.exit_code == 0, result.output
    assert "Current price of a stock symbol. Args: x" in result.stdout


def test_catalog_file_path_and_default_k(catalog: Path, tmp_path: Path) -> None:
    many = write_queries(
        tmp_path / "q.jsonl", '{"id": "a", "query": "get stock price news forecast"}'
    )
    result = run("--catalog", str(catalog / "catalog.json"), "--queries", str(many), "--json")
    assert result.exit_code == 0, result.output
    assert len(json.loads(result.stdout)["results"]) == 3  # all three tools match, k=10


@needs_toolsets
def test_dev_set_queries_run(tmp_path: Path) -> None:
    source = DATA / "livemcpbench" / "queries.jsonl"
    subset = write_queries(tmp_path / "q.jsonl", *source.read_text().splitlines()[:5])
    result = run("--catalog", str(DATA / "livemcpbench"), "--queries", str(subset), "--json")
    assert result.exit_code == 0, result.output
    assert len(result.stdout.splitlines()) == 5


def test_need_prints_a_table(catalog: Path) -> None:
    result = run("--catalog", str(catalog), "current stock price")
    assert result.exit_code == 0, result.output
    assert "get_stock_price" in result.stdout
    assert "finance" in result.stdout


def test_need_below_threshold_prints_no_tool_found(catalog: Path) -> None:
    result = run("--catalog", str(catalog), "bake a chocolate cake")
    assert result.exit_code == 0, result.output
    assert "No tool found" in result.stdout
    assert "code_interpreter" in result.stdout


def test_need_as_json(catalog: Path) -> None:
    result = run("--catalog", str(catalog), "--json", "weather forecast")
    payload = json.loads(result.stdout)
    assert payload["found"] is True
    assert payload["results"][0]["tool"] == "get_forecast"
    assert payload["advice"] is None


def test_index_file_is_saved_then_used_without_the_catalog(catalog: Path, tmp_path: Path) -> None:
    index = tmp_path / "tools.idx"
    first = run("--catalog", str(catalog), "--index", str(index), "--json", "stock price")
    assert first.exit_code == 0, first.output
    assert index.is_file()
    second = run("--index", str(index), "--json", "stock price")
    assert second.exit_code == 0, second.output
    assert json.loads(second.stdout) == json.loads(first.stdout)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--catalog", "/nonexistent/catalog", "x"), "does not exist"),
        (("x",), "Give --catalog PATH"),
        (("--catalog", "CATALOG", "--k", "0", "x"), "--k must be a positive"),
        (("--catalog", "CATALOG"), "Give either a need"),
        (("--catalog", "CATALOG", "--queries", "QUERIES", "x"), "not both"),
        (("--catalog", "CATALOG", "--queries", "BAD_QUERIES"), "line 2 of"),
        (("--catalog", "BAD_CATALOG", "x"), "not valid UTF-8 JSON"),
        (("--index", "BAD_INDEX", "x"), "corrupt"),
        (("--catalog", "CATALOG", "--embeddings", "NO_MODEL", "x"), "Cannot read the tokenizer"),
        (("--catalog", "CATALOG", "--torch", "x"), "give --embeddings MODEL_FOLDER"),
    ],
)
def test_bad_input_exits_1_with_a_message(
    catalog: Path, tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    bad_catalog = tmp_path / "bad.json"
    bad_catalog.write_text("{nope", encoding="utf-8")
    queries = write_queries(tmp_path / "q.jsonl", '{"id": 1, "query": "x"}')
    bad_queries = write_queries(tmp_path / "bad.jsonl", '{"id": 1, "query": "x"}', "{oops")
    bad_index = tmp_path / "bad.idx"
    bad_index.write_bytes(b"junk")
    names = {
        "CATALOG": str(catalog),
        "QUERIES": str(queries),
        "BAD_QUERIES": str(bad_queries),
        "BAD_CATALOG": str(bad_catalog),
        "BAD_INDEX": str(bad_index),
        "NO_MODEL": str(tmp_path / "no-model"),
    }
    result = run(*(names.get(a, a) for a in args))
    assert result.exit_code == 1
    assert message in " ".join(result.stderr.split())
    assert "Traceback" not in result.output
