"""The runtime: one event loop that owns the store, the tasks, the timers and every session.

`Runtime` is an async context manager. Inside it, `submit(event)` persists an event and hands it
to its session, which routes it (cancel, queue or parallel). On entry the runtime recovers what a
previous run left behind: trajectories are reloaded and repaired, pending events are re-queued,
and every task that was running is reported to its session as lost.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

import anyio
from anyio.abc import TaskGroup

from .agent.router import Decision, Router, Strategy
from .agent.session import AgentSession, SessionConfig, SessionObserver
from .agent.trajectory import Trajectory
from .discovery.session_tools import Discovery, DiscoverySettings
from .errors import UserError
from .events import SYSTEM_ALERT, USER_INPUT, Event, Source
from .models.base import Model
from .safety.gate import CallGate
from .services import Outbox, Services, close_state
from .tools.cache import ResultCache
from .tools.mcp_config import MCPServerConfig
from .tools.registry import ToolRegistry
from .tools.spec import Tool
from .tools.tasks import TaskManager

if TYPE_CHECKING:
    from .channels.timers import TimerService
    from .clock import Clock
    from .discovery.catalog import CatalogServer
    from .discovery.skill_tools import SkillsSettings
    from .safety.approvals import Approvals
    from .safety.commands import PolicySettings
    from .safety.mcp_pins import ToolPins
    from .store.sqlite import Store
    from .tools.mcp_client import MCPToolset

log = logging.getLogger(__name__)


def core_tools() -> list[Tool]:
    """The tools every session starts with: talking to the user, tasks, shell, timers."""
    from .channels.shell_monitor import monitor_shell
    from .channels.timer_tools import TIMER_TOOLS
    from .tools.reply import reply_to_user
    from .tools.shell import run_shell
    from .tools.task_tools import TASK_TOOLS

    return [reply_to_user, *TASK_TOOLS, run_shell, monitor_shell, *TIMER_TOOLS]


class Runtime:
    """Runs agent sessions against one model, one tool set and one store."""

    def __init__(
        self,
        *,
        model: Model,
        tools: Iterable[Tool] = (),
        with_core_tools: bool = True,
        store_path: str | Path | None = None,
        session_config: SessionConfig | None = None,
        router: Router | None = None,
        parallel_model: Model | None = None,
        observer: SessionObserver | None = None,
        outbox: Outbox | None = None,
        clock: Clock | None = None,
        with_timers: bool = True,
        workdir: str | Path | None = None,
        progress_interval: float | None = 2.0,
        store_synchronous: Literal["full", "normal"] = "normal",
        result_cache: ResultCache | Literal["default"] | None = "default",
        mcp_servers: Iterable[MCPServerConfig] = (),
        gate: CallGate | Literal["default"] | None = "default",
        settings: Sequence[object] = (),
        discovery: DiscoverySettings | None = None,
        mcp_in_process: Mapping[str, Any] | None = None,
        skills: SkillsSettings | None = None,
        mcp_pins: ToolPins | None = None,
    ) -> None:
        self.model = model
        # The safety layers around every call (see wakeful.safety.gate); "default" is the
        # rule-based sidecar with the command policy, the breaker, approvals through the outbox
        # and, with a store, the audit log. None runs every call unchecked.
        self.gate: CallGate | None = CallGate() if gate == "default" else gate
        # Settings objects of tool families and safety layers, found by class (settings_of).
        self.settings = list(settings)
        tool_list = [*core_tools(), *tools] if with_core_tools else list(tools)
        # With discovery on, only the core tools (and those named in `discovery.core`) are in
        # the prompt; every other tool is found with discover_tools and called with call_tool.
        self.discovery_settings = discovery if discovery is not None and discovery.enabled else None
        self._core_names: tuple[str, ...] = ()
        if self.discovery_settings is not None:
            from .discovery.session_tools import DISCOVERY_TOOLS

            base = [t.name for t in core_tools()] if with_core_tools else []
            self._core_names = (
                *base,
                *(t.name for t in DISCOVERY_TOOLS),
                *self.discovery_settings.core,
            )
            tool_list = [*tool_list, *DISCOVERY_TOOLS]
        # Skills: their names and descriptions go into the system prompt, their bodies are read
        # with load_skill (a core tool, so it stays in the prompt with discovery on too).
        self.skills_settings = skills
        if skills is not None:
            from .discovery.skill_tools import SKILL_TOOLS

            tool_list = [*tool_list, *SKILL_TOOLS]
            self._core_names = (*self._core_names, *(t.name for t in SKILL_TOOLS))
            self.settings.append(skills)
        # Results of read-only calls, reused within a TTL; writes clear it. None turns it off.
        self.result_cache = ResultCache() if result_cache == "default" else result_cache
        self.registry = ToolRegistry(tool_list, cache=self.result_cache)
        self.store_path = Path(store_path) if store_path is not None else None
        self.session_config = session_config or SessionConfig()
        self.router = router or Router()
        self.parallel_model = parallel_model
        self.observer = observer
        self.outbox = outbox or Outbox()
        self.clock = clock
        self.with_timers = with_timers
        self.workdir = Path(workdir) if workdir is not None else None
        self.progress_interval = progress_interval
        # "normal": a commit survives the runtime crashing (kill -9), not the machine losing
        # power; "full" fsyncs every commit and survives both, at a cost in throughput.
        self.store_synchronous = store_synchronous
        self.mcp_servers = list(mcp_servers)
        # MCP servers of this process (low-level `Server` or `MCPServer` objects), by name,
        # reached over the SDK's in-memory transport: for tests and Python tools served by MCP.
        self.mcp_in_process = dict(mcp_in_process or {})
        # The lock file of pinned MCP tool definitions (see wakeful.safety.mcp_pins); None: off.
        self.mcp_pins = mcp_pins
        self.mcp: MCPToolset | None = None
        self._mcp_tool_names: set[str] = set()
        self._discovery_lock = anyio.Lock()
        self.sessions: dict[str, AgentSession] = {}
        self.store: Store | None = None
        self.timers: TimerService | None = None
        self._tg: TaskGroup | None = None
        self._services: Services | None = None
        self._entered = False
        self._stack = AsyncExitStack()
        self._recovering = False
        self._started: set[str] = set()

    # --- lifecycle -----------------------------------------------------------------------------

    async def __aenter__(self) -> Runtime:
        if self._entered:
            raise UserError("This Runtime is already running; create a new one per run.")
        self._entered = True
        # Everything entered here is left in reverse order by the stack, which hands each
        # exit the exception of the one before (e.g. the task group's own cancellation).
        self._stack = AsyncExitStack()
        await self._stack.__aenter__()
        try:
            await self._open()
        except BaseException as exc:
            if self._tg is not None:
                self._tg.cancel_scope.cancel()
            await self._stack.__aexit__(type(exc), exc, exc.__traceback__)
            raise
        return self

    async def _open(self) -> None:
        if self.store_path is not None:
            from .store.sqlite import Store

            self.store_path.parent.mkdir(parents=True, exist_ok=True)
            self.store = await Store.open(self.store_path, synchronous=self.store_synchronous)
            self._stack.push_async_callback(self._close_store)
        self._tg = await self._stack.enter_async_context(anyio.create_task_group())
        store = self.store
        tasks = TaskManager(
            self._tg,
            self.submit,
            on_change=store.save_task_nowait if store is not None else None,
            progress_interval=self.progress_interval,
        )
        self._services = Services(
            tasks=tasks,
            emit=self.submit,
            outbox=self.outbox,
            store=store,
            workdir=self.workdir,
            settings={type(s): s for s in [*self.settings, self._policy_settings()]},
            gate=self._complete_gate(store),
        )
        # Tools' long-lived state (interpreters, shell history) ends before the task group.
        self._stack.push_async_callback(close_state, self._services)
        if "run_shell" in self.registry:
            await self._check_sandbox()
        if self.skills_settings is not None:
            await self._add_skills_to_prompt()
        if self.discovery_settings is not None:
            # Before recovery (sessions reloaded from the store restore what they had loaded)
            # and before the MCP servers (their first listing is indexed as it arrives).
            # In a worker thread: loading an embedding model takes a second (deriving it the
            # first time, minutes), and the runtime's tasks are already running.
            self._services.state[Discovery] = await anyio.to_thread.run_sync(
                self._new_discovery, self.discovery_settings
            )
        if self.with_timers:
            from .channels.timers import TimerService

            self.timers = TimerService(store, self.submit, clock=self.clock)
            self._services.timers = self.timers
            await self._tg.start(self.timers.run)
        await self._recover()
        if self.mcp_servers or self.mcp_in_process:
            # After recovery, so a server's alerts cannot start sessions before it is done.
            from .tools.mcp_client import MCPToolset  # the MCP SDK only when servers are set

            self.mcp = MCPToolset(
                self.mcp_servers,
                emit=self.submit,
                on_tools_changed=self._sync_mcp_tools,
                reserved_names=self.registry.names,
                in_process=self.mcp_in_process,
                pins=self.mcp_pins,
            )
            await self._stack.enter_async_context(self.mcp)
            await self._sync_mcp_tools()
        else:
            await self._index_deferred_tools()

    async def _check_sandbox(self) -> None:
        """Fail now, not at the first command, where the sandbox asked for cannot be had, and
        warn loudly (once) where commands would run unconfined; see `run_shell`."""
        from .safety.sandbox import Sandbox, SandboxSettings

        settings = next(
            (s for s in self.settings if isinstance(s, SandboxSettings)), SandboxSettings()
        )
        workspace = self.workdir or Path.cwd()
        await anyio.to_thread.run_sync(Sandbox, settings, workspace)  # probes bwrap once

    def _complete_gate(self, store: Store | None) -> CallGate | None:
        """Give the gate what only a running runtime has: a person to ask (through the outbox)
        and, with a store, an audit log whose alerts come back as events."""
        gate = self.gate
        if gate is None:
            return None
        if not gate.sidecar.has_policy:
            from .safety.commands import CommandPolicy

            gate.sidecar.use_policy(CommandPolicy(self._policy_settings()))
        if gate.approvals is None:
            from .safety.approvals import Approvals

            gate.approvals = Approvals(self.outbox, timeout_seconds=gate.approval_timeout_seconds)
        if gate.audit is None and store is not None:
            from .safety.audit import AuditLog

            gate.audit = AuditLog(store, emit=self._alert_operator)
        return gate

    async def _alert_operator(self, event: Event) -> None:
        """An alert for whoever runs the runtime (a tool that keeps failing): stored for
        `wakeful events tail` and sent on the outbox's "operator" channel; no agent is woken."""
        if self.store is not None:
            await self.store.add_event(event, status="consumed")
        await self.outbox.send(event.session, event.text, channel="operator", urgency=event.urgency)

    def _policy_settings(self) -> PolicySettings:
        """The command policy's settings, with the runtime's workdir as its workspace unless
        the settings name one (a shell tool's writes there need no approval)."""
        from .safety.commands import PolicySettings

        given = next((s for s in self.settings if isinstance(s, PolicySettings)), None)
        settings = given or PolicySettings()
        if settings.workspace is None and self.workdir is not None:
            settings = settings.model_copy(update={"workspace": self.workdir.resolve()})
        return settings

    async def _close_store(self) -> None:
        if self.store is not None:
            with anyio.CancelScope(shield=True):
                await self.store.close()

    async def _add_skills_to_prompt(self) -> None:
        """Put the skills' index (names and descriptions) in the system prompt, once for the
        runtime's life, and tell the operator about skills that were skipped or shadowed."""
        from .discovery.skill_tools import skills_of

        assert self._services is not None
        skill_set = await skills_of(self._services)
        index = skill_set.index_text()
        if index:
            prompt = f"{self.session_config.system_prompt}\n\n{index}"
            self.session_config = replace(self.session_config, system_prompt=prompt)
        for note in skill_set.notes():
            log.warning("skills: %s", note)
            await self.outbox.send("operator", note, channel="operator")

    def _new_discovery(self, settings: DiscoverySettings) -> Discovery:
        from .discovery.index import ToolIndex

        index = ToolIndex()
        if settings.embeddings_model is not None:
            # The hybrid ranking: the model through ONNX Runtime for needs of up to 48 tokens
            # (a few milliseconds instead of the ~17 ms of torch on a small CPU) and its static
            # token embeddings for every need; both derived once, then cached.
            from .discovery.onnx_embeddings import OnnxEmbedder
            from .discovery.static_embeddings import StaticEmbedder

            model = Path(settings.embeddings_model)
            index = ToolIndex(
                embedder=StaticEmbedder.from_model(model),
                precise_embedder=OnnxEmbedder.from_model(model),
            )
        return Discovery(index=index, core_names=self._core_names, k=settings.k)

    async def _index_deferred_tools(self) -> None:
        """Give the discovery index every tool outside the prompt, grouped by server: an MCP
        tool under its server, the runtime's own under "local". Only changed servers are
        re-indexed, and their new texts are embedded in a worker thread (seconds for thousands
        of tools), so the event loop keeps serving meanwhile; one update at a time, so a slower
        one cannot land after, and undo, a newer one."""
        if self._services is None:
            return
        discovery = self._services.state.get(Discovery)
        if not isinstance(discovery, Discovery):
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
        from .discovery.session_tools import LOCAL_SERVER, catalog_entry

        core = set(self._core_names)
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
            for config in self.mcp_servers:
                status = self.mcp.server(config.name)
                if status is not None:
                    self.result_cache.declare_third_party(status.tools, trusted=config.trusted)
        await self._index_deferred_tools()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        assert self._tg is not None
        self._tg.cancel_scope.cancel()
        return await self._stack.__aexit__(exc_type, exc, tb)

    @property
    def services(self) -> Services:
        if self._services is None:
            raise UserError("The runtime is not running: use `async with Runtime(...) as rt:`.")
        return self._services

    @property
    def tasks(self) -> TaskManager:
        return self.services.tasks

    async def _recover(self) -> None:
        """Reload what a previous run stored: trajectories, pending events, lost tasks.

        Sessions are started only once everything is queued, so their first model request
        sees the whole picture rather than half of it.
        """
        if self.store is None:
            return
        self._recovering = True
        try:
            for session_id in await self.store.sessions():
                await self.session(session_id)
            for event in await self.store.pending_events():
                session = await self.session(event.session)
                if event.id in session.trajectory.consumed_event_ids():
                    # Appended just before a crash, marked consumed too late: not twice.
                    await self.store.mark_events([event.id], "consumed")
                    continue
                await session.handle(event)
            for record in await self.store.mark_running_tasks_lost():
                await self.submit(
                    Event(
                        kind=SYSTEM_ALERT,
                        source=Source(type="system", id="runtime"),
                        content=(
                            f"Task {record.id} ({record.tool} {record.description!r}) was lost "
                            "when the runtime stopped; it is no longer running and its result "
                            "is unknown."
                        ),
                        context={"task_id": record.id, "state": "lost"},
                        session=record.session,
                    )
                )
        finally:
            self._recovering = False
        for session in self.sessions.values():
            await self._start(session)

    # --- sessions and events -------------------------------------------------------------------

    async def session(self, session_id: str = "main") -> AgentSession:
        """The session with this id, started (and reloaded from the store) on first use."""
        session = self.sessions.get(session_id)
        if session is None:
            session = await self._load_session(session_id)
            self.sessions[session_id] = session
        if not self._recovering:
            await self._start(session)
        return session

    async def _load_session(self, session_id: str) -> AgentSession:
        if self._tg is None:
            raise UserError("The runtime is not running: use `async with Runtime(...) as rt:`.")
        messages = await self.store.load_trajectory(session_id) if self.store else []
        trajectory = Trajectory(session_id, messages, store=self.store)
        await trajectory.repair()
        return AgentSession(
            session_id,
            model=self.model,
            registry=self.registry,
            services=self.services,
            trajectory=trajectory,
            router=self.router,
            config=self.session_config,
            parallel_model=self.parallel_model,
            observer=self.observer,
            settled=self.services.tasks.settled,
        )

    async def _start(self, session: AgentSession) -> None:
        if session.id in self._started or self._tg is None:
            return
        self._started.add(session.id)
        self._tg.start_soon(session.run, name=f"session {session.id}")
        await session.wait_started()

    async def submit(self, event: Event) -> Decision:
        """Persist an event and hand it to its session; returns how it was routed.

        A user's answer to an open approval request ("/approve a3f9", or "yes" while one
        question is open) is stored as consumed and answers the request; the agent does not
        see it as a new message."""
        if self._answers_approval(event):
            if self.store is not None:
                await self.store.add_event(event, status="consumed")
            return Decision(Strategy.QUEUE, reason="an answer to an approval request", wake=False)
        if self.store is not None:
            await self.store.add_event(event)
        session = await self.session(event.session)
        return await session.handle(event)

    def _answers_approval(self, event: Event) -> bool:
        gate = self.gate
        if gate is None or gate.approvals is None or event.kind != USER_INPUT:
            return False
        if not isinstance(event.content, str):
            return False
        return gate.approvals.answer_from_text(event.session, event.content)

    @property
    def approvals(self) -> Approvals | None:
        """Open approval requests, to list and answer from code (a web console, a bot)."""
        return self.gate.approvals if self.gate is not None else None

    async def submit_many(self, events: Sequence[Event]) -> list[Decision]:
        """Persist several events in one write, then hand each to its session, in order.

        For channels that deliver bursts (a mailbox sync, a webhook batch): one commit instead
        of one per event. Nothing is stored if any event cannot be (e.g. a duplicate id).
        """
        if self.store is not None and events:
            await self.store.add_events(events)
        decisions = []
        for event in events:
            session = await self.session(event.session)
            decisions.append(await session.handle(event))
        return decisions

    def is_idle(self, *, include_tasks: bool = True) -> bool:
        """No session is working or holding pending events (nor, by default, running tasks)."""
        if include_tasks and self._services is not None and self._services.tasks.unsettled():
            return False
        return all(not s.busy and not s.pending for s in self.sessions.values())

    async def wait_idle(self, *, include_tasks: bool = True) -> None:
        """Wait until every session is idle (and, by default, no task runs).

        Bound it with `anyio.fail_after` where it may not happen.
        """
        settled = self.services.tasks.settled
        while not self.is_idle(include_tasks=include_tasks):
            await settled.wait()

    def transcript(self, session_id: str = "main") -> list[dict[str, Any]]:
        from .messages import to_openai_shape

        return [to_openai_shape(m) for m in self.sessions[session_id].trajectory.messages]
