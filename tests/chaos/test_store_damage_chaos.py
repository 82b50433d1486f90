"""A store damaged after an unclean shutdown is found out at the next start: a real child process
writes events and ends without closing the store, then pages in the middle of the file are
overwritten with garbage."""

from __future__ import annotations

import random
import sys
import textwrap
from pathlib import Path

import anyio
import pytest

from wakeful.errors import StoreError
from wakeful.store.sqlite import Store

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

PAGE_SIZE = 4096

# Stores events, then ends without closing the store: an unclean shutdown. The WAL is first
# checkpointed, so every page is in the main file, where the test then damages some.
CRASH_AFTER_WRITING = textwrap.dedent(
    """
    import os, sqlite3, sys
    import anyio
    from wakeful.events import user_input
    from wakeful.store.sqlite import Store

    async def main():
        store = await Store.open(sys.argv[1], synchronous="normal")
        count = int(sys.argv[2])
        for start in range(0, count, 500):
            await store.add_events(
                [user_input(f"event {i:06d} " + "x" * 200)
                 for i in range(start, min(count, start + 500))]
            )
        conn = sqlite3.connect(sys.argv[1])
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()
        print("WRITTEN", flush=True)
        os._exit(0)

    anyio.run(main)
    """
)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "state" / "wakeful.db"


async def crash_after_writing(db_path: Path, events: int) -> None:
    with anyio.fail_after(60):
        result = await anyio.run_process(
            [sys.executable, "-c", CRASH_AFTER_WRITING, str(db_path), str(events)], check=False
        )
    assert b"WRITTEN" in result.stdout, result.stderr.decode()


def overwrite_middle_pages(path: Path, count: int = 3) -> None:
    data = bytearray(path.read_bytes())
    pages = len(data) // PAGE_SIZE
    first = pages // 2
    garbage = random.Random(7).randbytes(count * PAGE_SIZE)
    data[first * PAGE_SIZE : (first + count) * PAGE_SIZE] = garbage
    path.write_bytes(bytes(data))


async def test_pages_overwritten_after_an_unclean_shutdown_are_found_at_the_next_start(
    db_path: Path,
) -> None:
    await crash_after_writing(db_path, 3000)
    assert (await anyio.Path(db_path).stat()).st_size > 100 * PAGE_SIZE
    overwrite_middle_pages(db_path)
    damaged = await anyio.Path(db_path).read_bytes()

    with pytest.raises(StoreError) as info:
        await Store.open(db_path)

    message = str(info.value)
    assert f"The store {db_path} is damaged" in message
    assert "did not shut down cleanly" in message and ".recover" in message
    assert await anyio.Path(db_path).read_bytes() == damaged
    # Refused again next time: a failed check is not taken for a clean shutdown.
    with pytest.raises(StoreError, match="is damaged"):
        await Store.open(db_path)


async def test_a_healthy_store_after_an_unclean_shutdown_opens_with_its_data(
    db_path: Path,
) -> None:
    await crash_after_writing(db_path, 50)
    async with await Store.open(db_path) as store:
        assert len(await store.pending_events()) == 50
