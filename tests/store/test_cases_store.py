"""The cases in the store: numbering, paging, what survives a restart, the read-only view the CLI
uses while a runtime writes, a row edited by hand, and the upgrade of a version 5 file."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from wakeful.core.records import CaseRecord
from wakeful.errors import StoreError
from wakeful.store.cases import read_case, read_cases, read_recent_cases
from wakeful.store.schema import MIGRATIONS, apply_migrations
from wakeful.store.sqlite import Store

pytestmark = pytest.mark.anyio


def case(request: str, **changes: object) -> CaseRecord:
    made = CaseRecord(
        number=0,
        session="main",
        kind="approval",
        tool="send_email",
        request=request,
        reasons=("send_email cannot be undone.", "第二個理由"),
        context="send Bob the invoice",
        decision="approved",
        reason="Bob is our accountant",
        decided_at="2026-12-01T10:00:00+00:00",
        request_id="a3f9",
    )
    return made._replace(**changes)


async def test_cases_are_numbered_by_the_store_and_read_back_whole(tmp_path: Path) -> None:
    async with await Store.open(tmp_path / "wakeful.db") as store:
        first = await store.cases.add(case("one", number=99))
        second = await store.cases.add(
            case(
                "two",
                kind="input",
                tool="",
                decision="answered",
                answer={"date": "2026-12-24", "guests": 4},
            )
        )
        third = await store.cases.add(
            case("three", decision="denied", timed_out=True, reason="no answer in 900 s")
        )
        # The number passed in is ignored: the store numbers cases in the order they come.
        assert (first.number, second.number, third.number) == (1, 2, 3)
        assert first.label == "case 1"
        assert await store.cases.get(2) == second
        assert second.answer == {"date": "2026-12-24", "guests": 4}
        stored = await store.cases.get(1)
        assert stored is not None and stored == first
        assert stored.reasons == ("send_email cannot be undone.", "第二個理由")
        assert await store.cases.get(3) == third and third.timed_out
        assert await store.cases.get(4) is None
        assert [c.number for c in await store.cases.recent()] == [3, 2, 1]
        assert [c.number for c in await store.cases.recent(1)] == [3]
        assert [c.number for c in await store.cases.recent(5, before=3)] == [2, 1]
        assert [c.number for c in await store.cases.all()] == [1, 2, 3]


async def test_cases_survive_a_restart_and_numbering_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "wakeful.db"
    async with await Store.open(path) as store:
        kept = await store.cases.add(case("before the restart"))
    async with await Store.open(path) as store:
        assert await store.cases.all() == [kept]
        after = await store.cases.add(case("after the restart"))
        assert after.number == 2


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
