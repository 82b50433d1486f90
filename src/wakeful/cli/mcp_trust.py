"""`wakeful mcp audit` and `wakeful mcp approve`: review third-party MCP tools, re-pin them.

`register(mcp_app)` adds both commands to the `wakeful mcp` group.

- `wakeful mcp audit --catalog FILE [--json]` scans a catalog (the format of
  shared/data/toolsets: `{"servers": [{"name", "tools": [{"name", "description",
  "inputSchema"}]}]}`; FILE may be the folder holding catalog.json);
  `wakeful mcp audit [--json] [--name NAME] -- COMMAND...` starts a stdio server, lists its
  tools and scans them. With `--lock FILE`, tools that differ from their pins are reported too.
  `--json` prints `{"findings": [{"server", "tool", "kind", "severity", "evidence"}]}`.
  Exit status: 0 when no finding is high, 1 when one is, 2 for a usage error (bad options, an
  unreadable catalog, a server that cannot be started or listed).
- `wakeful mcp approve SERVER [TOOL] [--lock FILE]` pins what the runtime recorded as waiting
  for approval (a changed or new tool), or confirms the current pins, and prints what it
  re-pinned. A running runtime notices the rewritten lock file within its `lock_poll_seconds`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Any, NoReturn

import anyio
import typer
from rich.markup import escape
from rich.table import Table

from ..errors import UserError
from ..mcp.pins import LOCK_FILE_NAME, ToolPins, change_summary
from ..mcp.trust import TrustFinding, poisoning_findings, scan_servers, worst
from .console import fail, out

USAGE_ERROR = 2
HIGH_FINDING = 1


Servers = dict[str, list[dict[str, Any]]]


def register(mcp_app: typer.Typer) -> None:
    """Add `audit` and `approve` to the `wakeful mcp` group."""
    mcp_app.command("audit")(audit)
    mcp_app.command("approve")(approve)


def audit(
    command: Annotated[
        list[str] | None,
        typer.Argument(help="After --: the command that starts a stdio MCP server."),
    ] = None,
    catalog: Annotated[
        Path | None,
        typer.Option("--catalog", help="A catalog.json (or the folder holding one) to scan."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the findings as JSON.")] = False,
    name: Annotated[
        str | None,
        typer.Option("--name", help="The server's name in findings (default: from COMMAND)."),
    ] = None,
    lock: Annotated[
        Path | None,
        typer.Option("--lock", help="Also report tools that differ from their pins in FILE."),
    ] = None,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Seconds the server may take to list its tools.")
    ] = 30.0,
) -> None:
    """Scan MCP tools for poisoning and shadowing; exit 1 when any finding is high."""
    if (catalog is None) == (not command):
        _usage(
            "Give either --catalog FILE or a server command after --, e.g. "
            "`wakeful mcp audit --json -- python server.py`."
        )
    instructions: dict[str, str | None] = {}
    if catalog is not None:
        servers = _read_catalog(catalog)
    else:
        assert command is not None
        server = name or _name_from(command)
        try:
            tools, said = anyio.run(_list_stdio_tools, command, timeout)
        except Exception as exc:  # the adapter edge: whatever the server did, say it and stop
            _usage(f"Could not list the tools of `{' '.join(command)}`: {_describe(exc)}")
        servers, instructions = {server: tools}, {server: said}
    findings = scan_servers(servers, instructions)
    if lock is not None:
        findings = _pin_findings(ToolPins.load(lock), servers) + findings
    if as_json:
        print(json.dumps({"findings": [f.as_dict() for f in findings]}, ensure_ascii=False))
    else:
        _print_table(findings, sum(len(t) for t in servers.values()))
    if worst(findings) == "high":
        raise typer.Exit(HIGH_FINDING)


def approve(
    server: Annotated[str, typer.Argument(help="The MCP server, as named in wakeful.toml.")],
    tool: Annotated[
        str | None, typer.Argument(help="One tool of it; every tool when left out.")
    ] = None,
    lock: Annotated[
        Path, typer.Option("--lock", help="The lock file (next to wakeful.toml by default).")
    ] = Path(LOCK_FILE_NAME),
) -> None:
    """Re-pin a server's changed or new tools (or one of them), so the runtime offers them."""
    pins = ToolPins(lock)
    try:
        # Under the file's lock: a runtime recording a changed tool cannot write in between.
        with pins.exclusive():
            approvals = pins.approve(server, tool)
            if approvals:
                pins.save()
    except UserError as exc:
        raise fail(str(exc)) from exc
    if not approvals:
        raise fail(
            f"Nothing to approve for {server}{f' {tool}' if tool else ''} in {str(lock)!r}: "
            "it is already approved as it is. Run `wakeful mcp audit` to review its tools."
        )
    for approval in approvals:
        old = approval.old_sha256[:12] if approval.old_sha256 else "unpinned"
        out.print(
            f"Re-pinned {escape(approval.server)} {escape(approval.tool)}: sha256 {old} → "
            f"{approval.new_sha256[:12]}"
        )
        for finding in poisoning_findings(approval.server, approval.definition):
            out.print(
                f"  note: approved despite a {finding.severity} {finding.kind} finding: "
                f"{escape(finding.evidence)}"
            )
    out.print(f"Wrote {escape(str(lock))}; a running runtime picks this up within seconds.")


