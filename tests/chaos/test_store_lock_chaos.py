"""Two runtime processes on one store: the second is refused while the first holds it, the first
handles every event once, and a first runtime killed with SIGKILL does not keep the store locked."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from wakeful.errors import StoreError
from wakeful.events import user_input
from wakeful.store.sqlite import Store

pytestmark = pytest.mark.slow

EVENTS = 200

# A runtime that answers each pending event of the store once it may (when the `go` file
# exists), writing the event's text to its own log, then reports IDLE and ends.
RUNTIME = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path
    import anyio
    from wakeful.models import FunctionModel
    from wakeful.runtime import Runtime

    store, log, go = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])

    async def answer(messages, tools):
        while not go.exists():
            await anyio.sleep(0.01)
        with log.open("a") as file:
            file.write(str(messages[-1].content).strip() + "\\n")
        return "done"

    async def main():
        async with Runtime(model=FunctionModel(answer), store_path=store) as rt:
            print("RUNNING", os.getpid(), flush=True)
            while not go.exists():
                await anyio.sleep(0.01)
            await rt.wait_idle()
            print("IDLE", flush=True)
            if len(sys.argv) > 4:
                await anyio.sleep(3600)

    anyio.run(main)
    """
)


def start_runtime(db: Path, log: Path, go: Path, *, stay: bool = False) -> subprocess.Popen[str]:
    args = [sys.executable, "-c", RUNTIME, str(db), str(log), str(go)]
    return subprocess.Popen(
        [*args, "stay"] if stay else args,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def first_line(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    return process.stdout.readline()


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=30)


async def seed(db: Path) -> None:
    async with await Store.open(db) as store:
        await store.add_events(
            [user_input(f"event-{i:03d}", session=f"s{i:03d}") for i in range(EVENTS)]
        )


def test_a_second_runtime_process_is_refused_and_no_event_is_handled_twice(
    tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    db, go = tmp_path / "wakeful.db", tmp_path / "go"
    anyio.run(seed, db)

    first = start_runtime(db, tmp_path / "first.log", go)
    processes.append(first)
    assert first_line(first).split() == ["RUNNING", str(first.pid)]

    second = start_runtime(db, tmp_path / "second.log", go)
    processes.append(second)
    try:
        _, second_err = second.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        second.kill()
        second.communicate()
        go.touch()
        pytest.fail("the second runtime started on a store another runtime holds")

    assert second.returncode != 0
    assert f"is in use by pid {first.pid}" in second_err
    assert "another store path" in second_err

    go.touch()
    assert first_line(first).strip() == "IDLE"
    first.communicate(timeout=60)
    assert first.returncode == 0
    handled = (tmp_path / "first.log").read_text().splitlines()
    assert sorted(handled) == [f"event-{i:03d}" for i in range(EVENTS)]
    assert not (tmp_path / "second.log").exists()
    with Store.read_only(db) as reader:
        assert reader.pending_events() == []


def test_a_runtime_killed_with_sigkill_does_not_keep_the_store_locked(
    tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    db, go = tmp_path / "wakeful.db", tmp_path / "go"
    anyio.run(seed, db)
    go.touch()
    holder = start_runtime(db, tmp_path / "first.log", go, stay=True)
    processes.append(holder)
    assert first_line(holder).split() == ["RUNNING", str(holder.pid)]
    assert first_line(holder).strip() == "IDLE"

    async def open_while_held() -> None:
        with pytest.raises(StoreError, match=f"in use by pid {holder.pid}"):
            await Store.open(db)

    anyio.run(open_while_held)

    os.kill(holder.pid, signal.SIGKILL)
    holder.wait(timeout=30)

    async def open_after_the_kill() -> None:
        # The lock file is still there, saying pid … is running; nobody holds it any more.
        assert f'"pid": {holder.pid}' in db.with_name("wakeful.db.lock").read_text()
        async with await Store.open(db) as store:
            assert len(await store.pending_events()) == 0
            assert {t for t in await store.sessions()} >= {"s000", f"s{EVENTS - 1:03d}"}

    anyio.run(open_after_the_kill)
