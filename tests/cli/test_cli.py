"""The `wakeful` command line against real files, real stores and real processes.

Commands run in-process through typer's CliRunner where the process itself does not matter, and
as subprocesses where it does: `wakeful run` talking to a local OpenAI-compatible server over
HTTP, and `wakeful events tail --follow` that only Ctrl-C ends.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream
from typer.testing import CliRunner, Result

from models.wire_servers import (
    WireServer,
    serve_wire,
    subprocess_env,
    text_reply,
    tool_call_reply,
)
from wakeful.channels.timers import TimerRecord
from wakeful.cli.app import app
from wakeful.cli.run import NO_MODEL_HELP
from wakeful.config import DEFAULT_CONFIG_TOML, load_config
from wakeful.events import Event, Source, user_input
from wakeful.messages import ToolMessage
from wakeful.store.sqlite import EventStatus, Store
from wakeful.tools.tasks import TaskRecord

T0 = datetime(2025, 6, 2, 7, 0, tzinfo=UTC)
NOW = datetime.now(UTC)
LONG_OUTPUT = "line one\n" + "x" * 400


def cli(*args: str, input: str | None = None) -> Result:
    """Run the CLI in-process; a crash raises instead of passing as exit code 1."""
    return CliRunner().invoke(
        app, list(args), input=input, env={"COLUMNS": "200"}, catch_exceptions=False
    )


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines()]


# --- a store a runtime left behind ---------------------------------------------------------------


def task(task_id: str, state: str, *, session: str = "main", **fields: Any) -> TaskRecord:
    values: dict[str, Any] = {
        "id": task_id,
        "session": session,
        "tool": "run_shell",
        "call_id": f"call_{task_id}",
        "description": "make test",
        "state": state,
        "background": True,
        "started_at": T0,
    }
    return TaskRecord(**(values | fields))


EVENTS: list[tuple[Event, EventStatus]] = [
    (user_input("hello", session="main"), "consumed"),
    (
        Event(
            kind="tool.result",
            source=Source(type="tool", id="task_done01"),
            content=LONG_OUTPUT,
            context={"task_id": "task_done01"},
        ),
        "pending",
    ),
    (user_input("in the other session", session="work"), "consumed"),
    (
        Event(
            kind="timer.trigger",
            source=Source(type="system", id="tmr_hourly"),
            content={"note": "check the build"},
        ),
        "pending",
    ),
]
TASKS = [
    task(
        "task_run01",
        "running",
        tool="build",
        description="build the docs",
        percent=40.0,
        started_at=NOW - timedelta(seconds=90),
    ),
    task("task_done01", "completed", ended_at=T0 + timedelta(seconds=12.5), result="ok"),
    task(
        "task_lost01",
        "lost",
        session="work",
        description="sleep 600",
        ended_at=T0 + timedelta(hours=2, minutes=3),
    ),
]
NEXT_HOUR = datetime(2031, 3, 4, 10, 0, tzinfo=UTC)
TIMERS = [
    TimerRecord(
        id="tmr_hourly",
        session="main",
        note="check the build",
        kind="every",
        next_fire=NEXT_HOUR,
        every_seconds=3600,
        anchor=T0,
        created_at=T0,
    ),
    TimerRecord(
        id="tmr_friday",
        session="work",
        note="weekly report",
        kind="cron",
        next_fire=datetime(2031, 3, 7, 8, 0, tzinfo=UTC),
        cron="0 9 * * 5",
        timezone="Europe/Paris",
        missed="skip",
        created_at=T0,
    ),
    TimerRecord(
        id="tmr_fired",
        session="main",
        note="call Ann",
        kind="once",
        next_fire=None,
        active=False,
        created_at=T0,
        last_fired_at=T0,
        fire_count=1,
    ),
]


def write_store(path: Path) -> None:
    async def fill() -> None:
        async with await Store.open(path) as store:
            for event, status in EVENTS:
                await store.add_event(event, status)
            for record in TASKS:
                await store.save_task(record)
            await store.save_timers(TIMERS)

    anyio.run(fill)


@pytest.fixture(scope="module")
def store_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("template") / "wakeful.db"
    write_store(path)
    return path


@pytest.fixture
def db(store_template: Path, tmp_path: Path) -> Path:
    """A copy of a stopped runtime's store (events, tasks, timers), closed and checkpointed."""
    path = tmp_path / "wakeful.db"
    path.write_bytes(store_template.read_bytes())
    return path


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.chdir(tmp_path)
    yield tmp_path


