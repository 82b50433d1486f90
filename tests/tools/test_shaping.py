"""Output shaping: a cut is always visible and exact, cursors refuse what is not theirs, and a
compression step announces itself."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wakeful.errors import ToolError, UserError
from wakeful.tools.shaping import (
    NO_COMPRESSION,
    Compressed,
    Compressor,
    Cursor,
    NoCompression,
    cut_visibly,
    shape,
)

HOW = "pass offset={offset} to read them"


def test_a_text_within_the_limit_is_left_as_it_is() -> None:
    shaped = cut_visibly("short", 10, how_to_get_more=HOW)
    assert shaped.text == "short" and not shaped.truncated and shaped.omitted_chars == 0


def test_a_long_text_keeps_its_head_and_says_exactly_what_was_omitted() -> None:
    text = "x" * 30_000
    shaped = cut_visibly(text, 10_000, how_to_get_more=HOW)
    assert shaped.truncated and len(shaped.text) <= 10_000
    head = shaped.omitted_start
    assert shaped.text.startswith("x" * head)
    assert shaped.omitted_end == 30_000
    assert shaped.text.endswith(
        f"\n[… {30_000 - head:,} characters omitted; pass offset={head} to read them]"
    )


def test_a_tail_is_kept_when_asked_for() -> None:
    text = "".join(f"line {i}\n" for i in range(5_000))
    shaped = cut_visibly(text, 2_000, how_to_get_more="read lines {offset}-{end}", tail_chars=500)
    assert shaped.text.startswith("line 0\n") and shaped.text.endswith("line 4999\n")
    # Both cuts fall on line breaks: no half line on either side of the marker.
    before, _, after = shaped.text.partition("[… ")
    marker, _, tail = after.partition("]\n")
    assert before == text[: shaped.omitted_start] and before.endswith("\n")
    assert tail == text[shaped.omitted_end :] and tail.startswith("line ")
    assert marker.endswith(f"read lines {shaped.omitted_start}-{shaped.omitted_end}")


@given(
    text=st.text(min_size=0, max_size=3_000),
    limit=st.integers(min_value=120, max_value=2_000),
    tail_chars=st.integers(min_value=0, max_value=1_000),
)
def test_a_cut_never_exceeds_the_limit_and_loses_only_what_it_reports(
    text: str, limit: int, tail_chars: int
) -> None:
    shaped = cut_visibly(text, limit, how_to_get_more=HOW, tail_chars=tail_chars)
    assert len(shaped.text) <= limit
    if not shaped.truncated:
        assert shaped.text == text
        return
    head, tail = text[: shaped.omitted_start], text[shaped.omitted_end :]
    assert shaped.text.startswith(head) and shaped.text.endswith(tail)
    middle = shaped.text[len(head) : len(shaped.text) - len(tail)]
    omitted = shaped.omitted_end - shaped.omitted_start
    start = shaped.omitted_start
    assert middle.strip("\n") == (
        f"[… {omitted:,} characters omitted; pass offset={start} to read them]"
    )


def test_a_limit_too_small_for_the_marker_is_refused_with_the_minimum() -> None:
    with pytest.raises(UserError, match=r"Give a limit of at least \d+"):
        cut_visibly("x" * 1000, 20, how_to_get_more=HOW)
    with pytest.raises(UserError, match="tail_chars must be 0 or more, got -1"):
        cut_visibly("x" * 1000, 500, how_to_get_more=HOW, tail_chars=-1)


# --- cursors -------------------------------------------------------------------------------------


def test_a_cursor_round_trips_and_is_url_safe() -> None:
    pages = Cursor("search_files", {"query": "TODO", "path": "src"})
    token = pages.encode({"offset": 50, "after": "src/a.py"})
    assert token.isascii() and not set(token) & set("+/= ")
    assert pages.decode(token) == {"offset": 50, "after": "src/a.py"}
    # The query is compared canonically: key order does not matter.
    assert Cursor("search_files", {"path": "src", "query": "TODO"}).decode(token)["offset"] == 50


@pytest.mark.parametrize(
    ("cursor_of", "why"),
    [
        (Cursor("search_files", {"query": "FIXME", "path": "src"}), "another tool or other args"),
        (Cursor("list_files", {"query": "TODO", "path": "src"}), "another tool or other args"),
    ],
)
def test_a_cursor_of_another_tool_or_query_is_refused(cursor_of: Cursor, why: str) -> None:
    token = Cursor("search_files", {"query": "TODO", "path": "src"}).encode({"offset": 50})
    with pytest.raises(ToolError) as caught:
        cursor_of.decode(token)
    message = str(caught.value)
    assert "it was given for another tool or other arguments" in message
    assert f"Call {cursor_of.tool} again without a cursor to start from the first page" in message


@pytest.mark.parametrize("token", ["", "not a cursor!", "eyJ2IjogMn0", "W10", "%%%%"])
def test_a_malformed_cursor_is_refused_with_the_way_out(token: str) -> None:
    with pytest.raises(ToolError, match="again without a cursor to start from the first page"):
        Cursor("search_files", {"query": "TODO"}).decode(token)


# --- compression ---------------------------------------------------------------------------------


class KeepMatchingLines:
    """A stand-in for a small model: keeps the lines that mention the query."""

    async def compress(self, text: str, *, query: str, limit: int) -> Compressed:
        lines = [line for line in text.splitlines() if query in line]
        kept = "\n".join(lines)
        return Compressed(
            kept,
            applied=True,
            note=f"Compressed from {len(text):,} characters to the {len(lines)} lines that "
            f"mention {query!r}",
        )


@pytest.mark.anyio
async def test_the_default_compressor_does_nothing_and_says_so() -> None:
    assert isinstance(NO_COMPRESSION, Compressor)
    result = await NoCompression().compress("text", query="q", limit=2)
    assert result == Compressed("text", applied=False)
    text = "x" * 500
    shaped = await shape(text, 200, how_to_get_more=HOW, query="x")
    assert shaped.truncated and not shaped.compressed
    assert shaped.text == cut_visibly(text, 200, how_to_get_more=HOW).text


@pytest.mark.anyio
async def test_a_compression_is_announced_in_the_text() -> None:
    text = "\n".join(f"test_{i} {'FAILED' if i % 100 == 0 else 'passed'}" for i in range(1_000))
    shaped = await shape(
        text, 500, how_to_get_more=HOW, query="FAILED", compressor=KeepMatchingLines()
    )
    assert shaped.compressed and not shaped.truncated
    assert shaped.text.startswith(
        f"[Compressed from {len(text):,} characters to the 10 lines that mention 'FAILED']\n"
        "test_0 FAILED\n"
    )


@pytest.mark.anyio
async def test_a_compression_that_does_not_fit_gives_way_to_a_visible_cut() -> None:
    text = "FAILED\n" * 1_000
    shaped = await shape(
        text, 300, how_to_get_more=HOW, query="FAILED", compressor=KeepMatchingLines()
    )
    assert not shaped.compressed and shaped.truncated
    assert f"pass offset={shaped.omitted_start} to read them" in shaped.text


@pytest.mark.anyio
async def test_a_short_text_is_not_sent_to_the_compressor() -> None:
    shaped = await shape(
        "FAILED", 300, how_to_get_more=HOW, query="FAILED", compressor=KeepMatchingLines()
    )
    assert shaped.text == "FAILED" and not shaped.compressed


def test_a_compression_without_a_note_is_refused() -> None:
    with pytest.raises(UserError, match="applied compression without a note"):
        Compressed("short", applied=True)
