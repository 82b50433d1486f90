"""The tools a runtime offers: the core tools and the caller's, the MCP servers' (kept in step with
what each server lists), the discovery index of every tool outside the prompt, and the skills'
index in the system prompt.

With discovery on, only the core tools (and those named in `discovery.core`) are in the prompt;
every other tool is indexed by server and found with discover_tools, then called with call_tool.
"""

from __future__ import annotations

import logging
from contextlib import AsyncExitStack
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from ..discovery.session_tools import Discovery, DiscoverySettings
from ..tools.cache import ResultCache
from ..tools.registry import ToolRegistry
from ..tools.spec import Tool

if TYPE_CHECKING:
    from ..agent.session import SessionConfig
    from ..discovery.catalog import CatalogServer
    from ..mcp.client import MCPToolset
    from ..safety.gate import CallGate
    from ..services import Emit, Outbox, Services
    from .settings import RuntimeSettings

__all__ = ["ToolCatalog", "channel_tools", "core_tools"]

log = logging.getLogger(__name__)


def core_tools() -> list[Tool]:
    """The tools every session starts with: talking to the user, tasks, shell, timers."""
    from ..toolkits.comms.cards import send_card_to_user
    from ..toolkits.comms.listing import list_user_messages
    from ..toolkits.comms.notifications import send_user_notification
    from ..toolkits.comms.reply import reply_to_user
    from ..toolkits.execution.run_shell import run_shell
    from ..toolkits.tasks import TASK_TOOLS
    from ..toolkits.triggers.shell_monitor import monitor_shell
    from ..toolkits.triggers.timers import TIMER_TOOLS

    return [
        reply_to_user,
        send_card_to_user,
        send_user_notification,
        list_user_messages,
        *TASK_TOOLS,
        run_shell,
        monitor_shell,
        *TIMER_TOOLS,
    ]


def channel_tools() -> list[Tool]:
    """connect_channel, disconnect_channel, list_channels: offered with the core tools when
    the runtime has a store, which keeps the channels the agent connects across restarts."""
    from ..toolkits.triggers.channels import CHANNEL_TOOLS

    return list(CHANNEL_TOOLS)


