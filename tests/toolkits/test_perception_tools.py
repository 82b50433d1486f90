"""The perception server's file tools, called through the in-memory MCP client."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from perception_tree import AWKWARD, make_tree, text_of

from mcp import Client
from wakeful.toolkits.perception.server import FILE_TOOLS, PERCEPTION_TOOLS, perception_server


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return make_tree(tmp_path)


@pytest.fixture
async def client(root: Path) -> AsyncIterator[Client]:
    async with Client(perception_server(root)) as connected:
        yield connected


async def call(client: Client, name: str, **arguments: Any) -> tuple[str, Any, bool]:
    result = await client.call_tool(name, arguments)
    return text_of(result), result.structured_content, bool(result.is_error)


def numbered_lines(text: str) -> list[tuple[int, str]]:
    """The numbered lines of a read_file result: between the header and the first blank line."""
    body = text.split("\n")[1:]
    rows = []
    for line in body:
        if not line:
            break
        number, content = line.split("\t", 1)
        rows.append((int(number), content))
    return rows


# --- listing -----------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_the_server_lists_every_perception_tool_with_examples(client: Client) -> None:
    listed = (await client.list_tools()).tools
    assert [t.name for t in listed] == [t.name for t in PERCEPTION_TOOLS]
    assert [t.name for t in listed][:4] == [t.name for t in FILE_TOOLS]
    for t in listed:
        assert t.description is not None and "\n\nExamples:\n" in t.description
        assert t.annotations is not None and t.annotations.read_only_hint is True


def test_descriptions_meet_the_standard() -> None:
    for t in FILE_TOOLS:
        text = t.spec.description
        assert "Use it" in text, t.name
        assert "cannot" in text or "does not" in text, t.name
        assert "\nResult:" in text or "\n\nResult" in text, t.name
        assert "Cost:" in text, t.name
        assert 1 <= len(t.spec.examples) <= 5
        for example in t.spec.examples:
            t.validate(example)
        for name, schema in t.spec.input_schema["properties"].items():
            assert "e.g." in schema["description"], (t.name, name)


# --- read_file ---------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_read_file_pages_through_numbered_lines(client: Client) -> None:
    text, data, error = await call(client, "read_file", path="numbers.txt")
    assert not error
    assert text.startswith("numbers.txt: lines 1–200 of 1000 shown\n")
    assert numbered_lines(text)[0] == (1, "line 1")
    assert numbered_lines(text)[-1] == (200, "line 200")
    assert "pass offset=200" in text
    assert data["next_offset"] == 200 and data["total_lines"] == 1000

    text, data, _ = await call(client, "read_file", path="numbers.txt", offset=200, limit=3)
    assert numbered_lines(text) == [(201, "line 201"), (202, "line 202"), (203, "line 203")]
    assert data["next_offset"] == 203

    text, data, _ = await call(client, "read_file", path="numbers.txt", offset=-2)
    assert numbered_lines(text) == [(999, "line 999"), (1000, "line 1000")]
    assert data["next_offset"] is None and "More:" not in text


@pytest.mark.anyio
async def test_read_file_returns_awkward_bytes_as_they_are(client: Client) -> None:
    """Every line comes back byte for byte, except the substitutions the result reports."""
    pieces: list[str] = []
    offset = 0
    text, data, _ = await call(client, "read_file", path="awkward.txt")
    rows = numbered_lines(text)
    assert [n for n, _ in rows] == [1, 2, 3, 4, 5]
    assert rows[0][1] == "“Curly” quotes and ‘single’ ones\r"
    assert rows[1][1] == "mixed endings: CRLF above, a lone CR here\rthen LF"
    assert rows[2][1] == "\ttabs\tinside\t"
    assert rows[3][1] == "emoji 😀🎉 and é"
    assert rows[4][1] == "a NUL ␀ byte and bad bytes �� here"
    assert data["nul_bytes"] == 1 and data["invalid_utf8_bytes"] == 2
    assert "1 NUL byte shown as ␀" in text
    assert "2 bytes that are not valid UTF-8 shown as �" in text
    pieces.extend(content for _, content in rows)
    offset = data["next_offset"]
    assert offset == 5

    # Line 6 is 100,000 characters: it is cut, and byte_offset continues it exactly.
    text, data, _ = await call(client, "read_file", path="awkward.txt", offset=offset)
    ((number, start_of_long),) = numbered_lines(text)
    assert number == 6 and "line 6 is cut after" in text
    assert data["next_offset"] is None
    long_line = start_of_long
    next_byte = data["next_byte_offset"]
    assert f"byte_offset={next_byte}" in text
    while next_byte is not None:
        text, data, _ = await call(client, "read_file", path="awkward.txt", byte_offset=next_byte)
        assert len(text) <= 10_000
        header = text.split("\n", 1)[0]
        assert header.startswith(f"awkward.txt: bytes {next_byte:,}–")
        raw = AWKWARD[data["start_byte"] : data["end_byte"]].decode()
        assert text.startswith(header + "\n" + raw)
        long_line += raw
        next_byte = data["next_byte_offset"]
    pieces.append(long_line)  # holds line 6, its newline and the last line
    rebuilt = "\n".join(pieces)
    expected = AWKWARD.decode("utf-8", errors="replace").replace("\x00", "␀")
    assert rebuilt == expected
    assert (
        "(no newline at end of file)"
        in (await call(client, "read_file", path="awkward.txt", offset=-1))[0]
    )


@pytest.mark.anyio
async def test_read_file_results_stay_under_ten_thousand_characters(
    client: Client, root: Path
) -> None:
    (root / "wide.txt").write_text("".join(f"{i:05d} " + "w" * 190 + "\n" for i in range(500)))
    text, data, _ = await call(client, "read_file", path="wide.txt", limit=2000)
    assert len(text) <= 10_000
    shown = numbered_lines(text)
    assert 30 < len(shown) < 200
    assert data["next_offset"] == len(shown)
    assert f"pass offset={len(shown)}" in text


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"path": "numbers.txt", "offset": 5000}, "has 1000 lines, so offset=5000 is past its end"),
        ({"path": "../outside/secret.txt"}, "outside the root"),
        ({"path": "escape.txt"}, "symlink"),
        ({"path": "/etc/passwd"}, "outside the root"),
        ({"path": "src"}, "directory"),
        ({"path": "image.png"}, "looks binary"),
        ({"path": "nope.txt"}, "no file or directory 'nope.txt'"),
        ({"path": "numbers.txt", "limit": 0}, "field `limit`"),
        ({"path": "numbers.txt", "limit": 10**9}, "field `limit`"),
        ({"path": "numbers.txt", "offset": "ten"}, "field `offset`"),
        ({"path": 42}, "field `path`"),
        ({}, "field `path` is required"),
        ({"path": ""}, "field `path`"),
        ({"path": "numbers.txt", "offset": 10**30}, "field `offset`"),
        ({"path": "numbers.txt", "offset": 3, "byte_offset": 4}, "Pass only one of them"),
        ({"path": "numbers.txt", "byte_offset": 10**9}, "past the end"),
        ({"path": "a%2f..%2f..%2fetc"}, "percent-encoded"),
    ],
)
async def test_read_file_refuses_bad_input(
    client: Client, arguments: dict[str, Any], expected: str
) -> None:
    text, _, error = await call(client, "read_file", **arguments)
    assert error
    assert expected in text


@pytest.mark.anyio
async def test_read_file_on_an_empty_file_and_through_an_inside_symlink(client: Client) -> None:
    text, data, error = await call(client, "read_file", path="empty.txt")
    assert not error and "empty (0 bytes)" in text and data["total_lines"] == 0
    text, _, error = await call(client, "read_file", path="inside_link.py")
    assert not error and text.startswith("src/pkg/mod.py: lines 1–2 of 2 shown")


# --- find_file ---------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_find_file_by_name_and_glob(client: Client) -> None:
    text, data, _ = await call(client, "find_file", pattern="mod.py")
    assert data["matches"] == ["src/pkg/mod.py"]
    assert "Skipped 1 directory" in text  # .git
    text, data, _ = await call(client, "find_file", pattern="mod.py", include_skipped=True)
    assert data["matches"] == [".git/objects/mod.py", "src/pkg/mod.py"]
    _, data, _ = await call(client, "find_file", pattern="*.py", path="src")
    assert data["matches"] == ["src/pkg/mod.py", "src/pkg/util.py"]
    _, data, _ = await call(client, "find_file", pattern="pkg/*.py", path="src")
    assert data["matches"] == ["src/pkg/mod.py", "src/pkg/util.py"]
    _, data, _ = await call(client, "find_file", pattern="pkg")
    assert data["matches"] == ["src/pkg/"]
    text, data, error = await call(client, "find_file", pattern="*.rs")
    assert not error and data["matches"] == [] and "grep_file" in text


@pytest.mark.anyio
async def test_find_file_pages_with_a_cursor(client: Client, root: Path) -> None:
    many = root / "many"
    many.mkdir()
    for i in range(25):
        (many / f"f{i:02d}.log").write_text("")
    seen: list[str] = []
    cursor = None
    while True:
        arguments: dict[str, Any] = {"pattern": "*.log", "path": "many", "limit": 10}
        if cursor:
            arguments["cursor"] = cursor
        text, data, error = await call(client, "find_file", **arguments)
        assert not error and data["total"] == 25
        seen.extend(data["matches"])
        cursor = data["next_cursor"]
        if cursor is None:
            break
        assert f"cursor={cursor!r}" in text
    assert seen == [f"many/f{i:02d}.log" for i in range(25)]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"pattern": "*.py", "cursor": "garbage!"}, "is not a cursor find_file gave"),
        ({"pattern": "*.py", "cursor": "eyJxIjoiMDAwIiwiYXQiOjV9"}, "different find_file call"),
        ({"pattern": "*.py", "path": "numbers.txt"}, "is a file, not a directory"),
        ({"pattern": "*.py", "path": "escape_dir"}, "symlink"),
        ({"pattern": "*.py", "path": ".."}, "outside the root"),
        ({"pattern": ""}, "field `pattern`"),
        ({"pattern": "*", "limit": 100_000}, "field `limit`"),
        ({"pattern": ["*.py"]}, "field `pattern`"),
    ],
)
async def test_find_file_refuses_bad_input(
    client: Client, arguments: dict[str, Any], expected: str
) -> None:
    text, _, error = await call(client, "find_file", **arguments)
    assert error
    assert expected in text


@pytest.mark.anyio
async def test_a_cursor_from_one_search_does_not_fit_another(client: Client) -> None:
    _, data, _ = await call(client, "find_file", pattern="*", limit=1)
    text, _, error = await call(client, "find_file", pattern="*.py", cursor=data["next_cursor"])
    assert error and "different find_file call" in text


# --- grep_file ---------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_grep_file_finds_lines_and_skips_binary_files(client: Client) -> None:
    text, data, error = await call(client, "grep_file", pattern="TODO")
    assert not error
    lines = text.split("\n")
    assert "src/pkg/mod.py:2:     return 'TODO: more'" in lines
    assert "src/pkg/util.py:1: # TODO one" in lines
    assert [(m["path"], m["line"]) for m in data["matches"]] == [
        ("inside_link.py", 2),
        ("src/pkg/mod.py", 2),
        ("src/pkg/util.py", 1),
    ]
    assert data["skipped_binary"] == ["image.png"]
    assert "Skipped binary file(s): image.png" in text
    assert "Skipped symlink(s) leading outside the root: escape.txt" in text
    assert "secret" not in json.dumps(data)

    _, data, _ = await call(client, "grep_file", pattern="todo", ignore_case=True, glob="util.py")
    assert [m["line"] for m in data["matches"]] == [1, 2]
    _, data, _ = await call(client, "grep_file", pattern="timeout", path="src/app.toml")
    assert data["matches"] == [{"path": "src/app.toml", "line": 1, "text": "timeout = 5"}]


@pytest.mark.anyio
async def test_grep_file_shortens_long_lines_visibly_and_pages(client: Client) -> None:
    text, data, _ = await call(client, "grep_file", pattern="last line", path="awkward.txt")
    assert data["matches"] == [{"path": "awkward.txt", "line": 7, "text": "last line"}]
    text, data, _ = await call(client, "grep_file", pattern="x{50}", path="awkward.txt")
    (match,) = data["matches"]
    assert match["line"] == 6 and match["text"].endswith("[…]") and len(match["text"]) < 400
    assert "shown around the match" in text

    seen = []
    cursor = None
    while True:
        arguments: dict[str, Any] = {"pattern": r"line \d+5$", "path": "numbers.txt"}
        arguments["max_results"] = 40
        if cursor:
            arguments["cursor"] = cursor
        text, data, error = await call(client, "grep_file", **arguments)
        assert not error and len(text) <= 10_000
        seen.extend(m["line"] for m in data["matches"])
        cursor = data["next_cursor"]
        if cursor is None:
            break
    assert seen == [n for n in range(1, 1001) if n % 10 == 5 and n > 10]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"pattern": "("}, "not a valid regular expression"),
        ({"pattern": "x", "path": "../outside"}, "outside the root"),
        ({"pattern": "x", "cursor": "bm90IGpzb24"}, "is not a cursor grep_file gave"),
        ({"pattern": "x", "max_results": 0}, "field `max_results`"),
        ({"pattern": "x", "ignore_case": "perhaps"}, "field `ignore_case`"),
        ({"pattern": "a" * 5000}, "field `pattern`"),
    ],
)
async def test_grep_file_refuses_bad_input(
    client: Client, arguments: dict[str, Any], expected: str
) -> None:
    text, _, error = await call(client, "grep_file", **arguments)
    assert error
    assert expected in text


@pytest.mark.anyio
async def test_grep_file_with_no_match_and_on_a_binary_file(client: Client) -> None:
    text, data, error = await call(client, "grep_file", pattern="zzz", path="src")
    assert not error and data["matches"] == [] and "No line under 'src'" in text
    text, data, error = await call(client, "grep_file", pattern="PNG", path="image.png")
    assert not error and data["skipped_binary"] == ["image.png"]


# --- list_dir ----------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_list_dir_shows_types_sizes_and_hidden_entries(client: Client) -> None:
    text, data, error = await call(client, "list_dir", path=".")
    assert not error
    by_name = {e["name"]: e for e in data["entries"]}
    assert by_name[".hidden"]["hidden"] is True and by_name[".hidden"]["type"] == "file"
    assert by_name["numbers.txt"]["size"] == 8893
    assert by_name["src"]["type"] == "dir" and by_name["src"]["size"] is None
    assert by_name["escape.txt"]["type"] == "link" and by_name["escape.txt"]["target"] is None
    assert by_name["inside_link.py"]["target"] == "src/pkg/mod.py"
    assert "outside" not in json.dumps(data)
    lines = text.split("\n")
    assert "file            11  .hidden  (hidden)" in lines
    assert "dir                 src/" in lines
    assert "link                escape.txt -> (outside the root, or broken)" in lines


@pytest.mark.anyio
async def test_list_dir_pages_and_handles_empty_directories(client: Client, root: Path) -> None:
    (root / "void").mkdir()
    text, data, _ = await call(client, "list_dir", path="void")
    assert data["entries"] == [] and "empty directory" in text
    _, first, _ = await call(client, "list_dir", limit=3)
    _, second, _ = await call(client, "list_dir", limit=3, cursor=first["next_cursor"])
    names = [e["name"] for e in first["entries"] + second["entries"]]
    assert names == sorted(os.listdir(root))[:6]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"path": "numbers.txt"}, "is a file, not a directory"),
        ({"path": "escape_dir"}, "symlink"),
        ({"path": "/"}, "outside the root"),
        ({"path": ".", "cursor": "%%%"}, "is not a cursor list_dir gave"),
        ({"path": ".", "limit": -1}, "field `limit`"),
        ({"path": None}, "field `path`"),
    ],
)
async def test_list_dir_refuses_bad_input(
    client: Client, arguments: dict[str, Any], expected: str
) -> None:
    text, _, error = await call(client, "list_dir", **arguments)
    assert error
    assert expected in text
