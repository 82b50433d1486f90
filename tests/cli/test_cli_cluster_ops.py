"""Operating a cluster from the command line, on a real PostgreSQL: `wakeful console` and `wakeful
mcp serve collaboration` take `--store` as `wakeful run` does (same meaning, same refusals), and
`wakeful workers` hides long-gone workers (saying how many; `--all` shows them) and prunes them
with `--prune [--older-than 1d]`, refusing bad input with the fix."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import httpx2
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream
from typer.testing import CliRunner, Result

from wakeful.cli.app import app

psycopg = pytest.importorskip("psycopg", reason="psycopg is missing: pip install -e '.[postgres]'")

from wakeful.events import user_input  # noqa: E402
from wakeful.store.postgres import PostgresStore  # noqa: E402

CONFIG = '[model]\nprovider = "openai"\nname = "test"\nbase_url = "http://127.0.0.1:9/v1"\n'
RUNTIME_COMMANDS = [["run"], ["console"], ["mcp", "serve", "collaboration"]]


def wakeful(*args: str) -> Result:
    return CliRunner().invoke(app, list(args), input="", env={"COLUMNS": "200"})


def sql(url: str, query: str) -> list[tuple[object, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(query.encode()).fetchall()


@pytest.mark.parametrize("command", RUNTIME_COMMANDS, ids=" ".join)
@pytest.mark.parametrize(
    ("store", "said"),
    [
        ("mysql://db.example/jobs", "is not a PostgreSQL URL: its scheme is 'mysql'"),
        ("postgresql://ops:s3cret@db.example/jobs", "names a password"),
    ],
)
def test_each_runtime_command_refuses_a_bad_store_as_run_does(
    command: list[str], store: str, said: str, tmp_path: Path
) -> None:
    config = tmp_path / "wakeful.toml"
    config.write_text(CONFIG, encoding="utf-8")
    result = wakeful(*command, "--config", str(config), "--store", store)
    assert result.exit_code == 1, result.output
    assert said in result.stderr
    assert "s3cret" not in result.output
    reference = wakeful("run", "--config", str(config), "--store", store)
    assert result.stderr == reference.stderr


def test_the_execution_server_refuses_a_database_for_its_own_file(tmp_path: Path) -> None:
    result = wakeful(
        "mcp", "serve", "execution", "--root", str(tmp_path), "--store", "postgresql://db/jobs"
    )
    assert result.exit_code == 2
    assert "cannot use a PostgreSQL database" in result.stderr
    assert "--store PATH" in result.stderr
    assert not list(tmp_path.iterdir())  # no file named after the URL


@pytest.mark.anyio
@pytest.mark.slow
async def test_console_runs_on_the_shared_database(postgres_url: str, tmp_path: Path) -> None:
    (tmp_path / "wakeful.toml").write_text(
        CONFIG + '[web]\naddress = "127.0.0.1:0"\n[store]\nworker_name = "web-1"\n',
        encoding="utf-8",
    )
    command = ["env", "--default-signal=INT", sys.executable, "-m", "wakeful", "console"]
    command += ["--store", postgres_url]
    env = os.environ | {"COLUMNS": "300"}
    env.pop("WAKEFUL_WEB_TOKEN", None)
    async with await anyio.open_process(command, env=env, cwd=tmp_path) as process:
        assert process.stdout is not None
        try:
            stdout = BufferedByteReceiveStream(process.stdout)
            with anyio.fail_after(30):
                line = (await stdout.receive_until(b"\n", 4096)).decode()
            found = re.fullmatch(r"Web console: (http://127\.0\.0\.1:\d+)/\?token=(\S+)", line)
            assert found is not None, line
            base, token = found.groups()
            async with httpx2.AsyncClient(base_url=base, follow_redirects=True) as client:
                await client.get(f"/?token={token}")
                state = await client.get("/api/state")
                assert state.status_code == 200 and state.json()["audit"] == {}
            # The console's runtime is a worker of the cluster, on the database.
            [(worker, stopped)] = sql(postgres_url, "SELECT id, stopped_at FROM workers")
            assert (worker, stopped) == ("web-1", None)
            process.send_signal(signal.SIGINT)
            with anyio.fail_after(15):
                code = await process.wait()
        finally:
            if process.returncode is None:
                process.kill()
    assert code == 0
    assert not (tmp_path / ".wakeful" / "wakeful.db").exists()  # no SQLite store beside it


@pytest.mark.slow
def test_the_collaboration_server_runs_on_the_shared_database(
    postgres_url: str, tmp_path: Path
) -> None:
    (tmp_path / "wakeful.toml").write_text(
        CONFIG + '[store]\nworker_name = "mcp-1"\n', encoding="utf-8"
    )
    command = [sys.executable, "-m", "wakeful", "mcp", "serve", "collaboration"]
    # stdin at its end: the stdio client is gone, and the server stops once it started.
    done = subprocess.run(
        [*command, "--store", postgres_url],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert sql(postgres_url, "SELECT id, stopped_at IS NOT NULL FROM workers") == [("mcp-1", True)]
    assert not (tmp_path / ".wakeful" / "wakeful.db").exists()


def four_workers(url: str) -> None:
    """live; stopped a minute ago; stopped two hours ago; lapsed three days ago."""

    async def setup() -> None:
        async with await PostgresStore.open(url, pool_size=1) as store:
            for name in ("live", "recent", "hours", "days"):
                await store.register_worker(lease_seconds=60, name=name)

    anyio.run(setup)
    with psycopg.connect(url, autocommit=True) as conn:
        for name, stopped_ago, beat_ago in (
            ("recent", "1 minute", "1 minute"),
            ("hours", "2 hours", "2 hours"),
            ("days", None, "3 days"),
        ):
            conn.execute(
                b"UPDATE workers SET heartbeat_at = clock_timestamp() - %s::interval, "
                b"stopped_at = clock_timestamp() - %s::interval WHERE id = %s",
                (beat_ago, stopped_ago, name),
            )


def test_the_list_hides_long_gone_workers_and_says_how_many(postgres_url: str) -> None:
    four_workers(postgres_url)
    result = wakeful("workers", "--store", postgres_url)
    assert result.exit_code == 0, result.output
    listed = [line.split()[0] for line in result.output.splitlines()[1:] if line.strip()]
    assert listed[:2] == ["live", "recent"]
    assert "2 worker(s) stopped or lapsed more than an hour ago not shown" in result.output
    assert "--all lists them" in result.output and "--prune" in result.output
    everyone = wakeful("workers", "--store", postgres_url, "--all", "--json")
    states = {w["worker"]: w["state"] for w in map(json.loads, everyone.output.splitlines())}
    assert states == {"live": "live", "recent": "stopped", "hours": "stopped", "days": "lapsed"}
    recent = wakeful("workers", "--store", postgres_url, "--json")
    assert [json.loads(line)["worker"] for line in recent.output.splitlines()] == [
        "live",
        "recent",
    ]


def test_prune_deletes_the_old_rows_only(postgres_url: str) -> None:
    four_workers(postgres_url)
    result = wakeful("workers", "--store", postgres_url, "--prune")
    assert result.exit_code == 0, result.output
    assert "Removed 1 worker(s) stopped or lapsed more than 1d ago: days." in result.output
    result = wakeful("workers", "--store", postgres_url, "--prune", "--older-than", "1h", "--json")
    assert json.loads(result.output) == {"removed": ["hours"], "kept": []}
    left = wakeful("workers", "--store", postgres_url, "--all", "--json")
    assert [json.loads(line)["worker"] for line in left.output.splitlines()] == ["live", "recent"]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--prune", "--older-than", "banana"], "'banana' is not a duration"),
        (["--prune", "--older-than", "-1d"], "'-1d' is not a duration"),
        (["--older-than", "1d"], "--older-than goes with --prune"),
        (["--prune", "--all"], "leave out --sessions and --all"),
    ],
)
def test_bad_prune_input_is_refused_with_the_fix(
    postgres_url: str, args: list[str], said: str
) -> None:
    four_workers(postgres_url)
    result = wakeful("workers", "--store", postgres_url, *args)
    assert result.exit_code == 2
    assert said in " ".join(result.output.split())
    assert len(sql(postgres_url, "SELECT id FROM workers")) == 4  # nothing deleted


@pytest.mark.anyio
@pytest.mark.slow
async def test_sigterm_stops_a_worker_cleanly_and_hands_its_sessions_over_at_once(
    postgres_url: str, tmp_path: Path
) -> None:
    """What `docker stop`, systemd and Kubernetes send: the worker ends as its end would, exit
    0, marked stopped, its session released at once (not after the lease time)."""
    (tmp_path / "wakeful.toml").write_text(
        CONFIG + '[store]\nworker_name = "run-1"\nlease_seconds = 60\n', encoding="utf-8"
    )
    async with await PostgresStore.open(postgres_url) as store:
        await store.events.add(user_input("hello", session="main"))
    command = [sys.executable, "-m", "wakeful", "run", "--store", postgres_url]
    command += ["--web", "--web-address", "127.0.0.1:0"]
    env = os.environ | {"COLUMNS": "300"}
    async with await anyio.open_process(
        command, env=env, cwd=tmp_path, stdin=subprocess.DEVNULL
    ) as process:
        try:
            with anyio.fail_after(30):
                owners = "SELECT owner FROM session_leases"
                while sql(postgres_url, owners) != [("run-1",)]:  # noqa: ASYNC110
                    await anyio.sleep(0.1)  # the worker takes the session with its event
            process.send_signal(signal.SIGTERM)
            with anyio.fail_after(15):
                code = await process.wait()
        finally:
            if process.returncode is None:
                process.kill()
    assert code == 0
    assert sql(postgres_url, "SELECT owner FROM session_leases") == [(None,)]
    assert sql(postgres_url, "SELECT stopped_at IS NOT NULL FROM workers") == [(True,)]
