"""`wakeful run` on a PostgreSQL store: `--store postgresql://…` or `[store] url`, a real server
and a real `wakeful run` process answering through a scripted OpenAI-compatible server; and the
store settings that cannot work, refused before anything starts with the fix."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from typer.testing import CliRunner, Result

from models.wire_servers import WireServer, serve_wire, subprocess_env, text_reply, tool_call_reply
from wakeful.cli.app import app
from wakeful.messages import ToolMessage

PASSWORD = "s3cret-never-shown"


def cli(*args: str, input: str | None = None) -> Result:
    """Run the CLI in-process; a crash raises instead of passing as exit code 1."""
    return CliRunner().invoke(
        app, list(args), input=input, env={"COLUMNS": "200"}, catch_exceptions=False
    )


def write_config(tmp_path: Path, base_url: str, store: str = "") -> Path:
    """A wakeful.toml with a model on `base_url` and `store` (TOML lines) under [store]."""
    config = tmp_path / "wakeful.toml"
    config.write_text(
        f'[model]\nprovider = "openai"\nname = "test"\nbase_url = "{base_url}"\n'
        f"max_retries = 0\ntimeout_seconds = 5\n\n[store]\n{store}\n",
        encoding="utf-8",
    )
    return config


@pytest.mark.anyio
@pytest.mark.parametrize("given", ["--store", "[store] url"])
async def test_run_answers_and_leaves_the_trajectory_in_postgres(
    tmp_path: Path, postgres_url: str, given: str
) -> None:
    async with serve_wire(WireServer()) as server:
        server.script(tool_call_reply("reply_to_user", text="Hello from Postgres!"), text_reply(""))
        command = [sys.executable, "-m", "wakeful", "run"]
        if given == "--store":
            config = write_config(tmp_path, f"{server.url}/v1")
            command += ["--config", str(config), "--store", postgres_url]
        else:
            config = write_config(tmp_path, f"{server.url}/v1", f'url = "{postgres_url}"')
            command += ["--config", str(config)]
        with anyio.fail_after(60):
            finished = await anyio.run_process(
                command, input=b"hello\n", cwd=tmp_path, env=subprocess_env(), check=False
            )

    stdout, stderr = finished.stdout.decode(), finished.stderr.decode()
    assert finished.returncode == 0, stderr
    assert "wakeful> Hello from Postgres!" in stdout
    # Nothing went to a SQLite file: the state is in the database.
    assert not (tmp_path / ".wakeful" / "wakeful.db").exists()
    from wakeful.store.postgres import PostgresStore

    async with await PostgresStore.open(postgres_url) as store:
        trajectory = await store.load_trajectory("main")
        events = await store.recent_events()
        sent = await store.messages.list("main")
    assert [m.role for m in trajectory] == ["system", "user", "assistant", "tool", "assistant"]
    assert trajectory[1].content == "hello"
    assert isinstance(trajectory[3], ToolMessage) and trajectory[3].content == "sent"
    assert [(e.status, e.event.kind, e.event.content) for e in events] == [
        ("consumed", "user.input", "hello")
    ]
    assert [m.text for m in sent] == ["Hello from Postgres!"]


def test_store_with_a_file_path_runs_on_that_sqlite_file_over_a_configured_url(
    tmp_path: Path,
) -> None:
    config = write_config(
        tmp_path, "http://127.0.0.1:9/v1", 'url = "postgresql://wakeful@db.invalid/wakeful"'
    )
    elsewhere = tmp_path / "elsewhere" / "state.db"
    result = cli("run", "--config", str(config), "--store", str(elsewhere), input="")
    assert result.exit_code == 0, result.output
    assert elsewhere.exists()


# --- what cannot work is refused before anything starts ----------------------------------------


def test_a_misspelt_scheme_in_store_is_refused_with_the_right_spelling(tmp_path: Path) -> None:
    config = write_config(tmp_path, "http://127.0.0.1:9/v1")
    result = cli("run", "--config", str(config), "--store", "postgresq://wakeful@db/wakeful")
    assert result.exit_code == 1
    assert "--store 'postgresq://wakeful@db/wakeful' is not a PostgreSQL URL" in result.stderr
    assert "postgresql://USER@HOST:PORT/DATABASE" in result.stderr
    assert not (tmp_path / ".wakeful").exists()


def test_a_password_in_store_is_refused_and_never_printed(tmp_path: Path) -> None:
    config = write_config(tmp_path, "http://127.0.0.1:9/v1")
    url = f"postgresql://wakeful:{PASSWORD}@db/wakeful"
    result = cli("run", "--config", str(config), "--store", url)
    assert result.exit_code == 1
    assert "names a password" in result.stderr and "PGPASSWORD" in result.stderr
    assert PASSWORD not in result.output


def test_path_and_url_both_in_the_configuration_are_refused(tmp_path: Path) -> None:
    config = write_config(
        tmp_path,
        "http://127.0.0.1:9/v1",
        'path = "state.db"\nurl = "postgresql://wakeful@db/wakeful"',
    )
    result = cli("run", "--config", str(config), input="")
    assert result.exit_code == 1
    assert f"{config} has invalid settings" in result.stderr
    assert "gives both `path` (a SQLite file) and `url` (a PostgreSQL database)" in result.stderr
    assert not (tmp_path / "state.db").exists()


def test_a_password_in_the_configured_url_is_refused_and_never_printed(tmp_path: Path) -> None:
    config = write_config(
        tmp_path, "http://127.0.0.1:9/v1", f'url = "postgresql://wakeful:{PASSWORD}@db/w"'
    )
    result = cli("run", "--config", str(config), input="")
    assert result.exit_code == 1
    assert "[store] url" in result.stderr and "names a password" in result.stderr
    assert PASSWORD not in result.output


def test_an_unreachable_server_is_a_store_error_naming_the_database(tmp_path: Path) -> None:
    # A socket folder where no server listens: refused at once.
    url = f"postgresql://wakeful@/agents?host={tmp_path}&connect_timeout=2"
    config = write_config(tmp_path, "http://127.0.0.1:9/v1")
    result = cli("run", "--config", str(config), "--store", url, input="")
    assert result.exit_code == 1
    assert "Could not connect to the PostgreSQL database 'agents'" in result.stderr
    assert "Check that the server runs" in result.stderr


def test_without_psycopg_run_says_how_to_install_it(tmp_path: Path) -> None:
    """psycopg made unimportable in a real `wakeful run` process (None in sys.modules)."""
    config = write_config(tmp_path, "http://127.0.0.1:9/v1")
    argv = ["wakeful", "run", "--config", str(config), "--store", "postgresql://w@db/agents"]
    program = (
        "import runpy, sys\n"
        "sys.modules['psycopg'] = None\n"
        f"sys.argv = {argv!r}\n"
        "runpy.run_module('wakeful', run_name='__main__')\n"
    )
    finished = subprocess.run(
        [sys.executable, "-c", program],
        input="",
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=subprocess_env(),
        timeout=60,
        check=False,
    )
    assert finished.returncode == 1, finished.stderr
    assert "needs psycopg" in finished.stderr
    assert "pip install 'wakeful[postgres]'" in finished.stderr