# --- events tail ---------------------------------------------------------------------------------


def test_events_tail_shows_the_latest_events_oldest_first_in_a_table(db: Path) -> None:
    result = cli("events", "tail", "--db", str(db))

    assert result.exit_code == 0, result.output
    header, *rows = result.stdout.splitlines()
    assert header.split() == ["time", "kind", "source", "session", "status", "content"]
    assert [row.split()[2] for row in rows] == [
        "user.input",
        "tool.result",
        "user.input",
        "timer.trigger",
    ]
    first = rows[0].split()
    assert first[0] + " " + first[1] == EVENTS[0][0].ts.astimezone().strftime("%Y-%m-%d %H:%M:%S")
    assert first[3:] == ["user:user", "main", "consumed", "hello"]
    # Long content is put on one line and shortened; structured content shows as JSON.
    assert "tool:task_done01" in rows[1] and "pending" in rows[1]
    assert "line one xxxx" in rows[1] and rows[1].endswith("…") and len(rows[1]) <= 200
    assert rows[3].rstrip().endswith('{"note": "check the build"}')


def test_events_tail_json_gives_each_event_with_its_status(db: Path) -> None:
    result = cli("events", "tail", "--db", str(db), "--json", "--limit", "3")

    assert result.exit_code == 0, result.output
    lines = json_lines(result.stdout)
    assert [(line["status"], line["event"]["kind"]) for line in lines] == [
        ("pending", "tool.result"),
        ("consumed", "user.input"),
        ("pending", "timer.trigger"),
    ]
    assert [line["rowid"] for line in lines] == [2, 3, 4]
    assert Event.from_dict(lines[0]["event"]) == EVENTS[1][0]  # nothing shortened


def test_events_tail_filters_by_session(db: Path) -> None:
    result = cli("events", "tail", "--db", str(db), "--json", "--session", "work")

    assert [line["event"]["content"] for line in json_lines(result.stdout)] == [
        "in the other session"
    ]
    empty = cli("events", "tail", "--db", str(db), "--session", "nobody")
    assert empty.exit_code == 0
    assert empty.stdout == f"No events of session 'nobody' in {db} yet.\n"


def test_events_tail_finds_the_store_through_the_config_file(db: Path, tmp_path: Path) -> None:
    (tmp_path / "state").mkdir()
    db.rename(tmp_path / "state" / "agent.db")
    config = tmp_path / "wakeful.toml"
    # A relative store path is relative to the configuration file, not to the current directory.
    config.write_text('[store]\npath = "state/agent.db"\n', encoding="utf-8")

    result = cli("events", "tail", "--config", str(config), "--json")

    assert result.exit_code == 0, result.output
    assert len(json_lines(result.stdout)) == len(EVENTS)


def test_without_options_the_store_of_wakeful_toml_in_the_current_directory_is_read(
    in_tmp: Path, db: Path
) -> None:
    missing = cli("tasks")
    assert missing.exit_code == 1
    assert "There is no wakeful store at .wakeful/wakeful.db" in missing.stderr

    (in_tmp / ".wakeful").mkdir()
    db.rename(in_tmp / ".wakeful" / "wakeful.db")
    assert cli("tasks", "--json").exit_code == 0