class ToolCatalog:
    """The registry every session calls tools from, and what keeps it and the discovery index
    current while the runtime runs."""

    def __init__(self, settings: RuntimeSettings) -> None:
        self._settings = settings
        given = list(settings.tools)
        builtin = [*core_tools(), *(channel_tools() if settings.has_store else [])]
        tool_list = [*builtin, *given] if settings.with_core_tools else given
        # The names that stay in the prompt with discovery on (empty with it off).
        self.core_names: tuple[str, ...] = ()
        if settings.enabled_discovery is not None:
            from ..discovery.session_tools import DISCOVERY_TOOLS

            base = [t.name for t in builtin] if settings.with_core_tools else []
            self.core_names = (
                *base,
                *(t.name for t in DISCOVERY_TOOLS),
                *settings.enabled_discovery.core,
            )
            tool_list = [*tool_list, *DISCOVERY_TOOLS]
        if settings.skills is not None:
            from ..discovery.skill_tools import SKILL_TOOLS

            tool_list = [*tool_list, *SKILL_TOOLS]
            self.core_names = (*self.core_names, *(t.name for t in SKILL_TOOLS))
        if settings.agents:
            from ..subagents.tools import PARENT_TOOLS

            tool_list = [*tool_list, *PARENT_TOOLS]
            self.core_names = (*self.core_names, *(t.name for t in PARENT_TOOLS))
        from ..toolkits.collaboration.settings import CollaborationSettings

        if any(isinstance(s, CollaborationSettings) for s in settings.settings):
            from ..toolkits.collaboration.tools import COLLABORATION_TOOLS

            tool_list = [*tool_list, *COLLABORATION_TOOLS]
            self.core_names = (*self.core_names, "request_human_approval", "request_human_input")
        given_cache = settings.result_cache
        self.result_cache = ResultCache() if given_cache == "default" else given_cache
        # The cache is a layer of each session's tool pipeline (see wakeful.tools.pipeline).
        self.registry = ToolRegistry(tool_list)
        self.mcp: MCPToolset | None = None
        self._mcp_tool_names: set[str] = set()
        self._discovery: Discovery | None = None
        self._discovery_lock = anyio.Lock()

    async def with_skills_index(
        self, config: SessionConfig, services: Services, outbox: Outbox
    ) -> SessionConfig:
        """`config` with the skills' index (names and descriptions) in its system prompt, built
        once for the runtime's life; skills that were skipped or shadowed are told to the
        operator."""
        from ..discovery.skill_tools import skills_of

        skill_set = await skills_of(services)
        index = skill_set.index_text()
        if index:
            config = replace(config, system_prompt=f"{config.system_prompt}\n\n{index}")
        for note in skill_set.notes():
            log.warning("skills: %s", note)
            await outbox.send("operator", note, channel="operator")
        return config

    async def start_discovery(self, services: Services) -> None:
        """Build the discovery index (empty until `connect` fills it) and give it to the tools.

        In a worker thread: loading an embedding model takes a second (deriving it the first
        time, minutes), and the runtime's tasks are already running."""
        settings = self._settings.enabled_discovery
        if settings is None:
            return
        discovery = await anyio.to_thread.run_sync(self._new_discovery, settings)
        services.state[Discovery] = self._discovery = discovery

    async def connect(
        self,
        stack: AsyncExitStack,
        *,
        emit: Emit,
        gate: CallGate | None = None,
        alert_operator: Emit | None = None,
    ) -> None:
        """Connect the MCP servers, if any (left when `stack` unwinds), offer their tools, and
        index every tool outside the prompt.

        The gate's approvals are who servers ask for a person's input (MCP elicitation; none
        without a gate), its audit log records their sampling requests, and `alert_operator`
        tells whoever runs the runtime when a server first samples."""
        settings = self._settings
        if not settings.uses_mcp:
            await self._index_deferred_tools()
            return
        from ..mcp.client import MCPToolset  # the MCP SDK only when servers are set

        self.mcp = MCPToolset(
            settings.mcp_servers,
            emit=emit,
            on_tools_changed=self._sync_mcp_tools,
            reserved_names=self.registry.names,
            in_process=settings.mcp_in_process,
            pins=settings.mcp_pins,
            model=settings.model,
            workdir=settings.workdir,
            approvals=gate.approvals if gate is not None else None,
            audit=gate.audit if gate is not None else None,
            alert_operator=alert_operator,
        )
        await stack.enter_async_context(self.mcp)
        await self._sync_mcp_tools()

    def forget_session(self, session_id: str) -> None:
        """Drop what discovery loaded for an unloaded session; its reload restores it from the
        trajectory."""
        if self._discovery is not None:
            self._discovery.loaded.pop(session_id, None)

    def _new_discovery(self, settings: DiscoverySettings) -> Discovery:
        from ..discovery.index import ToolIndex

        index = ToolIndex()
        if settings.embeddings_model is not None:
            # The hybrid ranking: the model through ONNX Runtime for needs of up to 48 tokens
            # (a few milliseconds instead of the ~17 ms of torch on a small CPU) and its static
            # token embeddings for every need; both derived once, then cached.
            from ..discovery.onnx_embeddings import OnnxEmbedder
            from ..discovery.static_embeddings import StaticEmbedder

            model = Path(settings.embeddings_model)
            index = ToolIndex(
                embedder=StaticEmbedder.from_model(model),
                precise_embedder=OnnxEmbedder.from_model(model),
            )
        return Discovery(index=index, core_names=self.core_names, k=settings.k)

    async def _index_deferred_tools(self) -> None:
        """Give the discovery index every tool outside the prompt, grouped by server: an MCP
        tool under its server, the runtime's own under "local". Only changed servers are
        re-indexed, and their new texts are embedded in a worker thread (seconds for thousands
        of tools), so the event loop keeps serving meanwhile; one update at a time, so a slower
        one cannot land after, and undo, a newer one."""
        discovery = self._discovery
        if discovery is None:
            return
        async with self._discovery_lock:
            removed, changed = discovery.changes(self._deferred_catalog())
            embedded = None
            texts = discovery.index.texts_to_embed(changed)
            if any(texts):
                embedded = await anyio.to_thread.run_sync(discovery.index.embed_texts, *texts)
            discovery.apply(removed, changed, embedded)

    def _deferred_catalog(self) -> list[CatalogServer]:
        """Every tool outside the prompt as catalog servers (see `_index_deferred_tools`)."""
        from ..discovery.session_tools import LOCAL_SERVER, catalog_entry

        core = set(self.core_names)
        by_server: dict[str, list[Tool]] = {}
        if self.mcp is not None:
            for server, tools in self.mcp.tools_by_server().items():
                deferred = [t for t in tools if t.name not in core]
                if deferred:
                    by_server[server] = deferred
        taken = {t.name for tools in by_server.values() for t in tools}
        local = [t for t in self.registry if t.name not in core and t.name not in taken]
        if local:
            by_server.setdefault(LOCAL_SERVER, []).extend(local)
        descriptions = {LOCAL_SERVER: "Tools of this runtime."}
        return [
            catalog_entry(server, descriptions.get(server, f"MCP server {server}"), tools)
            for server, tools in by_server.items()
        ]

    async def _sync_mcp_tools(self) -> None:
        """Make the registry offer exactly the tools the MCP servers offer now."""
        assert self.mcp is not None
        tools = self.mcp.tools()
        offered = {t.name for t in tools}
        for name in self._mcp_tool_names - offered:
            self.registry.remove(name)
        for tool in tools:
            self.registry.add(tool, replace=True)
        self._mcp_tool_names = offered
        # A call to a tool that is held back (changed since pinned, or poisoned) says why.
        self.registry.unavailable = {d.tool: d.reason for d in self.mcp.disabled()}
        if self.result_cache is not None:
            for config in self._settings.mcp_servers:
                status = self.mcp.server(config.name)
                if status is not None:
                    self.result_cache.declare_third_party(status.tools, trusted=config.trusted)
        await self._index_deferred_tools()
