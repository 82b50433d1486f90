"""Opening a store says what is really there: a permission problem, a foreign file, a newer
schema, a truncated file, damage found after an unclean shutdown, and never advice that would
abandon good data. Every refusal leaves the file as it was."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from wakeful.errors import StoreError
from wakeful.events import user_input
from wakeful.store.sqlite import Store

pytestmark = pytest.mark.anyio

OPEN_STORE = textwrap.dedent(
    """
    import sys
    import anyio
    from wakeful.errors import StoreError
    from wakeful.store.sqlite import Store

    async def main():
        try:
            store = await Store.open(sys.argv[1])
        except StoreError as exc:
            print(exc)
            sys.exit(3)
        await store.close()
        print("OPENED")

    anyio.run(main)
    """
)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "state" / "wakeful.db"


def files_beside(path: Path) -> list[str]:
    return sorted(p.name for p in path.parent.iterdir())


async def make_store(path: Path, events: int = 3) -> None:
    async with await Store.open(path) as store:
        await store.add_events([user_input(f"event {i}") for i in range(events)])


async def run_without_root_privileges(script: str | None, *args: str) -> tuple[int, str]:
    """Run `script` (None: the `wakeful` CLI) as a child in which file permissions apply, even
    when the tests run as root (root keeps its uid but loses the capabilities that override
    permissions)."""
    command = [sys.executable, *(["-c", script] if script else ["-m", "wakeful"]), *args]
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without setpriv: permissions cannot be tested")
        command = [setpriv, "--bounding-set=-dac_override,-dac_read_search", *command]
    with anyio.fail_after(60):
        result = await anyio.run_process(command, check=False)
    return result.returncode, result.stdout.decode() + result.stderr.decode()


@pytest.fixture
def restore_modes(db_path: Path) -> Iterator[None]:
    yield
    for path in (db_path.parent, db_path):
        if path.exists():
            path.chmod(0o755 if path.is_dir() else 0o644)


# --- permissions ---------------------------------------------------------------------------------


async def test_a_healthy_store_in_a_read_only_folder_is_a_permission_problem(
    db_path: Path, restore_modes: None
) -> None:
    await make_store(db_path)
    content = await anyio.Path(db_path).read_bytes()
    await anyio.Path(db_path.parent).chmod(0o555)

    returncode, message = await run_without_root_privileges(OPEN_STORE, str(db_path))

    assert returncode == 3, message
    assert f"its folder {db_path.parent} is read-only for this user" in message
    assert "this is not damage: its data is fine" in message
    assert "Do not move it aside or delete it" in message
    assert "damaged" not in message and "new, empty store" not in message
    assert await anyio.Path(db_path).read_bytes() == content
    assert files_beside(db_path) == ["wakeful.db", "wakeful.db.lock"]


async def test_the_reader_and_the_doctor_see_a_store_in_a_read_only_folder_as_healthy(
    db_path: Path, restore_modes: None
) -> None:
    await make_store(db_path)
    await anyio.Path(db_path.parent).chmod(0o555)

    returncode, output = await run_without_root_privileges(
        None, "events", "tail", "--db", str(db_path), "--json"
    )
    assert returncode == 0, output
    assert output.count('"kind": "user.input"') == 3

    returncode, output = await run_without_root_privileges(
        None, "doctor", "--store", str(db_path), "--json"
    )
    assert returncode == 0, output
    checks = {f["check"]: f for f in json.loads(output[output.index("{") :])["findings"]}
    assert checks["integrity"]["status"] == "ok"
    assert checks["permissions"]["status"] == "warn"
    assert "The data is not affected" in checks["permissions"]["message"]


async def test_a_read_only_store_file_is_a_permission_problem(
    db_path: Path, restore_modes: None
) -> None:
    await make_store(db_path)
    content = await anyio.Path(db_path).read_bytes()
    await anyio.Path(db_path).chmod(0o444)

    returncode, message = await run_without_root_privileges(OPEN_STORE, str(db_path))

    assert returncode == 3, message
    assert "the file is not readable and writable by this user" in message
    assert "this is not damage" in message and "damaged" not in message
    assert await anyio.Path(db_path).read_bytes() == content


# --- files that are not (this wakeful's) stores --------------------------------------------------


async def test_a_foreign_sqlite_file_is_left_byte_for_byte_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "invoices.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE invoices (id INTEGER, amount REAL)")
    conn.executemany("INSERT INTO invoices VALUES (?, ?)", [(i, i * 1.5) for i in range(100)])
    conn.commit()
    conn.close()
    content = path.read_bytes()

    with pytest.raises(StoreError) as info:
        await Store.open(path)

    message = str(info.value)
    assert "is a SQLite database but not a wakeful store" in message and "invoices" in message
    assert "Nothing in it was changed" in message
    assert path.read_bytes() == content  # not even switched to WAL
    assert files_beside(path) == ["invoices.db"]  # no lock, -wal or -shm file beside it


async def test_a_file_that_is_not_sqlite_is_named_as_such_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_text("shopping list: milk, eggs\n" * 20)

    with pytest.raises(StoreError) as info:
        await Store.open(path)

    assert "is not a SQLite database" in str(info.value)
    assert "b'shopping list: m'" in str(info.value)
    assert files_beside(path) == ["notes.db"]


async def test_a_store_with_a_newer_schema_names_its_version(db_path: Path) -> None:
    await make_store(db_path)
    conn = sqlite3.connect(db_path)
    conn.execute(
        "INSERT INTO schema_version (version, description, applied_at) VALUES (9, 'future', '')"
    )
    conn.commit()
    conn.close()
    content = await anyio.Path(db_path).read_bytes()

    with pytest.raises(StoreError, match=r"schema version 9, written by a newer wakeful.*Upgrade"):
        await Store.open(db_path)

    assert await anyio.Path(db_path).read_bytes() == content


# --- truncation and damage -----------------------------------------------------------------------


async def test_a_truncated_store_is_an_error_not_a_fresh_store(db_path: Path) -> None:
    await make_store(db_path)
    await anyio.Path(db_path).write_bytes(b"")

    with pytest.raises(StoreError) as info:
        await Store.open(db_path)

    assert "is an empty file (0 bytes)" in str(info.value)
    assert "probably truncated" in str(info.value)
    assert (await anyio.Path(db_path).stat()).st_size == 0
    # Asked for explicitly, an empty file becomes a new store.
    async with await Store.open(db_path, initialise_empty_file=True) as store:
        assert await store.pending_events() == []


async def test_a_missing_store_is_created(db_path: Path) -> None:
    async with await Store.open(db_path) as store:
        assert await store.pending_events() == []
    assert files_beside(db_path) == ["wakeful.db", "wakeful.db.lock"]
