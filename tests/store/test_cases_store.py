"""The cases in the SQLite store: the read-only view the CLI uses while a runtime writes, a row
edited by hand as that view reports it, and the upgrade of a version 5 file. What every backend
does with cases (numbering, paging, restarts) is in test_conformance_messages.py."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from store_records import case

from wakeful.errors import StoreError
from wakeful.store.cases import read_case, read_cases, read_recent_cases
from wakeful.store.schema import MIGRATIONS, apply_migrations
from wakeful.store.sqlite import Store

pytestmark = pytest.mark.anyio


async def test_the_cli_view_reads_cases_while_the_runtime_writes(tmp_path: Path) -> None:
    path = tmp_path / "wakeful.db"
    async with await Store.open(path) as store:
        written = await store.cases.add(case("written while open"))
        with Store.read_only(path) as reader:
            assert read_cases(reader) == [written]
            assert read_case(reader, 1) == written
            assert read_case(reader, 7) is None
            await store.cases.add(case("another"))
            assert [c.number for c in read_recent_cases(reader, 10)] == [2, 1]


async def test_a_case_row_edited_by_hand_is_named_in_the_error(tmp_path: Path) -> None:
    path = tmp_path / "wakeful.db"
    async with await Store.open(path) as store:
        await store.cases.add(case("fine"))
    conn = sqlite3.connect(path)
    try:
        conn.execute("UPDATE cases SET reasons = 'not json' WHERE number = 1")
        conn.commit()
    finally:
        conn.close()
    with Store.read_only(path) as reader, pytest.raises(StoreError) as caught:
        read_cases(reader)
    assert f"The case 1 stored in {path} cannot be read" in str(caught.value)


async def test_a_version_5_store_gains_the_cases_table_and_keeps_its_rows(
    tmp_path: Path,
) -> None:
    path = tmp_path / "wakeful.db"
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        assert apply_migrations(conn, path, MIGRATIONS[:5]) == 5
        conn.execute(
            "INSERT INTO subagents (id, parent, parent_call, root, depth, agent, task, mode, "
            "context_strategy, status, created_at) VALUES ('sub_1', 'main', 'call_1', 'main', "
            "1, 'helper', 'count', 'sync', 'minimal', 'done', '2026-12-01T10:00:00Z')"
        )
    finally:
        conn.close()
    async with await Store.open(path) as store:
        assert (await store.subagents.get("sub_1")) is not None
        assert (await store.cases.add(case("first after the upgrade"))).number == 1
    with Store.read_only(path) as reader:
        assert reader.schema_version() == len(MIGRATIONS)
        [description] = reader.rows("SELECT description FROM schema_version WHERE version = 6")
        assert description[0].startswith("cases:")