# --- reading tools ------------------------------------------------------------------------------


def _read_catalog(path: Path) -> Servers:
    file = path / "catalog.json" if path.is_dir() else path
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        _usage(f"The catalog {str(file)!r} does not exist. Pass a catalog.json or its folder.")
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        _usage(f"The catalog {str(file)!r} is not JSON ({exc}). Pass a catalog.json.")
    servers = data.get("servers") if isinstance(data, dict) else None
    if not isinstance(servers, list) or not all(
        isinstance(s, dict) and isinstance(s.get("name"), str) and isinstance(s.get("tools"), list)
        for s in servers
    ):
        _usage(
            f"The catalog {str(file)!r} is not in the toolsets format: it needs "
            '{"servers": [{"name": ..., "tools": [{"name", "description", "inputSchema"}]}]}.'
        )
    return {s["name"]: [t for t in s["tools"] if isinstance(t, dict)] for s in servers}


def _name_from(command: list[str]) -> str:
    """A server name for findings: the script's name if the command runs one, else the program."""
    scripts = [a for a in command[1:] if a.endswith((".py", ".js", ".mjs", ".ts"))]
    return Path(scripts[0] if scripts else command[0]).stem


async def _list_stdio_tools(
    command: list[str], seconds: float
) -> tuple[list[dict[str, Any]], str | None]:
    """Start the server (with only the MCP SDK's safe default environment), list its tools."""
    from mcp.client.stdio import stdio_client

    from mcp import Client, StdioServerParameters

    from ..mcp.connection import CLIENT_INFO

    params = StdioServerParameters(command=command[0], args=command[1:])
    tools: list[dict[str, Any]] = []
    # The server's stderr is not ours to show; a file that swallows it (opened once, no I/O).
    with open(os.devnull, "w") as quiet, anyio.fail_after(seconds):  # noqa: ASYNC230
        async with Client(stdio_client(params, errlog=quiet), client_info=CLIENT_INFO) as client:
            cursor: str | None = None
            for _ in range(100):
                page = await client.list_tools(cursor=cursor)
                tools += [
                    t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in page.tools
                ]
                cursor = page.next_cursor
                if cursor is None:
                    break
            return tools, client.instructions


def _describe(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, TimeoutError):
        return "it did not list its tools in time (raise --timeout)"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _pin_findings(pins: ToolPins, servers: Servers) -> list[TrustFinding]:
    findings = []
    for server, tools in servers.items():
        for definition in tools:
            state = pins.state(server, definition)
            if state in ("pinned", "unpinned"):
                continue
            tool = str(definition.get("name", ""))
            old = pins.pinned_definition(server, tool)
            evidence = (
                f"changed since it was pinned: {change_summary(old, definition)}"
                if state == "changed"
                else "not in the pins of its server (it appeared after they were made)"
            )
            findings.append(TrustFinding(server, tool, "changed", "high", evidence))
    return findings


# --- output -------------------------------------------------------------------------------------


def _print_table(findings: list[TrustFinding], tool_count: int) -> None:
    if not findings:
        out.print(f"No findings in {tool_count} tools.")
        return
    table = Table("severity", "kind", "server", "tool", "evidence", show_lines=True)
    for f in findings:
        table.add_row(
            f.severity, f.kind, escape(f.server), escape(f.tool or "-"), escape(f.evidence)
        )
    out.print(table)
    high = sum(f.severity == "high" for f in findings)
    out.print(f"{len(findings)} findings in {tool_count} tools, {high} high.")


def _usage(message: str) -> NoReturn:
    raise fail(message, USAGE_ERROR)


if __name__ == "__main__":
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)
    register(app)
    app()
