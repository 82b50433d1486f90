"""`wakeful mcp list`: where each configured MCP server stands, and each of its tools.

It connects to every `[[mcp.servers]]` entry of the configuration at once (each within
`--timeout` seconds), and prints per server its state (ready, unavailable or failed, with the
reason) and per tool: whether the runtime would offer it, its pin (pinned, changed since pinned
or new — both waiting for approval —, or not pinned yet) and why it is disabled (poisoning,
shadowing, task-only, waiting for approval). `--json` prints the same as
`{"lock_file", "servers": [{"name", "state", "detail", "tool_count", "tools": [{"name",
"offered", "pin", "disabled"}]}]}`, where "pin" is one of pinned, changed, new, unpinned (not
pinned yet) and off (`pinning = false`).

It only reads the lock file: a server seen for the first time is shown "not pinned yet" and is
pinned by the next `wakeful run`, not by this command. Exit status: 0 when every enabled server
listed its tools (or none is configured), 1 when one could not be reached or the configuration
is missing or invalid.
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated, Any

import anyio
import typer
from rich.markup import escape
from rich.table import Table

from ..errors import UserError
from ..mcp.config import MCPServerConfig
from ..mcp.pins import PinMode, ToolPins
from ..mcp.trust import TrustFinding
from .console import fail, out

DEFAULT_TIMEOUT_SECONDS = 15.0

PIN_WORDS = {
    "pinned": "pinned",
    "changed": "changed since pinned, waiting for approval",
    "new": "new since the server was pinned, waiting for approval",
    "unpinned": "not pinned yet",
    "off": "pinning off",
}


@dataclass(frozen=True)
class ToolLine:
    """One tool as `wakeful run` would treat it."""

    name: str
    offered: bool
    pin: str
    """pinned | changed | new | unpinned (not pinned yet) | off (pinning = false)."""
    disabled: list[str]
    """Why it is not offered: "poisoning", "shadowing", "task-only", "waiting for approval"."""


@dataclass(frozen=True)
class ServerLine:
    """One configured server: its state after the first connection attempt, and its tools."""

    name: str
    state: str
    detail: str
    tool_count: int
    tools: list[ToolLine]


def register(mcp_app: typer.Typer) -> None:
    """Add `list` to the `wakeful mcp` group."""
    mcp_app.command("list")(list_servers)


def list_servers(
    config: Annotated[
        Path,
        typer.Option("--config", "-c", help="The configuration file.", dir_okay=False),
    ] = Path("wakeful.toml"),
    as_json: Annotated[bool, typer.Option("--json", help="Print the servers as JSON.")] = False,
    timeout: Annotated[
        float,
        typer.Option("--timeout", min=0.1, help="Seconds each server may take to list its tools."),
    ] = DEFAULT_TIMEOUT_SECONDS,
) -> None:
    """Connect to each configured MCP server and show its state and tools (changes nothing)."""
    from ..config import load_config

    if not config.is_file():
        raise fail(
            f"The configuration {str(config)!r} does not exist. Pass the wakeful.toml that "
            "configures your [[mcp.servers]] with --config, or run `wakeful init` to write one."
        )
    try:
        cfg = load_config(config)
        pins = ToolPins.load(cfg.mcp.lock_file) if cfg.mcp.pinning else None
    except UserError as exc:
        raise fail(str(exc)) from exc
    if not cfg.mcp.servers:
        if as_json:
            print(json.dumps({"lock_file": None, "servers": []}))
        else:
            out.print(
                f"No MCP servers are configured in {escape(str(config))}. Add a "
                "\\[\\[mcp.servers]] table with a name and a command or url "
                "(see `wakeful init --print`)."
            )
        return
    try:
        lines = anyio.run(_survey, cfg.mcp.servers, pins, cfg.mcp.pin_mode, timeout)
    except UserError as exc:  # a configuration the toolset refuses (two servers of one name)
        raise fail(str(exc)) from exc
    lock_file = None if pins is None else str(cfg.mcp.lock_file)
    if as_json:
        data = {"lock_file": lock_file, "servers": [asdict(s) for s in lines]}
        print(json.dumps(data, ensure_ascii=False))
    else:
        _print_tables(lines, lock_file)
    if any(s.state not in ("ready", "not enabled") for s in lines):
        raise typer.Exit(1)


async def _survey(
    configs: list[MCPServerConfig], pins: ToolPins | None, default_mode: PinMode, seconds: float
) -> list[ServerLine]:
    """Connect to every enabled server in parallel, once, and describe what each listed."""
    from ..mcp.client import MCPToolset  # the MCP SDK only for this command

    # The toolset checks against a copy kept in memory, in "require" mode: nothing is pinned on
    # first use and nothing is written; `pins` stays as read from the file for the verdicts.
    scratch = ToolPins(None, default_mode="require")
    if pins is not None:
        scratch.servers = copy.deepcopy(pins.servers)
    probes = [
        c.model_copy(
            update={
                "connect_timeout_seconds": min(c.connect_timeout_seconds, seconds),
                "pin_mode": "require",
            }
        )
        for c in configs
        if c.enabled
    ]
    with _quiet_toolset_logs():
        async with MCPToolset(probes, pins=scratch) as toolset:
            statuses = {s.name: s for s in toolset.status()}
            definitions = toolset.definitions()
            findings = toolset.findings
    lines = []
    for config in configs:
        if not config.enabled:
            lines.append(ServerLine(config.name, "not enabled", "enabled = false", 0, []))
            continue
        status = statuses[config.name]
        mode = config.pin_mode or default_mode
        tools = [
            _tool_line(config, mode, definition, pins, findings, status.task_only)
            for definition in definitions.get(config.name, [])
        ]
        lines.append(ServerLine(config.name, status.state, status.detail, len(tools), tools))
    return lines


def _tool_line(
    config: MCPServerConfig,
    mode: PinMode,
    definition: dict[str, Any],
    pins: ToolPins | None,
    findings: list[TrustFinding],
    task_only: tuple[str, ...],
) -> ToolLine:
    """One tool as `wakeful run` would judge it (the rules of `MCPToolset._vet`): disabled while
    its pin waits for approval, for a high finding on an untrusted server unless a person
    approved that exact definition, or when it runs only as an MCP task."""
    tool = str(definition["name"])
    pin = "off" if pins is None else pins.state(config.name, definition)
    why: list[str] = []
    if pin in ("changed", "new") or (pin == "unpinned" and mode == "require"):
        why.append("waiting for approval")
    approved = pins is not None and pins.approved(config.name, definition)
    if not config.trusted and not approved:
        high = {
            f.kind
            for f in findings
            if f.server == config.name and f.tool == tool and f.severity == "high"
        }
        why += sorted(high)
    if tool in task_only:
        why.append("task-only")
    return ToolLine(tool, not why, pin, why)


@contextmanager
def _quiet_toolset_logs() -> Iterator[None]:
    """The toolset logs each alert as a warning; here the table says it all, once."""
    logger = logging.getLogger("wakeful.tools")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _print_tables(lines: list[ServerLine], lock_file: str | None) -> None:
    for server in lines:
        state = server.state + (f" ({server.detail})" if server.detail else "")
        title = f"{server.name}: {state}; {server.tool_count} tool(s)"
        if not server.tools:
            out.print(escape(title))
            continue
        table = Table("tool", "offered", "pin", "disabled because", title=escape(title))
        for tool in server.tools:
            table.add_row(
                escape(tool.name),
                "yes" if tool.offered else "no",
                PIN_WORDS[tool.pin],
                escape(", ".join(tool.disabled)) or "-",
            )
        out.print(table)
    if lock_file is None:
        out.print("Pinning is off (\\[mcp] pinning = false).")
    else:
        out.print(
            f"Pins read from {escape(lock_file)} (not changed). Servers not pinned yet are "
            "pinned by the next `wakeful run`; approve a changed or new tool with "
            "`wakeful mcp approve SERVER TOOL`."
        )
