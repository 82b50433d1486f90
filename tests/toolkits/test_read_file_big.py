"""read_file on big files: reads near the end of 1 GiB cost one window, not the whole file."""

from __future__ import annotations

import tracemalloc
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tool_services import tool_services
from wakeful.errors import ToolError
from wakeful.toolkits.perception.read_file import read_file
from wakeful.tools.spec import ToolContext, ToolResult

GIB = 1 << 30
TAIL = b"".join(f"log line {i}: something happened\n".encode() for i in range(2000))


@pytest.fixture
def root(tmp_path: Path) -> Path:
    # 1 GiB, almost all of it a hole (NUL bytes, no disk), then 2000 lines of text.
    with (tmp_path / "big.log").open("wb") as file:
        file.truncate(GIB - len(TAIL))
        file.seek(GIB - len(TAIL))
        file.write(TAIL)
    lines = "".join(f"row {i:07d}\n" for i in range(800_000))  # 9.6 MB: over the 4 MiB
    (tmp_path / "rows.txt").write_text(lines)
    return tmp_path


@pytest.fixture
async def ctx(root: Path) -> AsyncIterator[ToolContext]:
    async with tool_services(root) as (services, _):
        yield ToolContext("s", "c", "read_file", services)


async def measured(ctx: ToolContext, **arguments: Any) -> tuple[ToolResult, int]:
    """The result and the peak of Python memory while reading (time is for bench/)."""
    tracemalloc.start()
    try:
        result = await read_file.run(arguments, ctx)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return result, peak


@pytest.mark.anyio
async def test_the_end_of_a_1_gib_file_is_read_without_reading_the_rest(ctx: ToolContext) -> None:
    result, peak = await measured(ctx, path="big.log", offset=-200)
    assert peak < 50_000_000  # one window, not the file (speed: bench/read_file_big.py)
    assert result.content.startswith("big.log: lines -200…-1 (numbered back from the end")
    body = result.content.split("\n")[1:201]
    assert body[0] == "  -200\tlog line 1800: something happened"
    assert body[-1] == "    -1\tlog line 1999: something happened"
    assert "pass offset=" not in result.content

    result, peak = await measured(ctx, path="big.log", offset=-400, limit=100)
    assert peak < 50_000_000
    assert result.structured["next_offset"] == -300

    result, peak = await measured(ctx, path="big.log", byte_offset=GIB - 50_000)
    assert peak < 50_000_000
    start, end = result.structured["start_byte"], result.structured["end_byte"]
    assert result.content.split("\n", 1)[1].startswith(
        TAIL[start - GIB + len(TAIL) :][:100].decode()
    )
    assert end - start == 9_000


@pytest.mark.anyio
async def test_the_hole_of_nul_bytes_is_refused_as_binary(ctx: ToolContext) -> None:
    with pytest.raises(ToolError, match="looks binary: 30% or more of bytes 1,000–10,000"):
        await read_file.run({"path": "big.log", "byte_offset": 1000}, ctx)


@pytest.mark.anyio
async def test_line_offsets_in_a_big_file_use_remembered_checkpoints(ctx: ToolContext) -> None:
    result, _ = await measured(ctx, path="rows.txt", offset=700_000, limit=2)
    assert result.content.split("\n")[1:3] == ["700001\trow 0700000", "700002\trow 0700001"]
    assert result.structured["total_lines"] is None
    again = await read_file.run({"path": "rows.txt", "offset": 699_000, "limit": 2}, ctx)
    assert again.structured["total_lines"] is None
    assert again.content.split("\n")[1] == "699001\trow 0699000"
    tail, _ = await measured(ctx, path="rows.txt", offset=-1)
    assert tail.content.split("\n")[1] == "    -1\trow 0799999"