@pytest.mark.parametrize("command", [["events", "tail"], ["tasks"], ["timers"]])
def test_a_missing_store_says_the_runtime_has_not_run_there(
    command: list[str], tmp_path: Path
) -> None:
    path = tmp_path / "nowhere" / "wakeful.db"

    result = cli(*command, "--db", str(path))

    assert result.exit_code == 1
    assert f"There is no wakeful store at {path}: the runtime has not run yet" in result.stderr
    assert "`wakeful run`" in result.stderr
    assert not path.parent.exists()  # reading never creates anything


@pytest.mark.parametrize("command", [["events", "tail"], ["tasks"], ["timers"]])
def test_a_corrupt_store_is_reported_and_left_untouched(command: list[str], tmp_path: Path) -> None:
    path = tmp_path / "wakeful.db"
    garbage = b"this is not a database, it is a shopping list\n" * 100
    path.write_bytes(garbage)

    result = cli(*command, "--db", str(path))

    assert result.exit_code == 1
    assert f"{path} is not a readable wakeful store" in result.stderr
    assert "Nothing in it was changed" in result.stderr
    assert path.read_bytes() == garbage
    assert sorted(p.name for p in tmp_path.iterdir()) == ["wakeful.db"]


def test_a_foreign_sqlite_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE recipes (name TEXT)")
    conn.close()
    before = path.read_bytes()

    result = cli("timers", "--db", str(path))

    assert result.exit_code == 1
    assert "is a SQLite database but not a wakeful store (it has the tables recipes" in (
        result.stderr
    )
    assert path.read_bytes() == before


def test_a_damaged_row_is_reported_with_the_store_error(db: Path) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE tasks SET data = '{\"id\": \"task_run01\"}' WHERE id = 'task_run01'")
    conn.close()

    result = cli("tasks", "--db", str(db))

    assert result.exit_code == 1
    assert f"The task task_run01 stored in {db} cannot be read" in result.stderr


def test_config_and_db_together_are_refused(db: Path, tmp_path: Path) -> None:
    result = cli("tasks", "--db", str(db), "--config", str(tmp_path / "wakeful.toml"))

    assert result.exit_code == 2
    assert "Give either --config" in result.stderr and "not both" in result.stderr


def test_a_named_config_file_that_does_not_exist_is_an_error(tmp_path: Path) -> None:
    result = cli("events", "tail", "--config", str(tmp_path / "wakefull.toml"))

    assert result.exit_code == 1
    assert f"There is no configuration file at {tmp_path / 'wakefull.toml'}" in result.stderr


def test_a_broken_config_file_is_reported_by_the_inspection_commands(tmp_path: Path) -> None:
    config = tmp_path / "wakeful.toml"
    config.write_text("[store]\npath = 42\n", encoding="utf-8")

    result = cli("timers", "--config", str(config))

    assert result.exit_code == 1
    assert f"{config} has invalid settings: `store.path`" in result.stderr


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        (["events", "tail", "--lines", "3"], "No such option: --lines"),
        (["events", "tail", "--limit", "0"], "Invalid value for '--limit'"),
        (["events", "tail", "--limit", "many"], "Invalid value for '--limit'"),
        (["events", "head"], "No such command 'head'"),
        (["tasks", "--state", "lost"], "No such option: --state"),
        (["timers", "--active"], "No such option: --active"),
        (["tasks", "extra"], "unexpected extra argument"),
        (["run", "--model", "gpt"], "No such option: --model"),
        (["init", "--overwrite"], "No such option: --overwrite"),
        (["frobnicate"], "No such command 'frobnicate'"),
    ],
)
def test_bad_options_are_usage_errors(args: list[str], complaint: str) -> None:
    result = cli(*args)

    assert result.exit_code == 2
    assert complaint in result.stderr


