"""`wakeful mcp list`, through the Typer app it registers on, against real stdio servers."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
from typer import Typer
from typer.testing import CliRunner

from wakeful.cli.mcp_list import register
from wakeful.mcp.client import MCPToolset
from wakeful.mcp.config import MCPServerConfig
from wakeful.mcp.pins import ToolPins

SERVERS = Path(__file__).parent.parent / "mcp_servers"
runner = CliRunner()


def app() -> Typer:
    typer_app = Typer()
    register(typer_app)

    @typer_app.callback()
    def group() -> None:
        """Keep `list` a subcommand, as under `wakeful mcp`."""

    return typer_app


def write_config(tmp_path: Path, *servers: str, extra: str = "") -> Path:
    """A wakeful.toml with the lock file in tmp_path and one [[mcp.servers]] per TOML body."""
    lock = tmp_path / "wakeful.lock.json"
    tables = "".join(f"\n[[mcp.servers]]\n{body}\n" for body in servers)
    path = tmp_path / "wakeful.toml"
    path.write_text(f'[mcp]\nlock_file = "{lock}"\n{extra}{tables}', encoding="utf-8")
    return path


def stdio(name: str, script: str, env: str = "") -> str:
    command = json.dumps([sys.executable, str(SERVERS / script)])
    return f'name = "{name}"\ncommand = {command}\n{env}'


def listed(config: Path, *options: str) -> tuple[int, str]:
    # Wide enough that no table cell wraps.
    result = runner.invoke(
        app(), ["list", "--config", str(config), *options], env={"COLUMNS": "200"}
    )
    return result.exit_code, " ".join(result.output.split())


def test_a_fresh_lock_shows_not_pinned_yet_and_writes_nothing(tmp_path: Path) -> None:
    config = write_config(tmp_path, stdio("weather", "weather.py"), stdio("mailer", "mailer.py"))
    lock = tmp_path / "wakeful.lock.json"
    code, output = listed(config)
    assert code == 0, output
    assert "weather: ready; 2 tool(s)" in output and "mailer: ready; 1 tool(s)" in output
    assert output.count("│ not pinned yet │") == 3
    assert not lock.exists() and not (tmp_path / "wakeful.lock.json.flock").exists()

    # With a lock file that pins another server, the file stays exactly as it was.
    pins = ToolPins(lock)
    pins.pin_first_use("other", [{"name": "t", "description": "T."}])
    pins.save()
    before = lock.read_bytes()
    code, output = listed(config)
    assert code == 0, output
    assert output.count("│ not pinned yet │") == 3
    assert lock.read_bytes() == before


def test_after_a_rug_pull_the_changed_tool_waits_for_approval(tmp_path: Path) -> None:
    counter = tmp_path / "starts"
    config = write_config(
        tmp_path,
        stdio("facts", "rug_pull.py", f'env = {{ WAKEFUL_RUG_PULL_COUNTER = "{counter}" }}'),
    )
    lock = tmp_path / "wakeful.lock.json"
    facts = MCPServerConfig(
        name="facts",
        command=[sys.executable, str(SERVERS / "rug_pull.py")],
        env={"WAKEFUL_RUG_PULL_COUNTER": str(counter)},
    )

    async def first_start() -> None:
        async with MCPToolset([facts], pins=ToolPins(lock)):
            pass

    anyio.run(first_start)  # the benign start, pinned on first use
    before = lock.read_bytes()

    code, output = listed(config, "--json")  # the second start: the tool now carries an attack
    assert code == 0, output
    [server] = json.loads(output)["servers"]
    assert (server["name"], server["state"], server["tool_count"]) == ("facts", "ready", 2)
    tools = {t["name"]: t for t in server["tools"]}
    fact = tools["get_fact_of_the_day"]
    assert (fact["offered"], fact["pin"]) == (False, "changed")
    assert fact["disabled"] == ["waiting for approval", "poisoning"]
    assert tools["crash"] == {"name": "crash", "offered": True, "pin": "pinned", "disabled": []}
    assert lock.read_bytes() == before

    code, output = listed(config)
    assert "changed since pinned, waiting for approval" in output
    assert "waiting for approval, poisoning" in output
    assert lock.read_bytes() == before


def test_json_names_the_lock_file_and_every_server(tmp_path: Path) -> None:
    config = write_config(
        tmp_path,
        stdio("poisoned", "poisoned.py"),
        'name = "later"\ncommand = ["true"]\nenabled = false',
    )
    code, output = listed(config, "--json")
    assert code == 0, output
    data = json.loads(output)
    assert data["lock_file"] == str(tmp_path / "wakeful.lock.json")
    poisoned, later = data["servers"]
    assert {t["name"]: t["disabled"] for t in poisoned["tools"]} == {
        "add": ["poisoning"],
        "multiply": [],
    }
    assert later == {
        "name": "later",
        "state": "not enabled",
        "detail": "enabled = false",
        "tool_count": 0,
        "tools": [],
    }


def test_a_missing_config_is_an_error(tmp_path: Path) -> None:
    code, output = listed(tmp_path / "nowhere.toml")
    assert code == 1
    assert "does not exist" in output and "--config" in output


def test_a_config_without_servers_says_how_to_add_one(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    code, output = listed(config)
    assert code == 0
    assert "No MCP servers are configured" in output and "[[mcp.servers]]" in output
    assert listed(config, "--json") == (0, '{"lock_file": null, "servers": []}')


def test_a_missing_program_fails_that_server_and_exits_1(tmp_path: Path) -> None:
    config = write_config(
        tmp_path,
        stdio("weather", "weather.py"),
        'name = "ghost"\ncommand = ["wakeful-no-such-program"]',
    )
    code, output = listed(config)
    assert code == 1
    assert "weather: ready; 2 tool(s)" in output
    assert "ghost: failed (its command 'wakeful-no-such-program' was not found" in output


def test_an_invalid_config_is_an_error(tmp_path: Path) -> None:
    config = write_config(tmp_path, 'name = "bad name!"\ncommand = ["true"]')
    code, output = listed(config)
    assert code == 1
    assert "invalid settings" in output


def test_a_server_that_does_not_list_in_time_is_unavailable(tmp_path: Path) -> None:
    hang = json.dumps([sys.executable, "-c", "import time; time.sleep(30)"])
    config = write_config(tmp_path, f'name = "hang"\ncommand = {hang}')
    code, output = listed(config, "--timeout", "1")
    assert code == 1
    assert "hang: unavailable (it did not start and list its tools within 1 s" in output
