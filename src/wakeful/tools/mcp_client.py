"""Tools from MCP servers, kept alive: one owning task per server, restarts, timeouts, names.

`MCPToolset` connects to every configured server (stdio subprocess or Streamable HTTP) with the
official `mcp` SDK and offers their tools as ordinary :class:`Tool` objects, so the session loop
needs no change::

    async with MCPToolset(configs, emit=runtime.submit) as mcp:
        tools = mcp.tools()

Each server has one task that owns its connection (:mod:`.mcp_connection`). It lists the tools,
follows changes to the list, checks the server's health, and restarts the server with backoff
when it crashes or hangs; the agent is told through `system.alert` events. Calls are sent from
the calling tool's own task (the SDK multiplexes concurrent requests on one connection): a call
times out when the server sends neither a result nor progress for `call_timeout_seconds`, and at
the latest after `max_call_seconds`; cancelling it sends the protocol's cancellation. Leaving the
`async with` stops every server, also when it is left by cancellation.

Third-party tool annotations are hints we do not act on: unless a server is configured
`trusted = true`, each of its tools counts as possibly destructive and never as read-only (so it
is never run in parallel or in a side session because it claims to be harmless).
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import anyio
import mcp_types
from anyio.abc import TaskGroup
from mcp.server.lowlevel import Server
from mcp.server.mcpserver import MCPServer

from ..activity import ActivitySignal
from ..errors import ConfigError, UserError
from ..events import SYSTEM_ALERT, Event, Source
from .mcp_config import MCPServerConfig, in_process_config
from .mcp_connection import MCPConnection, ServerState
from .spec import Tool, ToolAnnotations, ToolContext, ToolResult, ToolSpec

log = logging.getLogger(__name__)

Emit = Callable[[Event], Awaitable[object]]
ToolsChanged = Callable[[], Awaitable[None]]

_TOOL_NAME_CHARS = re.compile(r"[^A-Za-z0-9_.\-]")
# What an untrusted server's tool is assumed to be, whatever it claims: MCP's own defaults.
_WORST_CASE = ToolAnnotations(read_only=False, destructive=True, idempotent=False, open_world=True)


@dataclass(frozen=True)
class MCPServerStatus:
    """Where one server stands, for status views and tests."""

    name: str
    state: ServerState
    detail: str
    tools: tuple[str, ...]
    restarts: int


class MCPToolset:
    """The tools of many MCP servers, with a task per server that keeps its connection alive.

    `async with` returns once every server has connected or failed its first attempt. `emit`
    receives `system.alert` events (a server crashed, hung, came back, or two servers offer a
    tool of the same name); `on_tools_changed` is awaited whenever `tools()` changes. Tool names
    that collide, across servers or with `reserved_names` (the runtime's own tools), are
    namespaced as `server.tool`. `in_process` serves `MCPServer` objects of this process over
    the SDK's in-memory transport (for tests, or Python tools exposed through MCP).
    """

    def __init__(
        self,
        configs: Iterable[MCPServerConfig],
        *,
        emit: Emit | None = None,
        on_tools_changed: ToolsChanged | None = None,
        reserved_names: Iterable[str] = (),
        alert_session: str = "main",
        in_process: Mapping[str, MCPServer | Server[Any]] | None = None,
    ) -> None:
        self._emit = emit
        self._on_tools_changed = on_tools_changed
        self._reserved = frozenset(reserved_names)
        self.alert_session = alert_session
        self._connections: dict[str, MCPConnection] = {}
        targets: list[tuple[MCPServerConfig, MCPServer | Server[Any] | None]] = [
            (config, None) for config in configs if config.enabled
        ]
        targets.extend((in_process_config(name), obj) for name, obj in (in_process or {}).items())
        for config, server in targets:
            if config.name in self._connections:
                raise ConfigError(
                    f"Two MCP servers are named {config.name!r}; give each server its own name."
                )
            self._connections[config.name] = MCPConnection(config, self, server)
        self._tools: list[tuple[MCPConnection, Tool]] = []
        self.collisions: dict[str, list[str]] = {}
        # Notified after every change of tools or server state, for whoever waits on one.
        self.changed = ActivitySignal()
        self._tg: TaskGroup | None = None
        self._entered = False

    async def __aenter__(self) -> MCPToolset:
        if self._entered:
            raise UserError("This MCPToolset is already running; create a new one per run.")
        self._entered = True
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        try:
            for connection in self._connections.values():
                self._tg.start_soon(connection.run, name=f"mcp server {connection.config.name}")
            for connection in self._connections.values():
                await connection.settled.wait()
        except BaseException as exc:
            self._tg.cancel_scope.cancel()
            await self._tg.__aexit__(type(exc), exc, exc.__traceback__)
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        assert self._tg is not None
        # Each connection's transport stops its server process, shielded, as it unwinds.
        self._tg.cancel_scope.cancel()
        return await self._tg.__aexit__(exc_type, exc, tb)

    def tools(self, *, include_unavailable: bool = True) -> list[Tool]:
        """Our Tool objects for every tool the servers offer (or last offered, for a server
        that is down: calling one of those returns an error that says so)."""
        return [t for c, t in self._tools if include_unavailable or c.state == "ready"]

    def status(self) -> list[MCPServerStatus]:
        return [
            MCPServerStatus(
                name=c.config.name,
                state=c.state,
                detail=c.detail,
                tools=tuple(t.name for t in c.listing),
                restarts=c.restarts,
            )
            for c in self._connections.values()
        ]

    def server(self, name: str) -> MCPServerStatus:
        for status in self.status():
            if status.name == name:
                return status
        raise UserError(
            f"No MCP server is named {name!r}; configured: {', '.join(self._connections)}."
        )

    # --- called by the connections --------------------------------------------------------------

    async def alert(self, server: str, text: str, **context: Any) -> None:
        """Tell the agent about a server, as a system.alert event (and the log)."""
        log.warning("%s", text)
        if self._emit is None:
            return
        await self._emit(
            Event(
                kind=SYSTEM_ALERT,
                source=Source(type="system", id=f"mcp:{server}"),
                content=text,
                context={"mcp_server": server, **context},
                session=self.alert_session,
            )
        )

    async def rebuild(self) -> None:
        """Recompute our tools from every server's listing, namespacing names that collide."""
        offered: list[tuple[MCPConnection, mcp_types.Tool, str]] = []
        for connection in self._connections.values():
            for remote in connection.listing:
                offered.append((connection, remote, _tool_name(remote.name)))
        counts = Counter(base for _, _, base in offered)
        collisions: dict[str, list[str]] = {}
        used: set[str] = set()
        tools: list[tuple[MCPConnection, Tool]] = []
        for connection, remote, base in offered:
            name = base
            if counts[base] > 1 or base in self._reserved:
                collisions.setdefault(base, []).append(connection.config.name)
                name = _tool_name(f"{connection.config.name}.{base}")
            while name in used:  # two remote names that differ only in characters we replace
                name = _tool_name(f"{name[:60]}_{len(used)}")
            used.add(name)
            tools.append((connection, _make_tool(connection, remote, name)))
        previous, self.collisions = self.collisions, collisions
        self._tools = tools
        for base, servers in collisions.items():
            if previous.get(base) != servers:
                await self._report_collision(base, servers)
        await self.notify_changed()

    async def notify_changed(self) -> None:
        self.changed.notify()
        if self._on_tools_changed is not None:
            await self._on_tools_changed()

    async def _report_collision(self, base: str, servers: list[str]) -> None:
        owners = [f"MCP server {s!r}" for s in servers]
        if base in self._reserved:
            owners.append("the runtime itself")
        names = ", ".join(f"'{_tool_name(f'{s}.{base}')}'" for s in servers)
        await self.alert(
            servers[0],
            f"The tool name {base!r} is offered by {' and '.join(owners)}; to keep them apart the "
            f"MCP tools are named {names}.",
            collision=base,
            servers=servers,
        )


# --- our Tool objects ---------------------------------------------------------------------------


def _tool_name(name: str) -> str:
    """A name our ToolSpec accepts: letters, digits, '_', '.', '-', at most 64 characters."""
    return _TOOL_NAME_CHARS.sub("_", name)[:64] or "tool"


def _annotations(remote: mcp_types.Tool, trusted: bool) -> ToolAnnotations:
    """A trusted server's hints, read with MCP's defaults; an untrusted server's are ignored."""
    hints = remote.annotations
    if not trusted or hints is None:
        return _WORST_CASE
    read_only = hints.read_only_hint is True
    return ToolAnnotations(
        read_only=read_only,
        destructive=not read_only and hints.destructive_hint is not False,
        idempotent=read_only or hints.idempotent_hint is True,
        open_world=hints.open_world_hint is not False,
    )


def _make_tool(connection: MCPConnection, remote: mcp_types.Tool, name: str) -> Tool:
    schema = dict(remote.input_schema) if remote.input_schema else {}
    schema.setdefault("type", "object")
    schema.setdefault("properties", {})
    description = remote.description or remote.title or f"The {remote.name} tool."
    spec = ToolSpec(
        name=name,
        description=description,
        input_schema=schema,
        annotations=_annotations(remote, connection.config.trusted),
    )
    remote_name = remote.name

    # `ctx` positional-only: a remote tool may well have a parameter named "ctx".
    async def call_remote(ctx: ToolContext, /, **arguments: Any) -> ToolResult:
        if remote_name not in connection.offered:
            return ToolResult.error(
                f"The tool {name} is no longer offered by MCP server {connection.name!r}. "
                "Use one of the tools it lists now."
            )
        return await connection.call(remote_name, name, arguments, ctx)

    return Tool(spec=spec, function=call_remote, takes_context=True)
