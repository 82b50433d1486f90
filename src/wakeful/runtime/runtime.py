"""The runtime: one event loop that owns the store, the tasks, the timers and every session.

`Runtime` is an async context manager. Inside it, `submit(event)` persists an event and hands it
to its session, which routes it (cancel, queue or parallel). On entry the runtime recovers what a
previous run left behind, loading only the sessions that have work: those whose trajectory was cut
off (a call without its result, repaired; a message awaiting the model), those with pending events
(re-queued), and those with a task that was running when the runtime was killed (reported lost).
Every other session loads on its next event. On a clean stop, background tasks still running are
cancelled, their processes stopped, and each session is told at the next start (a stored event).
With a store, sessions that stay idle are unloaded (`evict_idle_after_seconds`) and reloaded from
it on their next event.
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

from ..activity import ActivitySignal
from ..agent.router import Decision, Router, Strategy
from ..agent.session import AgentSession, SessionConfig, SessionObserver
from ..agent.trajectory import Trajectory
from ..discovery.session_tools import Discovery, DiscoverySettings
from ..errors import UserError
from ..events import (
    SYSTEM_ALERT,
    USER_INPUT,
    Event,
    InvalidEvent,
    Source,
    cut_to_fit,
    storable_event,
)
from ..mcp.config import MCPServerConfig
from ..models.base import Model
from ..safety.gate import CallGate
from ..services import Outbox, Services, close_state
from ..tools.cache import ResultCache
from ..tools.registry import ToolRegistry
from ..tools.spec import Tool
from ..tools.tasks import TaskManager, TaskRecord
from .idle_eviction import IdleEviction, SessionSettled

if TYPE_CHECKING:
    from ..channels.timers import TimerService
    from ..clock import Clock
    from ..discovery.catalog import CatalogServer
    from ..discovery.skill_tools import SkillsSettings
    from ..mcp.client import MCPToolset
    from ..mcp.pins import ToolPins
    from ..safety.approvals import Approvals
    from ..safety.commands import PolicySettings
    from ..store.sqlite import Store

log = logging.getLogger(__name__)


def core_tools() -> list[Tool]:
    """The tools every session starts with: talking to the user, tasks, shell, timers."""
    from ..toolkits.comms.reply import reply_to_user
    from ..toolkits.execution.run_shell import run_shell
    from ..toolkits.tasks import TASK_TOOLS
    from ..toolkits.triggers.shell_monitor import monitor_shell
    from ..toolkits.triggers.timers import TIMER_TOOLS

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
        evict_idle_after_seconds: float | None = 300.0,
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
            from ..discovery.session_tools import DISCOVERY_TOOLS

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
            from ..discovery.skill_tools import SKILL_TOOLS

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
        # The lock file of pinned MCP tool definitions (see wakeful.mcp.pins); None: off.
        self.mcp_pins = mcp_pins
        self.mcp: MCPToolset | None = None
        self._mcp_tool_names: set[str] = set()
        self._discovery_lock = anyio.Lock()
        # The sessions in memory. With a store, a session idle for `evict_idle_after_seconds`
        # (measured on `clock`) is unloaded: its loop stops and it leaves this dict; its next
        # event reloads it from the store. Without a store nothing is unloaded (its state
        # would be lost); None keeps every session loaded for the runtime's life.
        self.sessions: dict[str, AgentSession] = {}
        self.evict_idle_after_seconds = evict_idle_after_seconds
        self._eviction: IdleEviction | None = None
        # The cancel scope of each running session loop, by session id.
        self._loops: dict[str, anyio.CancelScope] = {}
        # Sessions that may be working: handed an event or started since `is_idle` last saw
        # them idle. The idle check looks at these only, not at every session in memory.
        self._active: set[str] = set()
        # Events being handed to each session: a session is never evicted while it has one.
        self._handing: dict[str, int] = {}
        # Sessions being loaded from the store, so that concurrent first uses load one.
        self._loading: dict[str, anyio.Event] = {}
        self.store: Store | None = None
        self.timers: TimerService | None = None
        self._tg: TaskGroup | None = None
        self._services: Services | None = None
        self._entered = False
        self._stack = AsyncExitStack()
        self._recovering = False

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
            from ..store.sqlite import Store

            # Store.open makes the folder itself, with an error that says why it cannot.
            self.store = await Store.open(self.store_path, synchronous=self.store_synchronous)
            self._stack.push_async_callback(self._close_store)
        self._tg = await self._stack.enter_async_context(anyio.create_task_group())
        store = self.store
        if store is not None:
            store.watch_space(self._disk_space_changed)
        tasks = TaskManager(
            self._tg,
            self._submit_task_result,
            on_change=store.save_task_nowait if store is not None else None,
            on_stopped=self._record_stopped_task if store is not None else None,
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
        if store is not None and self.evict_idle_after_seconds is not None:
            self._eviction = IdleEviction(
                self.evict_idle_after_seconds, self._evict, clock=self.clock
            )
            await self._tg.start(self._eviction.run)
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
            from ..channels.timers import TimerService

            # The service stores each fire itself, with the timer's advance (one transaction),
            # and hands it over stored. Loaded now, so recovered sessions' timer tools see every
            # timer; firing starts only after recovery has queued the pending events, so a fire
            # cannot reach a session twice (once fired, once recovered).
            self.timers = TimerService(store, self._hand_over_stored, clock=self.clock)
            self._services.timers = self.timers
            await self.timers.load()
        await self._recover()
        if self.timers is not None:
            await self._tg.start(self.timers.run)
        if self.mcp_servers or self.mcp_in_process:
            # After recovery, so a server's alerts cannot start sessions before it is done.
            from ..mcp.client import MCPToolset  # the MCP SDK only when servers are set

            self.mcp = MCPToolset(
                self.mcp_servers,
                emit=self.submit,
                on_tools_changed=self._sync_mcp_tools,
                reserved_names=self.registry.names,
                in_process=self.mcp_in_process,
                pins=self.mcp_pins,
                model=self.model,
                workdir=self.workdir,
            )
            await self._stack.enter_async_context(self.mcp)
            await self._sync_mcp_tools()
        else:
            await self._index_deferred_tools()

    async def _check_sandbox(self) -> None:
        """Fail now, not at the first command, where the sandbox asked for cannot be had, and
        warn loudly (once) where commands would run unconfined; see `run_shell`."""
        from ..safety.sandbox import Sandbox, SandboxSettings

        settings = next(
            (s for s in self.settings if isinstance(s, SandboxSettings)), SandboxSettings()
        )
        workspace = self.workdir or Path.cwd()
        await anyio.to_thread.run_sync(Sandbox, settings, workspace)  # probes bwrap once

    def _complete_gate(self, store: Store | None) -> CallGate | None:
        """Give the gate what only a running runtime has: a person to ask (through the outbox)
        and, with a store, an audit log whose alerts come back as events."""
        given = self.gate
        if given is None:
            return None
        # A copy: the gate handed in is never filled in, so it can serve another runtime (its
        # audit log would otherwise point at this one's store after it closed). Per-session
        # state (sidecar checks, denial counts) is this runtime's own.
        from ..safety.breaker import DenialBreaker
        from ..safety.sidecar import RuleSidecar

        sidecar = given.sidecar
        if not sidecar.has_policy:
            from ..safety.commands import CommandPolicy

            sidecar = RuleSidecar(sidecar.settings, CommandPolicy(self._policy_settings()))
        gate = replace(given, sidecar=sidecar, breaker=DenialBreaker(given.breaker.threshold))
        if gate.approvals is None:
            from ..safety.approvals import Approvals

            gate.approvals = Approvals(self.outbox, timeout_seconds=gate.approval_timeout_seconds)
        if gate.audit is None and store is not None:
            from ..safety.audit import AuditLog

            gate.audit = AuditLog(store, emit=self._alert_operator)
        self.gate = gate
        return gate

    async def _alert_operator(self, event: Event) -> None:
        """An alert for whoever runs the runtime (a tool that keeps failing): stored for
        `wakeful events tail` and sent on the outbox's "operator" channel; no agent is woken."""
        if self.store is not None:
            # Held in memory when the disk is full (the alert may be about that very thing).
            await self.store.keep_event(event, status="consumed")
        await self.outbox.send(event.session, event.text, channel="operator", urgency=event.urgency)

    def _disk_space_changed(self, short: bool) -> None:
        """One operator alert when the store's disk fills, one when it has room again."""
        store = self.store
        if store is None or self._tg is None:
            return
        if short:
            text = (
                f"The disk of the store {store.path} is full (or below the space kept in "
                "reserve). New events are refused: submit raises StoreFull. Running sessions go "
                "on; what they cannot write is kept in memory and written, in order, as soon as "
                f"there is room. Free space on the disk of {store.path.parent}; wakeful retries "
                "by itself."
            )
        else:
            text = (
                f"The disk of the store {store.path} has room again: what was kept in memory is "
                "stored, and new events are accepted."
            )
        event = Event(
            kind=SYSTEM_ALERT,
            source=Source(type="system", id="store"),
            content=text,
            context={"disk_full": short},
            urgency="high" if short else "normal",
        )
        self._tg.start_soon(self._alert_operator, event, name="disk space alert")

    def _policy_settings(self) -> PolicySettings:
        """The command policy's settings, with the runtime's workdir as its workspace unless
        the settings name one (a shell tool's writes there need no approval)."""
        from ..safety.commands import PolicySettings

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
        from ..discovery.skill_tools import skills_of

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
        from ..discovery.session_tools import LOCAL_SERVER, catalog_entry

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

    def _record_stopped_task(self, record: TaskRecord) -> None:
        """Store a background task the runtime's stop cut off, with the note its session reads
        at the next start (see `TaskManager`'s `on_stopped`).

        The note is stored, not handed over: the session's trajectory says the task was started
        and its result would come as an event, so without it the agent would wait for a result
        that never comes, or assume one. It is a pending event, so the next start loads the
        session and tells it before anything else, in the batch of whatever else is pending.
        """
        store = self.store
        if store is None or store.closed:
            return
        note = Event(
            kind=SYSTEM_ALERT,
            source=Source(type="system", id="runtime"),
            content=(
                f"Task {record.id} ({record.tool} {record.description!r}) was stopped when the "
                "runtime shut down; any processes it started were stopped and its result is "
                "unknown. Run it again if it is still needed."
            ),
            context={"task_id": record.id, "state": "cancelled", "reason": record.cancel_reason},
            session=record.session,
        )
        store.save_stopped_task_nowait(record, note)

    async def _recover(self) -> None:
        """Reload what a previous run left unfinished: cut-off trajectories, pending events,
        lost tasks; only the sessions concerned are loaded, the others on their next event.

        Sessions are started only once everything is queued, so their first model request
        sees the whole picture rather than half of it.
        """
        if self.store is None:
            return
        self._recovering = True
        try:
            # Loading repairs a call left without its result; a session whose last message
            # awaits the model is started and makes its request.
            for session_id in await self.store.sessions_to_resume():
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
                            "when the runtime stopped without shutting down (it crashed or was "
                            "killed); the processes it started were killed with it, so it is no "
                            "longer running and its result is unknown. Check what it did before "
                            "running it again."
                        ),
                        context={"task_id": record.id, "state": "lost"},
                        session=record.session,
                    )
                )
        finally:
            self._recovering = False
        # A copy: a started session may create others (an event for a new session) meanwhile.
        for session in list(self.sessions.values()):
            await self._start(session)

    # --- sessions and events -------------------------------------------------------------------

    async def session(self, session_id: str = "main") -> AgentSession:
        """The session with this id, started (and reloaded from the store) on first use.

        With eviction on (see `evict_idle_after_seconds`), the object returned stands for the
        session while it is in memory: once unloaded, the next call returns a new one.
        """
        session = await self._loaded(session_id)
        if not self._recovering:
            await self._start(session)
        return session

    async def _loaded(self, session_id: str) -> AgentSession:
        """The session in memory, loading it if needed; concurrent callers share one load."""
        while (session := self.sessions.get(session_id)) is None:
            loading = self._loading.get(session_id)
            if loading is None:
                break
            await loading.wait()
        if session is not None:
            return session
        loading = self._loading[session_id] = anyio.Event()
        try:
            session = await self._load_session(session_id)
            self.sessions[session_id] = session
        finally:
            del self._loading[session_id]
            loading.set()
        return session

    async def _load_session(self, session_id: str) -> AgentSession:
        if self._tg is None:
            raise UserError("The runtime is not running: use `async with Runtime(...) as rt:`.")
        messages = await self.store.load_trajectory(session_id) if self.store else []
        trajectory = Trajectory(session_id, messages, store=self.store)
        if self.store is not None:
            # A reply whose message went out before the crash is answered as sent, not lost.
            from ..toolkits.comms.reply import recovered_replies

            known = await recovered_replies(self.store, trajectory)
            if known:
                await trajectory.append(*known)
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
            settled=self._settled_signal(session_id),
            alert=self._alert_operator,
        )

    def _settled_signal(self, session_id: str) -> ActivitySignal:
        """What the session notifies when it goes idle: the shared signal `wait_idle` waits
        on, and with eviction on, the start of the session's countdown too."""
        shared = self.services.tasks.settled
        if self._eviction is None:
            return shared
        return SessionSettled(session_id, shared, self._eviction)

    async def _start(self, session: AgentSession) -> None:
        if session.id in self._loops or self._tg is None:
            return
        scope = self._loops[session.id] = anyio.CancelScope()
        self._tg.start_soon(self._run_session, session, scope, name=f"session {session.id}")
        await session.wait_started()
        self._active.add(session.id)

    @staticmethod
    async def _run_session(session: AgentSession, scope: anyio.CancelScope) -> None:
        with scope:  # cancelled when the session is evicted
            await session.run()

    def _evict(self, session_id: str) -> bool:
        """Unload a session that stayed idle; False when it cannot go now.

        It goes only when idle with nothing of its own in flight: no event waiting, held for
        its next batch (progress) or being handed to it, no side answer, no unsettled task, no
        open approval. Nothing here awaits, so no
        event can slip in between the check and the unloading: an event handed before it
        pins the session (see `_hand`), one handed after it reloads the session from the store.
        """
        session = self.sessions.get(session_id)
        if session is None:
            return True
        if not session.idle or session.passive or self._handing.get(session_id):
            return False
        if session_id not in self._loops or self.services.tasks.has_unsettled(session_id):
            return False
        if self.store is not None and self.store.held_writes:
            return False  # its trajectory may be held in memory for a full disk: keep it
        approvals = self.approvals
        if approvals is not None and approvals.pending(session_id):
            return False
        del self.sessions[session_id]
        self._active.discard(session_id)
        self._loops.pop(session_id).cancel()
        discovery = self.services.state.get(Discovery)
        if isinstance(discovery, Discovery):
            discovery.loaded.pop(session_id, None)  # restored from the trajectory on reload
        if self.gate is not None:
            self.gate.forget_session(session_id)
        log.debug("session %s evicted after being idle", session_id)
        return True

    async def submit(self, event: Event) -> Decision:
        """Persist an event and hand it to its session; returns how it was routed.

        A user's answer to an open approval request ("/approve a3f9", or "yes" while one
        question is open) is stored as consumed and answers the request; the agent does not
        see it as a new message. An event the store cannot keep (over
        `SessionConfig.max_event_bytes`, or content that is not JSON) raises InvalidEvent.
        While the store's disk is full, the event is refused with StoreFull (a StoreError) and
        nothing of it is stored; send it again once space is freed."""
        return await self._submit(event, hold_when_full=False)

    async def _submit(self, event: Event, *, hold_when_full: bool) -> Decision:
        """`submit`; with `hold_when_full`, an event about work already done is held in memory
        on a full disk (and written when space returns) instead of being refused."""
        event = storable_event(event, max_bytes=self.session_config.max_event_bytes)
        if self._answers_approval(event):
            if self.store is not None:
                await self.store.keep_event(event, status="consumed")
            return Decision(Strategy.QUEUE, reason="an answer to an approval request", wake=False)
        if self.store is not None:
            if hold_when_full:
                await self.store.keep_event(event)
            else:
                await self.store.add_event(event)
        return await self._hand(event)

    async def _hand_over_stored(self, event: Event) -> Decision:
        """Hand an event that is already stored (a timer's fire) to its session."""
        return await self._hand(event)

    async def _hand(self, event: Event) -> Decision:
        """Hand a stored event to its session, loading the session if needed.

        The session cannot be evicted from the moment this starts until the event is in its
        queue, so the event reaches a session that will handle it, exactly once."""
        session_id = event.session
        self._handing[session_id] = self._handing.get(session_id, 0) + 1
        try:
            session = await self.session(session_id)
            decision = await session.handle(event)
            self._active.add(session_id)  # no await since the event was queued
        finally:
            left = self._handing.pop(session_id) - 1
            if left:
                self._handing[session_id] = left
        return decision

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
        of one per event. Nothing is stored if any event cannot be (e.g. a duplicate id, or a
        full disk: StoreFull).
        """
        cap = self.session_config.max_event_bytes
        events = [storable_event(event, max_bytes=cap) for event in events]
        if self.store is not None and events:
            await self.store.add_events(events)
        return [await self._hand(event) for event in events]

    async def _submit_task_result(self, event: Event) -> Decision:
        """Submit a background task's result: one too large to store is cut to fit, visibly,
        rather than refused, since no caller is there to see the refusal; on a full disk it is
        held in memory and stored when space returns, for the same reason."""
        try:
            return await self._submit(event, hold_when_full=True)
        except InvalidEvent as exc:
            cap = self.session_config.max_event_bytes
            return await self._submit(cut_to_fit(event, exc, max_bytes=cap), hold_when_full=True)

    def is_idle(self, *, include_tasks: bool = True) -> bool:
        """No session is working or holding pending events (nor, by default, running tasks).

        It costs O(sessions handed work since the last check), not O(sessions in memory):
        sessions found idle are dropped from the set it looks at until work reaches them."""
        if include_tasks and self._services is not None and self._services.tasks.has_unsettled():
            return False
        for session_id in list(self._active):
            session = self.sessions.get(session_id)
            if session is not None and not session.idle:
                return False
            self._active.discard(session_id)
        return True

    async def wait_idle(self, *, include_tasks: bool = True) -> None:
        """Wait until every session is idle (and, by default, no task runs).

        Bound it with `anyio.fail_after` where it may not happen.
        """
        settled = self.services.tasks.settled
        while not self.is_idle(include_tasks=include_tasks):
            await settled.wait()

    def transcript(self, session_id: str = "main") -> list[dict[str, Any]]:
        from ..messages import to_openai_shape

        session = self.sessions.get(session_id)
        if session is None:
            raise UserError(
                f"Session {session_id!r} is not in memory: it was never used, or was unloaded "
                "after being idle (see evict_idle_after_seconds). Call `await rt.session("
                f"{session_id!r})` first to load it from the store."
            )
        return [to_openai_shape(m) for m in session.trajectory.messages]
