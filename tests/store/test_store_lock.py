"""One runtime per store, in one process: the second opener is refused and told who holds it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from wakeful.cli import app
from wakeful.errors import StoreError
from wakeful.events import user_input
from wakeful.models import FunctionModel
from wakeful.runtime import Runtime
from wakeful.store.sqlite import Store

pytestmark = pytest.mark.anyio


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "state" / "wakeful.db"


def lock_file(db_path: Path) -> Path:
    return db_path.with_name(db_path.name + ".lock")


async def test_a_second_store_on_the_same_file_is_refused_and_the_first_goes_on(
    db_path: Path,
) -> None:
    async with await Store.open(db_path) as first:
        await first.add_event(user_input("before"))
        with pytest.raises(StoreError) as info:
            await Store.open(db_path)
        message = str(info.value)
        assert f"in use by pid {os.getpid()}" in message and "this very process" in message
        assert "only one runtime may use a store" in message and "another store path" in message
        await first.add_event(user_input("after"))
        assert [e.text for e in await first.pending_events()] == ["before", "after"]
    # Closing released it.
    async with await Store.open(db_path) as again:
        assert len(await again.pending_events()) == 2


async def test_a_second_runtime_on_the_same_store_fails_to_start(db_path: Path) -> None:
    answered: list[str] = []

    def script(messages: object, tools: object) -> str:
        answered.append("turn")
        return "ok"

    async with Runtime(model=FunctionModel(script), store_path=db_path) as first:
        second = Runtime(model=FunctionModel(script), store_path=db_path)
        with pytest.raises(StoreError, match=f"pid {os.getpid()}"):
            async with second:
                pass
        await first.submit(user_input("still here"))
        await first.wait_idle()
    assert answered == ["turn"]


async def test_the_lock_file_names_its_holder_and_records_a_clean_close(db_path: Path) -> None:
    async with await Store.open(db_path):
        holder = json.loads(lock_file(db_path).read_text())
        assert holder["pid"] == os.getpid() and holder["state"] == "running"
        assert holder["host"] and holder["started_at"]
    assert json.loads(lock_file(db_path).read_text())["state"] == "clean"


async def test_a_stale_lock_file_without_a_holder_is_taken_over(db_path: Path) -> None:
    async with await Store.open(db_path) as store:
        await store.add_event(user_input("kept"))
    # As left by a runtime that died (its pid long gone), or garbage.
    for content in ['{"pid": 999999999, "host": "gone", "state": "running"}', "\x00garbage"]:
        lock_file(db_path).write_text(content)
        async with await Store.open(db_path) as store:
            assert [e.text for e in await store.pending_events()] == ["kept"]


async def test_the_reader_commands_work_while_a_runtime_holds_the_store(db_path: Path) -> None:
    async with await Store.open(db_path) as store:
        await store.add_event(user_input("visible to the CLI"))
        runner = CliRunner()
        for command in (["events", "tail"], ["tasks"], ["timers"]):
            result = runner.invoke(app, [*command, "--db", str(db_path)], catch_exceptions=False)
            assert result.exit_code == 0, result.output
        tail = runner.invoke(app, ["events", "tail", "--db", str(db_path), "--json"])
        assert "visible to the CLI" in tail.stdout
        await store.add_event(user_input("the runtime still writes"))
