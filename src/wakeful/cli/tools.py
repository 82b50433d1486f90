"""`wakeful tools`: commands about the tools agents call; `wakeful tools lint` checks descriptions.

With no arguments, `lint` checks every built-in tool source (:data:`BUILTIN_TOOL_SOURCES`) against
the description standard of :mod:`wakeful.tools.lint` and fails on any miss. After `--`, it starts
a third-party stdio MCP server, lists its tools and checks them as advice.
"""

from __future__ import annotations

import functools
import json
import shlex
import tempfile
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Annotated, Final

import anyio
import typer
from rich.markup import escape
from rich.table import Table

from ..errors import UserError
from ..tools.lint import LintFinding, lint_definitions, lint_tool
from . import tools_search
from .console import fail, out

if TYPE_CHECKING:
    # The MCP SDK is imported where a command uses it: it costs most of the CLI's start-up.
    from mcp import Client

__all__ = [
    "BUILTIN_TOOL_SOURCES",
    "BuiltinToolSource",
    "LintReport",
    "lint_mcp_client",
    "lint_stdio_server",
    "register",
    "tools_app",
]

DEFAULT_CONNECT_TIMEOUT_SECONDS: Final = 30.0
_STDERR_SHOWN_CHARS: Final = 1500

tools_app = typer.Typer(
    help="Check the tools agents call: their descriptions, schemas and examples.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


def register(app: typer.Typer) -> None:
    """Add the `tools` command group (`lint`, and `search` from :mod:`.tools_search`)."""
    app.add_typer(tools_app, name="tools")


@dataclass
class LintReport:
    """The tools of one source and what the linter found in them."""

    source: str
    tools: list[str] = field(default_factory=list)
    findings: list[LintFinding] = field(default_factory=list)


@dataclass(frozen=True)
class BuiltinToolSource:
    """A set of tools that ship with wakeful, linted by `wakeful tools lint` with no arguments.

    `lint` gathers the tools (starting whatever it needs, e.g. an in-process MCP server via
    :func:`lint_mcp_client`) and checks them.
    """

    name: str
    lint: Callable[[], Awaitable[LintReport]]


async def _lint_core_tools() -> LintReport:
    from ..runtime.runtime import core_tools

    tools = core_tools()
    findings = [finding for t in tools for finding in lint_tool(t)]
    return LintReport("core tools", [t.name for t in tools], findings)


async def _lint_perception_server() -> LintReport:
    """The perception server as any MCP client sees it (descriptions with their examples)."""
    from mcp import Client

    from ..toolkits.perception.server import perception_server

    with tempfile.TemporaryDirectory() as root:
        return await lint_mcp_client(Client(perception_server(Path(root))), "perception server")


async def _lint_execution_server() -> LintReport:
    """The execution server as any MCP client sees it."""
    from mcp import Client

    from ..toolkits.execution.server import execution_server

    with tempfile.TemporaryDirectory() as root:
        server = execution_server(Path(root))
        return await lint_mcp_client(Client(server), "execution server")


async def _lint_discovery_tools() -> LintReport:
    from ..discovery.session_tools import DISCOVERY_TOOLS
    from ..discovery.skill_tools import SKILL_TOOLS

    tools = [*DISCOVERY_TOOLS, *SKILL_TOOLS]
    findings = [finding for t in tools for finding in lint_tool(t)]
    return LintReport("discovery and skills", [t.name for t in tools], findings)


BUILTIN_TOOL_SOURCES: list[BuiltinToolSource] = [
    BuiltinToolSource("core tools", _lint_core_tools),
    BuiltinToolSource("discovery and skills", _lint_discovery_tools),
    BuiltinToolSource("perception server", _lint_perception_server),
    BuiltinToolSource("execution server", _lint_execution_server),
]
"""Every built-in tool source. A built-in MCP server adds itself here, e.g.
``BuiltinToolSource("files server", lambda: lint_mcp_client(Client(files_server), "files
server"))``, and from then on the linter and the test suite hold it to the standard."""


async def lint_mcp_client(client: Client, source: str) -> LintReport:
    """Connect with `client` (not yet entered), list every tool page by page, and lint them."""
    report = LintReport(source)
    async with client:
        cursor: str | None = None
        while True:
            page = await client.list_tools(cursor=cursor)
            report.tools += [t.name for t in page.tools]
            report.findings += lint_definitions(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
    return report


async def lint_stdio_server(
    command: Sequence[str], *, connect_seconds: float = DEFAULT_CONNECT_TIMEOUT_SECONDS
) -> LintReport:
    """Start `command` as a stdio MCP server, lint its tools, and stop it.

    A command that cannot be started, that exits or closes its output before answering, or that
    does not answer within `connect_seconds` is a :class:`UserError` that quotes what the server
    wrote to stderr.
    """
    if not command:
        raise UserError(
            "No server command was given. Put it after `--`, e.g. "
            "`wakeful tools lint -- npx -y @modelcontextprotocol/server-everything`."
        )
    shown = shlex.join(command)
    from mcp.client.stdio import StdioServerParameters, stdio_client

    from mcp import Client, MCPError

    params = StdioServerParameters(command=command[0], args=list(command[1:]))
    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as stderr:
        try:
            with anyio.fail_after(connect_seconds):
                return await lint_mcp_client(
                    Client(stdio_client(params, errlog=stderr)), source=shown
                )
        except FileNotFoundError as exc:
            raise UserError(
                f"The server command {command[0]!r} was not found. Check the spelling, give its "
                "full path, or install it first; the command goes after `--`, e.g. "
                "`wakeful tools lint -- python my_server.py`."
            ) from exc
        except TimeoutError as exc:
            raise UserError(
                f"The MCP server `{shown}` did not list its tools within {connect_seconds:g} "
                "seconds. Check that it speaks MCP over stdio, or give it longer with --timeout."
                f"{await _stderr_tail(stderr)}"
            ) from exc
        except (OSError, MCPError, ExceptionGroup) as exc:
            failure = _connection_failure(exc)
            if failure is None:
                raise
            raise UserError(
                f"The MCP server `{shown}` could not be queried ({failure}). Check that the "
                "command starts an MCP server on stdio and keeps running; run it by hand to see "
                f"its errors.{await _stderr_tail(stderr)}"
            ) from exc


def _connection_failure(exc: BaseException) -> str | None:
    """A short description if `exc` (or every exception in its group) is a connection failure."""
    if isinstance(exc, BaseExceptionGroup):
        parts = [_connection_failure(e) for e in exc.exceptions]
        if not parts or any(p is None for p in parts):
            return None
        return "; ".join(p for p in parts if p)
    from mcp import MCPError

    if isinstance(exc, MCPError | OSError):
        return f"{type(exc).__name__}: {exc}"
    return None


async def _stderr_tail(stderr: IO[str]) -> str:
    def read() -> str:
        stderr.flush()
        stderr.seek(0)
        return stderr.read()

    text = (await anyio.to_thread.run_sync(read)).strip()
    if not text:
        return " It wrote nothing to stderr."
    if len(text) > _STDERR_SHOWN_CHARS:
        text = "…" + text[-_STDERR_SHOWN_CHARS:]
    return f" Its stderr ends with:\n{text}"


# --- the command ---------------------------------------------------------------------------------


@tools_app.command("lint")
def lint_command(
    server: Annotated[
        list[str] | None,
        typer.Argument(
            help="A third-party stdio MCP server to check, after `--`, e.g. "
            "`-- python my_server.py`. Leave it out to check the built-in tools.",
            show_default=False,
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the report as one JSON object.")
    ] = False,
    strict: Annotated[
        bool,
        typer.Option("--strict", help="Exit 1 on any finding in a third-party server's tools too."),
    ] = False,
    timeout: Annotated[
        float,
        typer.Option(help="Seconds to wait for a server to list its tools.", min=0.1),
    ] = DEFAULT_CONNECT_TIMEOUT_SECONDS,
) -> None:
    """Check tool descriptions against the standard: when to use, limits, result, cost,
    parameter examples and example calls.

    With no arguments every built-in tool is checked and any finding fails (exit 1). After
    `--`, a third-party stdio MCP server is started and its tools are checked as advice (exit 0
    unless --strict).
    """
    builtin = not server
    try:
        if builtin:
            reports = anyio.run(_lint_builtin_sources)
        else:
            run = functools.partial(lint_stdio_server, server or [], connect_seconds=timeout)
            reports = [anyio.run(run)]
    except UserError as exc:
        raise fail(str(exc)) from exc
    _print_reports(reports, as_json=as_json, advice=not builtin)
    if any(r.findings for r in reports) and (builtin or strict):
        raise typer.Exit(1)


async def _lint_builtin_sources() -> list[LintReport]:
    return [await source.lint() for source in BUILTIN_TOOL_SOURCES]


def _print_reports(reports: list[LintReport], *, as_json: bool, advice: bool) -> None:
    if as_json:
        payload = {
            "sources": [
                {
                    "source": r.source,
                    "tools": r.tools,
                    "findings": [
                        {"tool": f.tool, "rule": f.rule, "message": f.message} for f in r.findings
                    ],
                }
                for r in reports
            ],
            "findings": sum(len(r.findings) for r in reports),
        }
        typer.echo(json.dumps(payload, ensure_ascii=False, indent=2))
        return
    for report in reports:
        if report.findings:
            table = Table(title=f"{report.source}: {len(report.findings)} findings")
            table.add_column("Tool", no_wrap=True)
            table.add_column("Rule", no_wrap=True)
            table.add_column("What to add")
            for f in report.findings:
                table.add_row(escape(f.tool), f.rule, escape(f.message))
            out.print(table)
        failing = len({f.tool for f in report.findings})
        out.print(
            f"{escape(report.source)}: {len(report.tools)} tools checked, "
            f"{len(report.tools) - failing} meet the standard, {failing} do not."
        )
    if advice and any(r.findings for r in reports):
        out.print("These findings are advice for a third-party server; --strict makes them fail.")


tools_search.register(tools_app)
