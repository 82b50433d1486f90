"""`wakeful workers` on a real PostgreSQL: live, stopped and lapsed workers with their sessions and
lease ages, as a table and as JSON; a SQLite store and an unreachable server are refused with
what to do instead."""

from __future__ import annotations

import json
import time
from pathlib import Path

import anyio
import pytest
from typer.testing import CliRunner, Result

from wakeful.cli.app import app

pytest.importorskip("psycopg", reason="psycopg is missing: pip install -e '.[postgres]'")

from wakeful.store.postgres import PostgresStore


def wakeful(*args: str) -> Result:
    return CliRunner().invoke(app, ["workers", *args], env={"COLUMNS": "200"})


def three_workers(url: str) -> None:
    """alpha (live, holding s1 and s2), beta (stopped) and gamma (lapsed, holding s3 once)."""

    async def setup() -> None:
        async with await PostgresStore.open(url, pool_size=2) as store:
            alpha = await store.register_worker(lease_seconds=60, name="alpha")
            assert await alpha.acquire("s1") and await alpha.acquire("s2")
            beta = await store.register_worker(lease_seconds=60, name="beta")
            assert await beta.acquire("s9")
            await beta.stop()
            gamma = await store.register_worker(lease_seconds=0.2, name="gamma")
            assert await gamma.acquire("s3")
            await anyio.sleep(0.3)

    anyio.run(setup)


def test_lists_each_worker_with_its_state_and_sessions(postgres_url: str) -> None:
    three_workers(postgres_url)
    result = wakeful("--store", postgres_url, "--sessions")
    assert result.exit_code == 0, result.output
    rows = {line.split()[0]: line for line in result.output.splitlines() if line.strip()}
    assert "live" in rows["alpha"] and "2: s1, s2" in rows["alpha"]
    assert "stopped" in rows["beta"] and " 0 " in rows["beta"]
    # gamma's lease ran out: it is lapsed and holds nothing any more.
    assert "lapsed" in rows["gamma"]
    assert "alpha" in rows["s1"] and "alpha" in rows["s2"]
    assert "s3" not in rows and "s9" not in rows


def test_json_has_one_worker_per_line(postgres_url: str) -> None:
    three_workers(postgres_url)
    result = wakeful("--store", postgres_url, "--json")
    assert result.exit_code == 0, result.output
    found = [json.loads(line) for line in result.output.splitlines()]
    assert [(w["worker"], w["state"]) for w in found] == [
        ("alpha", "live"),
        ("beta", "stopped"),
        ("gamma", "lapsed"),
    ]
    alpha = found[0]
    assert [s["session"] for s in alpha["sessions"]] == ["s1", "s2"]
    assert all(s["epoch"] == 1 and 0 < s["expires_in_s"] <= 60 for s in alpha["sessions"])
    assert alpha["heartbeat_age_s"] < 60 and found[1]["stopped_at"] is not None


def test_reads_the_database_named_in_the_configuration(postgres_url: str, tmp_path: Path) -> None:
    three_workers(postgres_url)
    config = tmp_path / "wakeful.toml"
    config.write_text(f'[store]\nurl = "{postgres_url}"\n')
    result = wakeful("--config", str(config), "--json")
    assert result.exit_code == 0, result.output
    assert len(result.output.splitlines()) == 3


def test_a_store_without_workers_says_how_to_start_one(postgres_url: str) -> None:
    async def create() -> None:
        async with await PostgresStore.open(postgres_url, pool_size=1):
            pass

    anyio.run(create)
    result = wakeful("--store", postgres_url)
    assert result.exit_code == 0, result.output
    assert "No worker has run" in result.output and "wakeful run --store" in result.output


def test_a_sqlite_store_has_no_workers(tmp_path: Path) -> None:
    result = wakeful("--store", str(tmp_path / "wakeful.db"))
    assert result.exit_code == 2
    assert "workers exist only on a PostgreSQL store" in result.output
    assert "--store postgresql://" in result.output
    config = tmp_path / "wakeful.toml"
    config.write_text(f'[store]\npath = "{tmp_path / "w.db"}"\n')
    result = wakeful("--config", str(config))
    assert result.exit_code == 2
    assert "workers exist only on a PostgreSQL store" in result.output
    assert "[store] url" in result.output


def test_an_unreachable_server_is_named(tmp_path: Path) -> None:
    started = time.monotonic()
    result = wakeful("--store", f"postgresql://wakeful@/jobs?host={tmp_path}/nowhere")
    assert result.exit_code == 1
    assert "Could not connect to the PostgreSQL database 'jobs'" in result.output
    assert "Check that the server runs" in result.output
    assert time.monotonic() - started < 15
