"""read_file on a 1 GiB sparse file: time and peak memory of reads near the end.

    .venv/bin/python bench/read_file_big.py [--trace]

The file is a 1 GiB hole of NUL bytes followed by 2000 text lines. Each read is timed; with
--trace, Python's peak allocation during the read is measured too (tracemalloc slows Python
loops, so times are higher then).
"""

from __future__ import annotations

import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import anyio

from wakeful.events import Event
from wakeful.services import Services
from wakeful.toolkits.perception.read_file import read_file
from wakeful.tools.spec import ToolContext
from wakeful.tools.tasks import TaskManager

SIZE = 1 << 30
TRACE = "--trace" in sys.argv


async def _drop(event: Event) -> None:
    return None


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        tail = b"".join(f"log line {i}: something happened\n".encode() for i in range(2000))
        with (root / "big.log").open("wb") as file:
            file.truncate(SIZE - len(tail))
            file.seek(SIZE - len(tail))
            file.write(tail)
        async with anyio.create_task_group() as tg:
            services = Services(tasks=TaskManager(tg, _drop), emit=_drop, workdir=root)
            ctx = ToolContext("measure", "call", "read_file", services)

            async def timed(label: str, **arguments: Any) -> None:
                if TRACE:
                    tracemalloc.start()
                started = time.perf_counter()
                result = await read_file.run({"path": "big.log", **arguments}, ctx)
                elapsed = (time.perf_counter() - started) * 1000
                peak = tracemalloc.get_traced_memory()[1] / 1e6 if TRACE else float("nan")
                tracemalloc.stop()
                header = result.content.split("\n", 1)[0]
                print(f"{label:40} {elapsed:8.1f} ms  peak {peak:6.2f} MB  {header[:70]}")

            await timed("offset=-200 (tail)", offset=-200)
            await timed("offset=-1999, limit=50", offset=-1999, limit=50)
            await timed("byte_offset=-4096", byte_offset=-4096)
            await timed("byte_offset=SIZE-60000", byte_offset=SIZE - 60_000)
            await timed("offset=1 (first: counts to line 2)", offset=1)
            await timed("offset=1500 (checkpoint reused)", offset=1500)


if __name__ == "__main__":
    anyio.run(main)
