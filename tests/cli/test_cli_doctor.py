"""`wakeful doctor` on real stores (good, damaged, missing, in use) and real HTTP endpoints on
127.0.0.1 (one that answers, one closed port)."""

from __future__ import annotations

import json
import os
import random
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import pytest
from typer.testing import CliRunner, Result

from wakeful.cli import app
from wakeful.events import user_input
from wakeful.store.schema import MIGRATIONS
from wakeful.store.sqlite import Store

PAGE_SIZE = 4096


def doctor(*args: str) -> Result:
    return CliRunner().invoke(
        app, ["doctor", *args], env={"COLUMNS": "200"}, catch_exceptions=False
    )


def findings(result: Result) -> dict[str, tuple[str, str]]:
    """check → (status, message), from the plain-text output."""
    found = {}
    for line in result.stdout.splitlines():
        status, rest = line.split(maxsplit=1)
        check, message = rest.split(": ", 1)
        found[check] = (status, message)
    return found


@pytest.fixture(autouse=True)
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no wakeful.toml is picked up by accident


def make_store(path: Path, events: int = 3) -> None:
    async def write() -> None:
        async with await Store.open(path, synchronous="normal") as store:
            for start in range(0, events, 500):
                await store.add_events(
                    [
                        user_input(f"event {i:06d} " + "x" * 200)
                        for i in range(start, min(events, start + 500))
                    ]
                )

    anyio.run(write)


def test_a_good_store_is_all_ok(tmp_path: Path) -> None:
    db = tmp_path / "wakeful.db"
    make_store(db)

    result = doctor("--store", str(db))

    assert result.exit_code == 0, result.output
    found = findings(result)
    current = len(MIGRATIONS)
    assert found["schema"] == ("OK", f"Schema version {current}, the current one.")
    assert found["integrity"][0] == "OK" and "quick_check passed" in found["integrity"][1]
    assert found["lock"][0] == "OK" and "closed it cleanly" in found["lock"][1]
    assert found["size"][0] == "OK" and "WAL" in found["size"][1]
    assert found["disk"][0] == "OK" and "free in" in found["disk"][1]
    assert found["sandbox"][0] in ("OK", "WARN")
    assert found["model"][0] == "OK" and "Not checked" in found["model"][1]


def test_the_doctor_names_the_runtime_that_holds_the_store(tmp_path: Path) -> None:
    db = tmp_path / "wakeful.db"

    async def check_while_held() -> Result:
        async with await Store.open(db) as store:
            await store.add_event(user_input("busy"))
            result = doctor("--store", str(db))
            await store.add_event(user_input("still writable after the doctor looked"))
            return result

    result = anyio.run(check_while_held)

    assert result.exit_code == 0, result.output
    assert findings(result)["lock"] == (
        "OK",
        f"In use by a runtime: pid {os.getpid()} on host {socket.gethostname()!r}, started "
        + findings(result)["lock"][1].split(", started ")[1],
    )


def test_a_damaged_store_fails_with_what_to_do(tmp_path: Path) -> None:
    db = tmp_path / "wakeful.db"
    make_store(db, events=3000)
    data = bytearray(db.read_bytes())
    middle = len(data) // PAGE_SIZE // 2
    data[middle * PAGE_SIZE : (middle + 2) * PAGE_SIZE] = random.Random(3).randbytes(2 * PAGE_SIZE)
    db.write_bytes(bytes(data))

    result = doctor("--store", str(db))

    assert result.exit_code == 1
    status, message = findings(result)["integrity"]
    assert status == "FAIL" and "quick_check found damage" in message and ".recover" in message
    assert db.read_bytes() == bytes(data)


def test_a_missing_store_a_directory_and_a_foreign_file_fail_clearly(tmp_path: Path) -> None:
    missing = doctor("--store", str(tmp_path / "nothing.db"))
    assert missing.exit_code == 1
    assert findings(missing)["store"] == (
        "FAIL",
        f"There is no store at {tmp_path / 'nothing.db'}. Check the path; a runtime creates it "
        "when it first starts (`wakeful run`).",
    )
    assert not (tmp_path / "nothing.db").exists()

    directory = doctor("--store", str(tmp_path))
    assert directory.exit_code == 1
    assert "is a directory, not a store file" in findings(directory)["store"][1]

    text = tmp_path / "notes.txt"
    text.write_text("not a database\n")
    foreign = doctor("--store", str(text))
    assert foreign.exit_code == 1
    assert "is not a SQLite database" in findings(foreign)["store"][1]
    assert text.read_text() == "not a database\n"


