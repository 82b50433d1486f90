"""The commands that read a store, on a PostgreSQL database (`--store postgresql://…`): the same
rows written to a SQLite file and to a real PostgreSQL database read the same, a follower of
several workers' events misses none, and bad input (no server, no store there, a foreign
database, a bad URL, --store with --config) is refused clearly, with nothing changed and no
password printed."""

from __future__ import annotations

import os
import signal
import socket
import sys
from collections.abc import Iterator
from dataclasses import astuple
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream
from test_channels_cli import mail
from test_cli import EVENTS, TASKS, TIMERS, cli, json_lines, read_line
from test_cli_cases import INVOICE, NEXT_INVOICE, TABLE

from wakeful.core.records import CaseRecord
from wakeful.events import user_input
from wakeful.store.sqlite import Store

psycopg = pytest.importorskip("psycopg", reason="psycopg is missing: pip install -e '.[postgres]'")

from wakeful.store.postgres import MIGRATIONS, PostgresStore, apply_migrations  # noqa: E402
from wakeful.store.postgres.events import INSERT_EVENT, event_row  # noqa: E402

NOW = datetime.now(UTC)
CHANNEL_CONFIG = (
    '[[channels.webhook]]\nname = "github"\nfilter = { repositories = ["acme/widgets"] }\n'
    'scheme = "github"\nsecret_env = "GITHUB_WEBHOOK_SECRET"\n'
)

FILTERED = mail(1).model_copy(
    update={"context": {"filtered": "repository acme/other is not in repositories"}}
)
MAIL = mail(2)
CASES = [
    CaseRecord(0, *astuple(request), decision, reason, decided_at, timed_out, request_id, answer)
    for request, decision, reason, decided_at, timed_out, request_id, answer in (
        (
            INVOICE,
            "approved",
            "Bob is our accountant",
            "2026-11-30T09:00:00+00:00",
            False,
            "a3f9",
            None,
        ),
        (TABLE, "answered", "", "2026-11-30T10:00:00+00:00", False, "", {"guests": 4}),
        (
            NEXT_INVOICE,
            "denied",
            "no answer within 900 s; applied the default",
            "2026-12-01T09:00:00+00:00",
            True,
            "",
            None,
        ),
    )
]


async def fill(store: Any) -> None:
    """The rows a runtime leaves behind, written through the store's repositories (the same on
    both backends): events, tasks, timers, cases, audited calls, a channel's events, cursors."""
    for event, status in EVENTS:
        await store.events.add(event, status)
    for record in TASKS:
        await store.task_records.save(record)
    await store.timer_records.save_many(TIMERS)
    for case in CASES:
        await store.cases.add(case)
    for minutes, tool, status, ms in (
        (180, "send_email", "ok", 100.0),
        (5, "send_email", "error", 300.0),
        (1, "call_webhook", "ok", 20.0),
        (1, "call_webhook", "timeout", 5000.0),
    ):
        store.audit_log.add_nowait(
            ts=NOW - timedelta(minutes=minutes),
            session="main",
            tool=tool,
            call_id=f"call_{tool}_{ms}",
            status=status,
            duration_ms=ms,
            data={"arguments": {"to": "ann@example.com"}, "decisions": [], "error": None},
        )
    await store.events.add_new_many([(FILTERED, "filtered"), (MAIL, "pending")])
    await store.channel_cursors.put("webhook:github", "last_delivery", "d2")
    await store.connected_channels.save("ci", "webhook", {"path": "/ci"}, {"labels": ["ci"]})
    await store.flush()


@pytest.fixture
def stores(tmp_path: Path, postgres_url: str) -> tuple[str, str]:
    """The same rows in a SQLite store file and in a PostgreSQL database: (path, url)."""
    path = tmp_path / "wakeful.db"

    async def make() -> None:
        async with await Store.open(path) as sqlite_store:
            await fill(sqlite_store)
        async with await PostgresStore.open(postgres_url) as postgres_store:
            await fill(postgres_store)

    anyio.run(make)
    return str(path), postgres_url


