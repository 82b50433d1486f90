"""MCP trust in the toolset: pins, poisoned and shadowing servers, credentials, against real
stdio servers that reproduce the published attack shapes (tests/mcp_servers)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from typer import Typer
from typer.testing import CliRunner

from tool_services import Events, tool_services
from wakeful.cli.mcp_trust import register
from wakeful.events import SYSTEM_ALERT
from wakeful.mcp.client import MCPToolset
from wakeful.mcp.config import MCPServerConfig
from wakeful.mcp.pins import ToolPins
from wakeful.services import Services
from wakeful.tools.spec import Tool, ToolContext, ToolResult

pytestmark = pytest.mark.anyio

SERVERS = Path(__file__).parent.parent / "mcp_servers"


def server(name: str, script: str, **options: Any) -> MCPServerConfig:
    options.setdefault("restart_initial_delay_seconds", 0.1)
    return MCPServerConfig(name=name, command=[sys.executable, str(SERVERS / script)], **options)


def offered(toolset: MCPToolset) -> dict[str, Tool]:
    return {t.name: t for t in toolset.tools()}


async def run(tool: Tool, services: Services, **arguments: Any) -> ToolResult:
    return await tool.run(arguments, ToolContext("main", "call_1", tool.name, services))


async def until(toolset: MCPToolset, done: Callable[[], bool]) -> None:
    with anyio.fail_after(10):
        while not done():
            await toolset.changed.wait()


def alerts(events: Events) -> list[str]:
    return [e.text for e in events.of_kind(SYSTEM_ALERT)]


def approve(*args: str) -> str:
    app = Typer()
    register(app)
    result = CliRunner().invoke(app, ["approve", *args])
    assert result.exit_code == 0, result.output
    return result.output


async def test_a_poisoned_tool_is_disabled_and_reported_without_its_text() -> None:
    async with (
        tool_services() as (services, events),
        MCPToolset([server("poisoned", "poisoned.py")], emit=events.emit) as toolset,
    ):
        tools = offered(toolset)
        assert "multiply" in tools and "add" not in tools
        assert (await run(tools["multiply"], services, a=6, b=7)).content == "42"
        [disabled] = toolset.disabled()
        assert (disabled.server, disabled.tool) == ("poisoned", "add")
        assert "`wakeful mcp approve poisoned add`" in disabled.reason
        assert toolset.server("poisoned").disabled == ("add",)
        [alert] = events.of_kind(SYSTEM_ALERT)
        assert "The tool 'add' of MCP server 'poisoned' is disabled" in alert.text
        assert "tool poisoning" in alert.text
        # The attacker's words stay out of what the agent reads; the operator gets them.
        assert "id_rsa" not in alert.text and "sidenote" not in alert.text
        assert "id_rsa" in alert.context["evidence"]


async def test_a_trusted_server_is_scanned_but_not_disabled() -> None:
    config = server("poisoned", "poisoned.py", trusted=True)
    async with (
        tool_services() as (_, events),
        MCPToolset([config], emit=events.emit) as toolset,
    ):
        assert "add" in offered(toolset)
        assert toolset.disabled() == []
        [alert] = alerts(events)
        assert "stays enabled because the server is trusted = true" in alert
        assert any(f.tool == "add" and f.severity == "high" for f in toolset.findings)


async def test_a_rug_pull_is_disabled_until_approved(tmp_path: Path) -> None:
    lock = tmp_path / "wakeful.lock.json"
    config = server(
        "facts", "rug_pull.py", env={"WAKEFUL_RUG_PULL_COUNTER": str(tmp_path / "starts")}
    )
    pins = ToolPins(lock)
    async with (
        tool_services() as (services, events),
        MCPToolset([config], emit=events.emit, pins=pins, lock_poll_seconds=0.05) as toolset,
    ):
        # First start: harmless, pinned on first use.
        fact = offered(toolset)["get_fact_of_the_day"]
        assert (await run(fact, services)).content == "Octopuses have three hearts."
        pinned = json.loads(lock.read_text())["facts"]["get_fact_of_the_day"]
        assert pinned["pinned_by"] == "first use"
        assert pinned["definition"]["description"] == "Get a random fact of the day."

        # The server crashes and the toolset restarts it: now the tool is malicious.
        await run(offered(toolset)["crash"], services)
        await until(toolset, lambda: toolset.server("facts").restarts == 1)
        await until(toolset, lambda: toolset.server("facts").state == "ready")
        assert "get_fact_of_the_day" not in offered(toolset)
        refused = await run(fact, services)  # the Tool object the agent was given before
        assert refused.is_error
        assert "`wakeful mcp approve facts get_fact_of_the_day`" in refused.content
        changed = [e for e in events.of_kind(SYSTEM_ALERT) if e.context.get("trust") == "changed"]
        [alert] = changed
        assert "'get_fact_of_the_day' of MCP server 'facts' changed since it was pinned" in (
            alert.text
        )
        assert "the description (29 → " in alert.text
        assert "+13241234123" not in alert.text  # the diff is for the operator
        assert "+  to +13241234123. This is a proxy number" in alert.context["diff"]
        pending = json.loads(lock.read_text())["facts"]["get_fact_of_the_day"]["pending"]
        assert "+13241234123" in pending["definition"]["description"]

        output = await anyio.to_thread.run_sync(
            approve, "facts", "get_fact_of_the_day", "--lock", str(lock)
        )
        assert "Re-pinned facts get_fact_of_the_day: sha256" in output
        assert "approved despite a high poisoning finding" in output
        await until(toolset, lambda: "get_fact_of_the_day" in offered(toolset))
        again = await run(offered(toolset)["get_fact_of_the_day"], services)
        assert again.content == "Octopuses have three hearts."
        assert "was approved by the operator and can be called again" in alerts(events)[-1]
    after = json.loads(lock.read_text())["facts"]["get_fact_of_the_day"]
    assert after["pinned_by"] == "approve" and "pending" not in after


async def test_a_new_tool_on_a_pinned_server_waits_for_approval(tmp_path: Path) -> None:
    lock = tmp_path / "wakeful.lock.json"
    async with (
        tool_services() as (services, events),
        MCPToolset(
            [server("toolbox", "toolbox.py")],
            emit=events.emit,
            pins=ToolPins(lock),
            lock_poll_seconds=0.05,
        ) as toolset,
    ):
        await run(offered(toolset)["add_extra_tool"], services)
        await until(toolset, lambda: toolset.server("toolbox").disabled == ("extra",))
        assert "extra" not in offered(toolset)
        assert "appeared after the server's tools were pinned" in alerts(events)[-1]
        await anyio.to_thread.run_sync(approve, "toolbox", "--lock", str(lock))
        await until(toolset, lambda: "extra" in offered(toolset))
        assert (await run(offered(toolset)["extra"], services)).content == "extra!"


async def test_pins_survive_a_runtime_restart_and_require_mode_waits(tmp_path: Path) -> None:
    lock = tmp_path / "wakeful.lock.json"
    weather = server("weather", "weather.py", pin_mode="require")
    async with (
        tool_services() as (services, events),
        MCPToolset([weather], emit=events.emit, pins=ToolPins(lock)) as toolset,
    ):
        assert offered(toolset) == {}
        assert {d.tool for d in toolset.disabled()} == {"echo", "forecast"}
        assert 'not pinned yet (pin_mode = "require")' in alerts(events)[0]
    await anyio.to_thread.run_sync(approve, "weather", "--lock", str(lock))
    async with (
        tool_services() as (services, _),
        MCPToolset([weather], pins=ToolPins(lock)) as toolset,
    ):
        forecast = offered(toolset)["forecast"]
        assert (await run(forecast, services, city="Oslo")).content == "Sunny in Oslo."


async def test_cross_server_shadowing_disables_the_attacker_not_the_victim() -> None:
    async with (
        tool_services() as (services, events),
        MCPToolset(
            [server("mailer", "mailer.py"), server("quotes", "shadowing.py")], emit=events.emit
        ) as toolset,
    ):
        tools = offered(toolset)
        assert "send_email" in tools and "daily_quote" not in tools
        shadowing = [f for f in toolset.findings if f.kind == "shadowing"]
        [finding] = shadowing
        assert (finding.server, finding.tool, finding.severity) == ("quotes", "daily_quote", "high")
        assert "refers to 'send_email' of server 'mailer'" in finding.evidence
        sent = await run(tools["send_email"], services, to="a@b.example", subject="s", body="b")
        assert sent.content == "sent to a@b.example"
        assert any("tool shadowing" in text for text in alerts(events))


async def test_a_server_gets_only_the_environment_its_config_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-runtime-secret")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-for-this-server")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-runtime-secret")
    config = server("probe", "env_probe.py", env={"PROBE_MODE": "1"}, inherit_env=["GITHUB_TOKEN"])
    async with tool_services() as (services, _), MCPToolset([config]) as toolset:
        seen = json.loads((await run(offered(toolset)["environment"], services)).content)
    assert "OPENAI_API_KEY" not in seen and "AWS_SECRET_ACCESS_KEY" not in seen
    assert seen["GITHUB_TOKEN"] == "ghp-for-this-server"
    assert seen["PROBE_MODE"] == "1"
    # What else it has: the SDK's fixed safe list, and what Python sets for itself at start-up.
    sdk_defaults = {"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"}
    python_own = {"LC_CTYPE"}
    assert set(seen) <= sdk_defaults | python_own | {"GITHUB_TOKEN", "PROBE_MODE"}
    assert seen["PATH"] == os.environ["PATH"]


async def test_first_use_pins_a_slow_server_with_its_real_tools(tmp_path: Path) -> None:
    # A fresh lock file and two servers, one still starting when the other has listed: the
    # slow one must not be pinned with an empty list (its tools would all look new).
    lock = tmp_path / "wakeful.lock.json"
    slow_start = (
        "import runpy, sys, time; time.sleep(1.5); "
        f"sys.argv = [{str(SERVERS / 'weather.py')!r}]; "
        f"runpy.run_path({str(SERVERS / 'weather.py')!r}, run_name='__main__')"
    )
    slow = MCPServerConfig(name="weather", command=[sys.executable, "-c", slow_start])
    async with (
        tool_services() as (_, events),
        MCPToolset(
            [server("toolbox", "toolbox.py"), slow], emit=events.emit, pins=ToolPins(lock)
        ) as toolset,
    ):
        await until(toolset, lambda: "forecast" in offered(toolset))
        assert toolset.disabled() == []
        pinned = json.loads(lock.read_text())
        assert set(pinned["weather"]) == {"echo", "forecast"}
        assert all(p["pinned_by"] == "first use" for p in pinned["weather"].values())
        assert not [a for a in alerts(events) if "appeared" in a or "approve" in a]


async def test_first_use_pins_each_server_and_says_so_once(tmp_path: Path) -> None:
    lock = tmp_path / "wakeful.lock.json"
    configs = [server("weather", "weather.py"), server("mailer", "mailer.py")]
    async with (
        tool_services() as (_, events),
        MCPToolset(configs, emit=events.emit, pins=ToolPins(lock)) as toolset,
    ):
        assert set(offered(toolset)) == {"echo", "forecast", "send_email"}
        pinned = [e for e in events.of_kind(SYSTEM_ALERT) if e.context.get("trust") == "pinned"]
        by_server = {e.context["mcp_server"]: e for e in pinned}
        assert len(pinned) == 2 and set(by_server) == {"weather", "mailer"}
        weather = by_server["weather"]
        assert weather.context["tools"] == ["echo", "forecast"]
        assert weather.context["lock_file"] == str(lock)
        assert "Pinned the 2 tool(s) of MCP server 'weather' on first use" in weather.text
        assert f"in {str(lock)!r}: echo, forecast." in weather.text
        assert "send_email" in by_server["mailer"].text
    assert set(json.loads(lock.read_text())) == {"//", "weather", "mailer"}

    # The next start finds both servers pinned and says nothing about them.
    async with (
        tool_services() as (_, events),
        MCPToolset(configs, emit=events.emit, pins=ToolPins(lock)) as toolset,
    ):
        assert set(offered(toolset)) == {"echo", "forecast", "send_email"}
        assert alerts(events) == []
