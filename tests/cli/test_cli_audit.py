"""`wakeful audit stats` and `wakeful audit export` against real store files, via CliRunner."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
import typer
from typer.testing import CliRunner, Result

from wakeful.cli.audit import parse_since, register
from wakeful.safety.audit import AuditLog, AuditRecord, AuditStatus
from wakeful.store.sqlite import Store

NOW = datetime.now(UTC)


def audit_cli() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def root() -> None:
        """The test's stand-in for the `wakeful` app."""

    register(app)
    return app


def run(*args: str) -> Result:
    """Run `audit …` in-process; a crash raises instead of passing as exit code 1."""
    return CliRunner().invoke(
        audit_cli(), ["audit", *args], env={"COLUMNS": "200"}, catch_exceptions=False
    )


def record(
    tool: str, status: AuditStatus, ms: float, *, ago: timedelta, session: str = "main"
) -> AuditRecord:
    return AuditRecord(
        time=NOW - ago,
        session=session,
        tool=tool,
        call_id=f"call_{tool}_{ms}",
        arguments={"to": "ann@example.com", "password": "hunter2"},
        decisions=[{"layer": "policy", "decision": "allow", "reasons": []}],
        status=status,
        duration_ms=ms,
        error="boom" if status == "error" else None,
    )


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "wakeful.db"
    records = [
        record("send_email", "ok", 100.0, ago=timedelta(hours=3)),
        record("send_email", "error", 300.0, ago=timedelta(minutes=5), session="mail"),
        record("call_webhook", "ok", 20.0, ago=timedelta(minutes=1)),
        record("call_webhook", "timeout", 5000.0, ago=timedelta(minutes=1)),
    ]

    async def fill() -> None:
        async with await Store.open(path) as store:
            log = AuditLog(store)
            for item in records:
                await log.record(item)

    anyio.run(fill)
    return path


def lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines()]


def test_stats_prints_a_table_per_tool(db: Path) -> None:
    result = run("stats", "--store", str(db))
    assert result.exit_code == 0, result.output
    assert "Tool calls" in result.stdout
    webhook = next(line for line in result.stdout.splitlines() if "call_webhook" in line)
    cells = webhook.replace("│", " ").split()
    assert cells[:6] == ["call_webhook", "2", "0", "50.0%", "1", "0"]
    assert "2,510.0" in webhook  # p50 between 20 and 5000 ms


def test_stats_json_and_since(db: Path) -> None:
    result = run("stats", "--db", str(db), "--json")
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    assert body["since"] is None
    assert body["tools"]["send_email"] == {
        "calls": 2,
        "errors": 1,
        "error_rate": 0.5,
        "timeouts": 0,
        "denied": 0,
        "cancelled": 0,
        "p50_ms": 200.0,
        "p95_ms": pytest.approx(290.0),
    }
    before = datetime.now(UTC)
    recent = json.loads(run("stats", "--store", str(db), "--json", "--since", "1h").stdout)
    after = datetime.now(UTC)
    assert recent["tools"]["send_email"]["calls"] == 1
    since = datetime.fromisoformat(recent["since"])
    assert before - timedelta(hours=1) <= since <= after - timedelta(hours=1)


def test_stats_of_an_empty_store_says_so(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"

    async def create() -> None:
        async with await Store.open(path):
            pass

    anyio.run(create)
    result = run("stats", "--store", str(path))
    assert result.exit_code == 0
    assert "No audited calls in" in result.stdout


def test_export_writes_redacted_json_lines_with_filters(db: Path, tmp_path: Path) -> None:
    result = run("export", "--store", str(db))
    assert result.exit_code == 0, result.output
    exported = lines(result.stdout)
    assert [(e["tool"], e["status"]) for e in exported] == [
        ("send_email", "ok"),
        ("send_email", "error"),
        ("call_webhook", "ok"),
        ("call_webhook", "timeout"),
    ]
    assert exported[0]["arguments"] == {"to": "ann@example.com", "password": "[REDACTED]"}
    assert "hunter2" not in result.stdout

    only = lines(run("export", "--store", str(db), "--since", "1h", "--tool", "send_email").stdout)
    assert [(e["session"], e["status"]) for e in only] == [("mail", "error")]
    assert lines(run("export", "--store", str(db), "--session", "mail").stdout) == only

    target = tmp_path / "audit.jsonl"
    written = run("export", "--store", str(db), "-o", str(target), "--tool", "call_webhook")
    assert written.exit_code == 0, written.output
    assert written.stdout == ""
    assert "Wrote 2 audited call(s)" in written.stderr
    assert [e["status"] for e in lines(target.read_text())] == ["ok", "timeout"]


def test_the_store_of_the_configuration_is_read(db: Path, tmp_path: Path) -> None:
    config = tmp_path / "wakeful.toml"
    config.write_text(f'[store]\npath = "{db.name}"\n')
    result = run("export", "--config", str(config), "--tool", "send_email")
    assert result.exit_code == 0, result.output
    assert len(lines(result.stdout)) == 2


def test_a_missing_store_is_reported_and_not_created(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "wakeful.db"
    for command in ("stats", "export"):
        result = run(command, "--store", str(missing))
        assert result.exit_code == 1
        assert "There is no wakeful store at" in result.stderr
    assert not missing.exists() and not missing.parent.exists()


def test_a_file_that_is_not_a_wakeful_store_is_refused(tmp_path: Path) -> None:
    text = tmp_path / "notes.db"
    text.write_text("just some notes\n" * 100)
    result = run("stats", "--store", str(text))
    assert result.exit_code == 1
    assert "is not a readable wakeful store" in result.stderr
    assert text.read_text() == "just some notes\n" * 100

    foreign = tmp_path / "other.db"
    conn = sqlite3.connect(foreign)
    conn.execute("CREATE TABLE customers (id INTEGER)")
    conn.commit()
    conn.close()
    result = run("export", "--store", str(foreign))
    assert result.exit_code == 1
    assert "not a wakeful store (it has the tables customers" in result.stderr


def test_a_bad_since_is_refused_with_examples(db: Path) -> None:
    for command in ("stats", "export"):
        result = run(command, "--store", str(db), "--since", "yesterday")
        assert result.exit_code == 2
        assert "'yesterday' is neither a duration nor an ISO time" in result.stderr
        assert "24h" in result.stderr


def test_an_unwritable_output_is_reported(db: Path, tmp_path: Path) -> None:
    result = run("export", "--store", str(db), "-o", str(tmp_path / "no" / "such" / "x.jsonl"))
    assert result.exit_code == 1
    assert "Cannot write the export to" in result.stderr


def test_parse_since_reads_durations_and_iso_times() -> None:
    now = datetime(2025, 6, 2, 12, 0, tzinfo=UTC)
    assert parse_since("24h", now) == now - timedelta(days=1)
    assert parse_since("30m", now) == now - timedelta(minutes=30)
    assert parse_since("1.5d", now) == now - timedelta(hours=36)
    assert parse_since("2w", now) == now - timedelta(weeks=2)
    assert parse_since("2025-06-01", now) == datetime(2025, 6, 1, tzinfo=UTC)
    assert parse_since("2025-06-01T09:00+02:00", now) == datetime(2025, 6, 1, 7, tzinfo=UTC)
    with pytest.raises(typer.BadParameter, match="'5 parsecs' is neither"):
        parse_since("5 parsecs", now)