def sql(url: str, query: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        cursor = conn.execute(query.encode())
        return cursor.fetchall() if cursor.description else []


# --- every reading command reads PostgreSQL as it reads SQLite ----------------------------------

SAME_OUTPUT = [
    ["events", "tail", "--json"],
    ["events", "tail", "--json", "--limit", "2", "--session", "main"],
    ["events", "tail", "--filtered", "--json"],
    ["events", "tail"],
    ["events", "tail", "--filtered"],
    ["tasks", "--session", "work"],
    ["timers"],
    ["timers", "--all", "--json"],
    ["cases", "list", "--json"],
    ["cases", "list"],
    ["cases", "show", "2", "--json"],
    ["cases", "show", "case_1"],
    ["cases", "export"],
]


@pytest.mark.parametrize("command", SAME_OUTPUT, ids=" ".join)
def test_a_postgresql_store_reads_as_the_same_rows_in_a_sqlite_file(
    stores: tuple[str, str], command: list[str]
) -> None:
    path, url = stores
    from_file = cli(*command, "--store", path)
    from_database = cli(*command, "--store", url)
    assert from_file.exit_code == 0, from_file.output
    assert from_database.exit_code == 0, from_database.output
    assert from_database.stdout.strip()
    assert from_database.stdout == from_file.stdout


def test_events_tail_json_on_postgresql_gives_each_event_with_its_status(
    stores: tuple[str, str],
) -> None:
    lines = json_lines(cli("events", "tail", "--json", "--store", stores[1]).stdout)
    assert [(line["rowid"], line["status"]) for line in lines] == [
        (1, "consumed"),
        (2, "pending"),
        (3, "consumed"),
        (4, "pending"),
        (5, "filtered"),
        (6, "pending"),
    ]
    assert lines[0]["event"]["content"] == "hello"


def test_tasks_and_timers_on_postgresql(stores: tuple[str, str]) -> None:
    url = stores[1]
    tasks = json_lines(cli("tasks", "--json", "--store", url).stdout)
    assert [(t["id"], t["state"]) for t in tasks] == [
        ("task_run01", "running"),
        ("task_done01", "completed"),
        ("task_lost01", "lost"),
    ]
    # As from the SQLite file, but for the running task's age, which grows as the test runs.
    from_file = json_lines(cli("tasks", "--json", "--store", stores[0]).stdout)
    for listed in (tasks, from_file):
        listed[0].pop("runtime_seconds")
    assert tasks == from_file
    timers = cli("timers", "--store", url).stdout
    assert "tmr_hourly" in timers and "tmr_friday" in timers and "call Ann" not in timers
    assert "2031-03-04 10:00 UTC" in timers


def test_cases_on_postgresql(stores: tuple[str, str], tmp_path: Path) -> None:
    url = stores[1]
    listed = json_lines(cli("cases", "list", "--json", "--store", url).stdout)
    assert [case["case"] for case in listed] == [3, 2, 1]
    missing = cli("cases", "show", "9", "--store", url)
    assert missing.exit_code == 1
    assert "There is no case 9 in the PostgreSQL database" in " ".join(missing.stderr.split())
    assert "the newest is case 3" in missing.stderr
    out = tmp_path / "cases.jsonl"
    assert cli("cases", "export", "--store", url, "--out", str(out)).exit_code == 0
    assert len(out.read_text().splitlines()) == 3


def test_channels_counts_the_events_and_cursors_of_a_postgresql_store(
    stores: tuple[str, str], tmp_path: Path
) -> None:
    config = tmp_path / "wakeful.toml"
    config.write_text(CHANNEL_CONFIG, encoding="utf-8")
    path, url = stores
    from_database = cli("channels", "--config", str(config), "--store", url, "--json")
    assert from_database.exit_code == 0, from_database.output
    rows = {row["name"]: row for row in json_lines(from_database.stdout)}
    github = rows["webhook:github"]
    assert (github["origin"], github["stored"], github["filtered"]) == ("configured", 1, 1)
    assert github["cursors"] == {"last_delivery": "d2"}
    assert rows["webhook:ci"]["origin"] == "connected"
    assert rows["webhook:ci"]["filter"] == {"labels": ["ci"]}
    from_file = cli("channels", "--config", str(config), "--store", path, "--json")
    assert from_file.stdout == from_database.stdout


@pytest.mark.parametrize("command", [["audit", "stats", "--json"], ["audit", "export"]])
def test_audit_reads_postgresql_as_sqlite(stores: tuple[str, str], command: list[str]) -> None:
    path, url = stores
    from_file = cli(*command, "--store", path)
    from_database = cli(*command, "--store", url)
    assert from_database.exit_code == 0, from_database.output
    assert from_database.stdout == from_file.stdout


def test_an_empty_postgresql_store_says_so_plainly(postgres_url: str) -> None:
    async def create() -> None:
        async with await PostgresStore.open(postgres_url):
            pass

    anyio.run(create)
    result = cli("tasks", "--store", postgres_url)
    assert result.exit_code == 0, result.output
    assert "No tasks in the PostgreSQL database 'wakeful_test_" in " ".join(result.stdout.split())
    events = cli("events", "tail", "--store", postgres_url)
    assert "No events in the PostgreSQL database" in " ".join(events.stdout.split())


# --- following several workers' events ----------------------------------------------------------


@pytest.mark.anyio
async def test_events_tail_follow_misses_no_event_committed_late_by_another_worker(
    postgres_url: str,
) -> None:
    async with await PostgresStore.open(postgres_url) as store:
        await store.events.add(user_input("before"))
    command = ["env", "--default-signal=INT", sys.executable, "-m", "wakeful", "events", "tail"]
    command += ["--store", postgres_url, "--follow", "--json", "--limit", "1"]
    env = os.environ | {"COLUMNS": "200"}
    async with await anyio.open_process(command, env=env) as process:
        assert process.stdout is not None and process.stderr is not None
        try:
            stdout = BufferedByteReceiveStream(process.stdout)
            first = await read_line(stdout)
            # Worker A takes the smaller seq and commits last; B commits first, and the
            # follower polls meanwhile.
            with (
                psycopg.connect(postgres_url) as worker_a,
                psycopg.connect(postgres_url) as worker_b,
            ):
                worker_a.execute(INSERT_EVENT, event_row(user_input("from A"), "pending"))
                worker_b.execute(INSERT_EVENT, event_row(user_input("from B"), "pending"))
                worker_b.commit()
                await anyio.sleep(1.2)  # two polls of the follower while A is open
                worker_a.commit()
            new = [await read_line(stdout), await read_line(stdout)]
            process.send_signal(signal.SIGINT)
            with anyio.fail_after(10):
                code = await process.wait()
        finally:
            if process.returncode is None:
                process.kill()
        errors = (await process.stderr.receive()).decode() if code else ""
    assert code == 0, errors
    assert json_lines(first)[0]["event"]["content"] == "before"
    assert [(line["rowid"], line["event"]["content"]) for line in json_lines("\n".join(new))] == [
        (2, "from A"),
        (3, "from B"),
    ]


# --- bad input ----------------------------------------------------------------------------------


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A TCP port on 127.0.0.1 that nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    yield port


@pytest.mark.parametrize(
    "command", [["events", "tail"], ["tasks"], ["timers"], ["cases", "list"]], ids=" ".join
)
def test_an_unreachable_server_is_named_without_its_password(
    command: list[str], closed_port: int
) -> None:
    url = f"postgresql://ann:s3cret-pw@127.0.0.1:{closed_port}/wakeful"
    result = cli(*command, "--store", url)
    assert result.exit_code == 1
    message = " ".join(result.stderr.split())
    assert f"Could not connect to the PostgreSQL database 'wakeful' on 127.0.0.1:{closed_port}" in (
        message
    )
    assert "Check that the server runs" in message
    assert "s3cret-pw" not in result.output


def test_channels_names_an_unreachable_server(closed_port: int, tmp_path: Path) -> None:
    config = tmp_path / "wakeful.toml"
    config.write_text(CHANNEL_CONFIG, encoding="utf-8")
    url = f"postgresql://ann:s3cret-pw@127.0.0.1:{closed_port}/wakeful"
    result = cli("channels", "--config", str(config), "--store", url)
    assert result.exit_code == 1
    assert "Could not connect" in result.stderr and "s3cret-pw" not in result.output


def test_an_empty_database_is_not_a_store_and_stays_empty(postgres_url: str) -> None:
    result = cli("events", "tail", "--store", postgres_url)
    assert result.exit_code == 1
    message = " ".join(result.stderr.split())
    assert "There is no wakeful store in the PostgreSQL database" in message
    assert "the database is empty" in message
    assert sql(postgres_url, "SELECT to_regclass('schema_version')") == [(None,)]


def test_a_database_of_another_program_is_refused_untouched(postgres_url: str) -> None:
    sql(postgres_url, "CREATE TABLE invoices (id integer)")
    result = cli("tasks", "--store", postgres_url)
    assert result.exit_code == 1
    message = " ".join(result.stderr.split())
    assert "is not a wakeful store: it holds other tables (invoices)" in message
    assert sql(postgres_url, "SELECT to_regclass('schema_version')") == [(None,)]


def test_a_newer_or_older_schema_is_refused_and_not_upgraded(postgres_url: str) -> None:
    async def at_version_4() -> None:
        async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as conn:
            await apply_migrations(conn, "the test database", MIGRATIONS[:4])

    anyio.run(at_version_4)
    older = cli("timers", "--store", postgres_url)
    assert older.exit_code == 1
    assert "has schema version 4 and this wakeful reads version" in " ".join(older.stderr.split())
    assert sql(postgres_url, "SELECT max(version) FROM schema_version") == [(4,)]

    sql(postgres_url, "INSERT INTO schema_version VALUES (99, 'from the future', now())")
    newer = cli("timers", "--store", postgres_url)
    assert newer.exit_code == 1
    assert "written by a newer wakeful" in " ".join(newer.stderr.split())


@pytest.mark.parametrize(
    "url", ["mysql://ann:s3cret-pw@db/wakeful", "postgresq://ann:s3cret-pw@db/wakeful"]
)
def test_a_url_of_another_scheme_is_a_usage_error(url: str) -> None:
    result = cli("events", "tail", "--store", url)
    assert result.exit_code == 2
    message = " ".join(result.stderr.split())
    assert "is not a store wakeful can read" in message
    assert "postgresql://USER@HOST:PORT/DATABASE" in message
    assert "s3cret-pw" not in result.output


def test_a_malformed_postgresql_url_is_reported(tmp_path: Path) -> None:
    result = cli("tasks", "--store", "postgresql://ann@db/wakeful?sslmode")
    assert result.exit_code == 1
    assert "is not a PostgreSQL connection URL" in " ".join(result.stderr.split())


def test_store_and_config_together_are_refused(tmp_path: Path) -> None:
    config = tmp_path / "wakeful.toml"
    config.write_text("", encoding="utf-8")
    result = cli("tasks", "--config", str(config), "--store", "postgresql://ann:pw@db/wakeful")
    assert result.exit_code == 2
    message = " ".join(result.stderr.split())
    assert "Give either --config" in message and "not both" in message
    assert ":pw@" not in result.output


def test_the_configurations_store_url_is_read(stores: tuple[str, str], tmp_path: Path) -> None:
    config = tmp_path / "wakeful.toml"
    config.write_text(f'[store]\nurl = "{stores[1]}"\n\n{CHANNEL_CONFIG}', encoding="utf-8")
    tasks = json_lines(cli("tasks", "--config", str(config), "--json").stdout)
    assert [t["id"] for t in tasks] == ["task_run01", "task_done01", "task_lost01"]
    channels = cli("channels", "--config", str(config), "--json")
    assert channels.exit_code == 0, channels.output
    rows = {row["name"]: row for row in json_lines(channels.stdout)}
    assert rows["webhook:github"]["cursors"] == {"last_delivery": "d2"}