def test_no_store_and_no_configuration_is_bad_input() -> None:
    result = doctor()
    assert result.exit_code == 2
    assert "There is no store to check" in result.stderr


def test_json_output_has_every_finding(tmp_path: Path) -> None:
    db = tmp_path / "wakeful.db"
    make_store(db)

    result = doctor("--store", str(db), "--json")

    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["ok"] is True and document["store"] == str(db)
    checks = {f["check"]: f for f in document["findings"]}
    assert set(checks) >= {"schema", "integrity", "size", "lock", "sandbox", "disk", "model"}
    assert all(set(f) == {"check", "status", "message"} for f in document["findings"])
    assert checks["schema"]["status"] == "ok"

    missing = doctor("--store", str(tmp_path / "gone.db"), "--json")
    assert missing.exit_code == 1 and json.loads(missing.stdout)["ok"] is False


# --- the model endpoint --------------------------------------------------------------------------


class _Answer(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def answering_port() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Answer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture
def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def write_config(tmp_path: Path, base_url: str) -> Path:
    make_store(tmp_path / "wakeful.db")
    config = tmp_path / "wakeful.toml"
    config.write_text(
        f'[model]\nprovider = "openai"\nname = "test"\nbase_url = "{base_url}"\n\n'
        '[store]\npath = "wakeful.db"\n',
        encoding="utf-8",
    )
    return config


def test_a_model_endpoint_that_answers_is_ok(tmp_path: Path, answering_port: int) -> None:
    url = f"http://127.0.0.1:{answering_port}/v1"
    config = write_config(tmp_path, url)

    result = doctor("--config", str(config))

    assert result.exit_code == 0, result.output
    status, message = findings(result)["model"]
    assert status == "OK" and message.startswith(f"{url} answered (HTTP 404)")
    assert findings(result)["schema"][0] == "OK"  # the store of the configuration


def test_a_closed_model_port_fails(tmp_path: Path, closed_port: int) -> None:
    url = f"http://127.0.0.1:{closed_port}/v1"
    config = write_config(tmp_path, url)

    result = doctor("--config", str(config), "--json")

    assert result.exit_code == 1
    model = next(f for f in json.loads(result.stdout)["findings"] if f["check"] == "model")
    assert model["status"] == "fail"
    assert model["message"].startswith(f"Cannot reach {url}:")
    assert "Start the model server, or fix base_url" in model["message"]


# --- a store on PostgreSQL ------------------------------------------------------------------------


def test_a_postgresql_store_is_checked_by_url_without_being_changed(postgres_url: str) -> None:
    from wakeful.store.postgres import PostgresStore

    async def write() -> None:
        async with await PostgresStore.open(postgres_url) as store:
            await store.events.add(user_input("hello"))

    anyio.run(write)

    result = doctor("--store", postgres_url, "--json")

    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["ok"] is True
    assert document["store"].startswith("the PostgreSQL database 'wakeful_test")
    store = next(f for f in document["findings"] if f["check"] == "store")
    assert store["status"] == "ok" and "(1 events stored)" in store["message"]
    # No file checks for a database: no disk, integrity or lock findings.
    assert {f["check"] for f in document["findings"]} == {"store", "sandbox", "model"}


def test_the_store_url_of_the_configuration_is_checked(postgres_url: str, tmp_path: Path) -> None:
    config = tmp_path / "wakeful.toml"
    config.write_text(f'[store]\nurl = "{postgres_url}"\n')

    result = doctor("--config", str(config))

    assert result.exit_code == 1  # an empty database holds no wakeful store yet
    status, message = findings(result)["store"]
    assert status == "FAIL" and "wakeful_test" in message
    assert not (tmp_path / ".wakeful").exists()  # no SQLite file was looked for or made


def test_an_unreachable_database_is_a_failed_finding_without_the_password() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"postgresql://wakeful:hunter2@127.0.0.1:{port}/wakeful"

    result = doctor("--store", url)

    assert result.exit_code == 1
    status, message = findings(result)["store"]
    assert status == "FAIL" and "hunter2" not in result.output
    assert "Could not connect" in message or "could not" in message.lower()


def test_a_store_url_of_another_scheme_is_a_usage_error() -> None:
    result = doctor("--store", "mysql://db/wakeful")
    assert result.exit_code == 2
    assert "postgresql://USER@HOST:PORT/DATABASE" in " ".join(result.stderr.split())