@pytest.mark.parametrize("command", [["events", "tail"], ["tasks"], ["timers"], ["run"], ["init"]])
def test_every_command_explains_its_options(command: list[str]) -> None:
    result = cli(*command, "--help")

    assert result.exit_code == 0
    assert "--help" in result.stdout
    if command[0] != "init":
        assert "--config" in result.stdout
    if command[0] in ("events", "tasks", "timers"):
        assert "(default: wakeful.toml)" in result.stdout and "--json" in result.stdout


def test_a_directory_given_as_the_store_is_a_usage_error(tmp_path: Path) -> None:
    result = cli("events", "tail", "--db", str(tmp_path))

    assert result.exit_code == 2
    assert "is a directory" in result.stderr


async def read_line(stdout: BufferedByteReceiveStream) -> str:
    with anyio.fail_after(10):
        return (await stdout.receive_until(b"\n", 1_000_000)).decode()


@pytest.mark.anyio
@pytest.mark.parametrize("as_json", [True, False], ids=["json", "table"])
async def test_events_tail_follow_prints_new_events_until_ctrl_c(db: Path, as_json: bool) -> None:
    # `env --default-signal=INT`: Ctrl-C must reach it even when the test runner was started
    # with SIGINT ignored (`nohup`, a background job), which children inherit.
    command = ["env", "--default-signal=INT", sys.executable, "-m", "wakeful", "events", "tail"]
    command += ["--db", str(db), "--follow"]
    command += ["--limit", "1", *(["--json"] if as_json else [])]
    env = os.environ | {"COLUMNS": "200"}
    async with await anyio.open_process(command, env=env) as process:
        assert process.stdout is not None and process.stderr is not None
        try:
            stdout = BufferedByteReceiveStream(process.stdout)
            first = [await read_line(stdout) for _ in range(1 if as_json else 2)]
            # A runtime writes to the store while the follower reads it.
            async with await Store.open(db) as store:
                await store.add_event(user_input("are you there?"))
                await store.add_event(user_input("hello from work", session="work"))
            new = [await read_line(stdout), await read_line(stdout)]
            process.send_signal(signal.SIGINT)
            with anyio.fail_after(10):
                code = await process.wait()
        finally:
            if process.returncode is None:
                process.kill()
        errors = (await process.stderr.receive()).decode() if code else ""
    assert code == 0, errors

    if as_json:
        assert json_lines("\n".join(first))[0]["event"]["kind"] == "timer.trigger"
        assert [line["event"]["content"] for line in json_lines("\n".join(new))] == [
            "are you there?",
            "hello from work",
        ]
        assert [line["rowid"] for line in json_lines("\n".join(new))] == [5, 6]
    else:
        assert first[0].split()[:2] == ["time", "kind"]
        assert "timer.trigger" in first[1]
        # New rows line up under the first table, without a second header.
        assert new[0].split()[2:] == [
            "user.input",
            "user:user",
            "main",
            "pending",
            "are",
            "you",
            "there?",
        ]
        assert new[1].split()[4:] == ["work", "pending", "hello", "from", "work"]
        assert new[0].index("user.input") == first[1].index("timer.trigger")


# --- tasks ---------------------------------------------------------------------------------------


def test_tasks_shows_every_stored_task_lost_ones_included(db: Path) -> None:
    result = cli("tasks", "--db", str(db))

    assert result.exit_code == 0, result.output
    header, *rows = result.stdout.splitlines()
    assert header.split() == ["id", "session", "tool", "state", "percent", "runtime", "description"]
    running, done, lost = (row.split() for row in rows)
    assert running[:5] == ["task_run01", "main", "build", "running", "40%"]
    # Started 90 s before this module was imported: at least a minute ago, however slow the run.
    elapsed_minutes = int(((datetime.now(UTC) - NOW).total_seconds() + 90) // 60)
    assert running[5] in (f"{elapsed_minutes - 1}m", f"{elapsed_minutes}m")
    assert running[7:] == ["build", "the", "docs"]
    assert done == ["task_done01", "main", "run_shell", "completed", "12.5s", "make", "test"]
    assert lost == ["task_lost01", "work", "run_shell", "lost", "2h", "03m", "sleep", "600"]


def test_tasks_json_and_session_filter(db: Path) -> None:
    result = cli("tasks", "--db", str(db), "--json", "--session", "work")

    assert result.exit_code == 0, result.output
    [lost] = json_lines(result.stdout)
    assert lost["id"] == "task_lost01" and lost["state"] == "lost"
    assert lost["runtime_seconds"] == 7380.0
    assert TaskRecord.from_dict(lost) == TASKS[2]
    assert cli("tasks", "--db", str(db), "--session", "nobody").stdout.startswith(
        "No tasks of session 'nobody'"
    )


# --- timers --------------------------------------------------------------------------------------


def test_timers_lists_the_active_ones_with_local_and_utc_times(db: Path) -> None:
    result = cli("timers", "--db", str(db))

    assert result.exit_code == 0, result.output
    header, *lines = result.stdout.splitlines()
    assert header.split() == ["id", "session", "schedule", "next", "fire", "missed", "note"]
    hourly, hourly_utc, friday, friday_utc = lines
    local = NEXT_HOUR.astimezone().strftime("%Y-%m-%d %H:%M")
    assert hourly.split()[:4] == ["tmr_hourly", "main", "every", "1h"]
    assert local in hourly and hourly.split()[-4:] == ["fire_once", "check", "the", "build"]
    assert hourly_utc.strip() == "2031-03-04 10:00 UTC"
    assert friday.startswith("tmr_friday") and "cron '0 9 * * 5' in Europe/Paris" in friday
    assert " skip " in friday and friday_utc.strip() == "2031-03-07 08:00 UTC"
    assert "call Ann" not in result.stdout


def test_timers_all_includes_finished_ones_and_json_keeps_everything(db: Path) -> None:
    table = cli("timers", "--db", str(db), "--all", "--session", "main")
    assert table.exit_code == 0, table.output
    header, hourly, _, fired = table.stdout.splitlines()
    assert header.split()[:3] == ["id", "session", "state"]
    assert hourly.split()[:3] == ["tmr_hourly", "main", "active"]
    assert fired.split() == ["tmr_fired", "main", "done", "once", "—", "fire_once", "call", "Ann"]

    lines = json_lines(cli("timers", "--db", str(db), "--all", "--json").stdout)
    assert [line["id"] for line in lines] == ["tmr_hourly", "tmr_friday", "tmr_fired"]
    assert lines[1]["schedule"] == "cron '0 9 * * 5' in Europe/Paris"
    assert lines[0]["next_fire"] == "2031-03-04T10:00:00+00:00"
    assert datetime.fromisoformat(lines[0]["next_fire_local"]) == NEXT_HOUR
    assert lines[2]["next_fire"] is None and lines[2]["active"] is False
    assert TimerRecord.from_dict(lines[2]) == TIMERS[2]


def test_no_active_timers_is_said_plainly(db: Path) -> None:
    result = cli("timers", "--db", str(db), "--session", "nobody")

    assert result.exit_code == 0
    assert result.stdout == f"No active timers of session 'nobody' in {db}.\n"


# --- init ----------------------------------------------------------------------------------------


def test_init_writes_the_commented_default_which_loads_and_runs_to_the_guidance(
    in_tmp: Path,
) -> None:
    result = cli("init")

    assert result.exit_code == 0, result.output
    written = in_tmp / "wakeful.toml"
    assert written.read_text(encoding="utf-8") == DEFAULT_CONFIG_TOML
    config = load_config(written)
    assert config.model is None
    assert config.store.path == in_tmp / ".wakeful" / "wakeful.db"

    run = cli("run")
    assert run.exit_code == 2
    assert run.stderr == NO_MODEL_HELP.format(path="wakeful.toml") + "\n"
    assert not (in_tmp / ".wakeful").exists()  # nothing was started


def test_init_refuses_to_overwrite_without_force(tmp_path: Path) -> None:
    path = tmp_path / "mine.toml"
    path.write_text("# my settings\n", encoding="utf-8")

    refused = cli("init", "--path", str(path))
    assert refused.exit_code == 1
    assert f"{path} already exists; pass --force to overwrite it" in refused.stderr
    assert path.read_text(encoding="utf-8") == "# my settings\n"

    forced = cli("init", "--path", str(path), "--force")
    assert forced.exit_code == 0
    assert path.read_text(encoding="utf-8") == DEFAULT_CONFIG_TOML


def test_init_print_writes_nothing(in_tmp: Path) -> None:
    result = cli("init", "--print")

    assert result.exit_code == 0
    assert result.stdout == DEFAULT_CONFIG_TOML
    assert list(in_tmp.iterdir()) == []


@pytest.mark.parametrize(
    ("where", "complaint"),
    [
        (lambda tmp: tmp, "is a directory. Give --path a file name"),
        (lambda tmp: tmp / "missing" / "wakeful.toml", "Cannot write"),
    ],
    ids=["directory", "missing-parent"],
)
def test_init_reports_a_path_it_cannot_write(
    tmp_path: Path, where: Callable[[Path], Path], complaint: str
) -> None:
    result = cli("init", "--path", str(where(tmp_path)), "--force")

    assert result.exit_code == 1
    assert complaint in result.stderr


# --- run: configuration errors -------------------------------------------------------------------


def test_run_without_a_config_file_gives_the_guidance(tmp_path: Path) -> None:
    config = tmp_path / "absent.toml"

    result = cli("run", "--config", str(config))

    assert result.exit_code == 2
    assert f"Configure one in {config} (run `wakeful init` to create it)" in result.stderr
    assert "wakeful demo async" in result.stderr


@pytest.mark.parametrize(
    ("content", "complaint"),
    [
        (b'[model\nname = "x"\n', "is not valid TOML"),
        (b'[model]\nname = "x"\nnmae = "y"\n', "`model.nmae`: Extra inputs are not permitted"),
        (b'[model]\nname = "x"\ntimeout_seconds = "fast"\n', "`model.timeout_seconds`"),
        (b"[agent]\nmax_model_requests_per_activation = 0\n", "greater than or equal to 1"),
        (b'[model]\nprovider = "mistral"\nname = "x"\n', "`model.provider`"),
        (b'[model]\nname = "caf\xe9"\n', "is not UTF-8 text"),
    ],
    ids=["toml", "unknown-key", "wrong-type", "out-of-range", "unknown-provider", "not-utf8"],
)
def test_run_with_a_broken_config_names_the_file_and_the_problem(
    tmp_path: Path, content: bytes, complaint: str
) -> None:
    config = tmp_path / "wakeful.toml"
    config.write_bytes(content)

    result = cli("run", "--config", str(config), input="")

    assert result.exit_code == 1
    assert result.stderr.startswith(f"error: {config} ")
    assert complaint in result.stderr
    assert not (tmp_path / ".wakeful").exists()


def test_run_with_a_missing_api_key_names_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("WAKEFUL_TEST_KEY", raising=False)
    config = tmp_path / "wakeful.toml"
    config.write_text(
        '[model]\nprovider = "anthropic"\nname = "claude"\napi_key_env = "WAKEFUL_TEST_KEY"\n',
        encoding="utf-8",
    )

    result = cli("run", "--config", str(config), input="")

    assert result.exit_code == 1
    assert "reads its API key from $WAKEFUL_TEST_KEY, which is not set" in result.stderr
    assert "export WAKEFUL_TEST_KEY=..." in result.stderr


def write_config(tmp_path: Path, base_url: str, store: str = ".wakeful/wakeful.db") -> Path:
    config = tmp_path / "wakeful.toml"
    config.write_text(
        f'[model]\nprovider = "openai"\nname = "test"\nbase_url = "{base_url}"\n'
        f'max_retries = 0\ntimeout_seconds = 5\n\n[store]\npath = "{store}"\n',
        encoding="utf-8",
    )
    return config


def test_run_on_a_corrupt_store_reports_it_and_leaves_it_alone(tmp_path: Path) -> None:
    config = write_config(tmp_path, "http://127.0.0.1:9/v1", store="broken.db")
    garbage = b"\x00\x01 not sqlite " * 64
    (tmp_path / "broken.db").write_bytes(garbage)

    result = cli("run", "--config", str(config), input="")

    assert result.exit_code == 1
    assert f"{tmp_path / 'broken.db'} is not a SQLite database" in result.stderr
    assert (tmp_path / "broken.db").read_bytes() == garbage


def test_run_with_nothing_to_say_creates_the_store_and_exits(tmp_path: Path) -> None:
    config = write_config(tmp_path, "http://127.0.0.1:9/v1")

    result = cli("run", "--config", str(config), input="")

    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    listed = cli("events", "tail", "--config", str(config))
    assert listed.exit_code == 0
    assert listed.stdout.startswith("No events in ")


# --- run, end to end -----------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("quiet", [False, True])
async def test_run_shows_an_answer_the_model_gave_in_plain_text(
    tmp_path: Path, quiet: bool
) -> None:
    # A model that answers without calling reply_to_user, as small local models often do.
    async with serve_wire(WireServer()) as server:
        server.script(text_reply("The answer is [42]."))
        config = write_config(tmp_path, f"{server.url}/v1")
        command = [sys.executable, "-m", "wakeful", "run", "--config", str(config)]
        command += ["--quiet"] if quiet else []
        with anyio.fail_after(30):
            finished = await anyio.run_process(
                command, input=b"what is it?\n", cwd=tmp_path, env=subprocess_env(), check=False
            )

    assert finished.returncode == 0, finished.stderr.decode()
    assert finished.stdout.decode() == (
        "wakeful (plain text, not sent with reply_to_user)> The answer is [42].\n"
    )


@pytest.mark.anyio
async def test_run_chats_with_a_local_openai_compatible_server_and_keeps_the_trajectory(
    tmp_path: Path,
) -> None:
    async with serve_wire(WireServer()) as server:
        server.script(tool_call_reply("reply_to_user", text="Hello from the wire!"), text_reply(""))
        config = write_config(tmp_path, f"{server.url}/v1")
        command = [sys.executable, "-m", "wakeful", "run", "--config", str(config)]
        with anyio.fail_after(30):
            finished = await anyio.run_process(
                command, input=b"hello\n", cwd=tmp_path, env=subprocess_env(), check=False
            )
        requests = server.requests

    stdout, stderr = finished.stdout.decode(), finished.stderr.decode()
    assert finished.returncode == 0, stderr
    assert "wakeful> Hello from the wire!" in stdout
    assert stderr == ""
    assert len(requests) == 2
    assert requests[0].path == "/v1/chat/completions"
    sent = requests[0].body["messages"]
    assert [m["role"] for m in sent] == ["system", "user"] and sent[1]["content"] == "hello"
    assert "reply_to_user" in [t["function"]["name"] for t in requests[0].body["tools"]]

    with Store.read_only(tmp_path / ".wakeful" / "wakeful.db") as reader:
        trajectory = reader.load_trajectory("main")
    assert [m.role for m in trajectory] == ["system", "user", "assistant", "tool", "assistant"]
    assert trajectory[1].content == "hello"
    assert isinstance(trajectory[3], ToolMessage) and trajectory[3].content == "sent"

    events = json_lines(cli("events", "tail", "--config", str(config), "--json").stdout)
    assert [(e["status"], e["event"]["kind"], e["event"]["content"]) for e in events] == [
        ("consumed", "user.input", "hello")
    ]
