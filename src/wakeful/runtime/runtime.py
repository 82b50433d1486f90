"""The runtime: one event loop that owns the store, the tasks, the timers and every session.

`Runtime` is an async context manager. Inside it, `submit(event)` persists an event and hands it
to its session, which routes it (cancel, queue or parallel). On entry the runtime recovers what a
previous run left behind, loading only the sessions that have work: those whose trajectory was cut
off (a call without its result, repaired; a message awaiting the model), those with pending events
(re-queued), and those with a task that was running when the runtime was killed (reported lost).
Every other session loads on its next event. Requests to people it left open are open again (their
outcomes arrive as `human.answer` events), and those whose call ended with it are closed as
ended (see `wakeful.safety.approvals`). As one worker of several sharing a PostgreSQL store
(`cluster`), it recovers only the sessions it takes over, each with its open requests and
children, and every write of a session goes through its lease's fence (see `.worker`). On a clean
stop, background tasks still running are cancelled, their processes stopped, and each session is
told at the next start (a stored event). With a store, sessions that stay idle are unloaded
(`evict_idle_after_seconds`) and reloaded from it on their next event.

`Runtime` is the façade over one module per part: its options as one value (`.settings`), the
tools it offers (`.catalog`), the parts built on entry (`.assembly`), what it picks up from a
previous run (`.recovery`), the sessions it holds in memory (`.loaded_sessions`), how an event
enters (`.intake`), where channels deliver (`.inbox`), the channels it runs (`.channels`) and the
alerts for whoever runs it (`.operator_alerts`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from contextlib import AsyncExitStack
from dataclasses import replace
from functools import partial
from types import TracebackType
from typing import TYPE_CHECKING, Any, Unpack

import anyio
from anyio.abc import TaskGroup

from ..activity import ActivitySignal, UserActivity
from ..agent.hitl_prompt import with_hitl_section
from ..agent.router import Decision, Router
from ..agent.session import AgentSession, SessionConfig
from ..core.session_writes import shared_writes
from ..delivery.dispatcher import Dispatcher
from ..delivery.settings import DeliverySettings
from ..errors import UserError
from ..events import USER_INPUT, Event
from ..mcp.elicitation import ElicitationForm
from ..models.base import Model
from ..safety.approvals import Approvals
from ..safety.cases import CaseBook, last_user_request
from ..safety.gate import CallGate
from ..services import Outbox, Services, close_state
from ..subagents.definitions import check_definitions
from ..subagents.manager import Subagents
from ..tools.tasks import TaskManager
from .assembly import (
    check_sandbox,
    load_timers,
    new_services,
    open_store,
    start_channels,
    start_eviction,
)
from .catalog import ToolCatalog, core_tools
from .channels import RuntimeChannels, check_specs
from .idle_eviction import IdleEviction, SessionSettled
from .inbox import RuntimeInbox
from .intake import EventIntake
from .loaded_sessions import LoadedSessions
from .operator_alerts import alert_operator, disk_space_alert
from .recovery import recover, restored_trajectory
from .settings import RuntimeOptions, RuntimeSettings
from .subagent_host import RuntimeSubagentHost, child_config, child_registry

if TYPE_CHECKING:
    from ..channels.registry import ChannelSpec
    from ..channels.timers import TimerService
    from ..core.channel import ChannelHealth
    from ..core.runtime_store import RuntimeStore
    from ..mcp.client import MCPToolset
    from ..safety.commands import PolicySettings
    from .worker import SessionCluster

__all__ = ["Runtime", "RuntimeSettings", "core_tools"]

log = logging.getLogger(__name__)


class Runtime:
    """Runs agent sessions against one model, one tool set and one store.

    The keyword arguments are the fields of :class:`RuntimeSettings`, one for one (see there
    what each does and its default): `Runtime(model=model, tools=[get_weather],
    store_path="agent.db")`. `Runtime.from_settings` builds a runtime from such a value.
    """

    def __init__(self, *, model: Model, **options: Unpack[RuntimeOptions]) -> None:
        self.settings = settings = RuntimeSettings.of(model, **options)
        self.model = model
        # The safety layers around every call (see wakeful.safety.gate); "default" is the
        # rule-based sidecar with the command policy, the breaker, approvals through the outbox
        # and, with a store, the audit log. None runs every call unchecked.
        gate = settings.gate
        self.gate: CallGate | None = CallGate() if gate == "default" else gate
        self.catalog = ToolCatalog(settings)
        self.registry = self.catalog.registry
        # The skills' index is added to the system prompt on entry.
        self.session_config = settings.session_config or SessionConfig()
        self.router = settings.router or Router()
        self.outbox = settings.outbox or Outbox()
        # The sessions in memory, by id. With a store, a session idle for
        # `evict_idle_after_seconds` (measured on `clock`) is unloaded: its loop stops and it
        # leaves this dict; its next event reloads it from the store.
        self._sessions = LoadedSessions(self._load_session)
        self.sessions: dict[str, AgentSession] = self._sessions.by_id
        # When the user was last seen, on any channel (the system channel's inactivity check).
        self.activity = UserActivity(settings.clock)
        self._approvals: Approvals | None = None
        # The decisions people made, as cases (the learning loop), once entered.
        self.cases: CaseBook | None = None
        # The delivery policy of the current run (see wakeful.delivery), once entered.
        self.delivery: Dispatcher | None = None
        # The child agents of every session, when agents are defined (see wakeful.subagents).
        self.subagents: Subagents | None = (
            Subagents(
                check_definitions(settings.agents),
                limits=settings.subagent_limits,
                # The small side model writes children's contexts (the llm strategy).
                context_model=settings.parallel_model,
            )
            if settings.agents
            else None
        )
        self._intake = EventIntake(
            max_event_bytes=self.session_config.max_event_bytes,
            hand=self._hand,
            answers_approval=self._answers_approval,
        )
        self._eviction: IdleEviction | None = None
        # Where channels deliver (see `.inbox`); the store is set on entry.
        self.inbox = self._new_inbox(None)
        self._channels: RuntimeChannels | None = None
        self.store: RuntimeStore | None = None
        self.timers: TimerService | None = None
        self._tg: TaskGroup | None = None
        self._services: Services | None = None
        # Set before entry to run as one worker of several sharing a PostgreSQL store (see
        # `.worker`): only the sessions this worker owns run here.
        self.cluster: SessionCluster | None = None
        self._entered = False
        self._stack = AsyncExitStack()

    @classmethod
    def from_settings(cls, settings: RuntimeSettings) -> Runtime:
        """A runtime with these settings; the same as passing each field as a keyword."""
        return cls(**vars(settings))

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
        settings = self.settings
        # A bad channel table fails the start before anything is opened.
        check_specs(settings.channels, settings.channel_kinds)
        self.store = self._intake.store = store = await open_store(settings, self._stack)
        self._tg = await self._stack.enter_async_context(anyio.create_task_group())
        self._sessions.open(self._tg)
        if store is not None:
            store.watch_space(self._disk_space_changed)
        self._services = new_services(
            settings,
            self._tg,
            store,
            emit=self.submit,
            submit_task_result=self._intake.submit_task_result,
            outbox=self.outbox,
        )
        self._services.state[UserActivity] = self.activity
        # The delivery policy routes what the outbox sends from now on; the channels that can
        # reach the user join it once they run.
        delivery = self._delivery_for(self.outbox)
        # The decisions people make, kept as cases (the learning loop); in the store if any.
        self.cases = CaseBook(
            store.cases if store is not None else None, context_of=self._last_user_request
        )
        self.gate = self._complete_gate(store)
        # One queue of requests to people: the gate's approvals, MCP input requests and the
        # agent's own (request_human_approval / request_human_input).
        self._approvals = self._approvals_for(self.gate, store)
        self._services.state[Approvals] = self._approvals
        # It hands the outcome of a request the agent did not wait for to its session as a
        # `human.answer` event, once (a second hand-over after a crash is dropped by its id).
        serve = partial(self._approvals.serve, settled=self._services.tasks.settled.notify)
        await self._tg.start(serve, self._deliver_once, name="requests to people")
        # Tools' long-lived state (interpreters, shell history) ends before the task group.
        self._stack.push_async_callback(close_state, self._services)
        self._eviction = await start_eviction(settings, self._tg, store, self._evict)
        if "run_shell" in self.registry:
            await check_sandbox(settings)
        if settings.skills is not None:
            self.session_config = await self.catalog.with_skills_index(
                self.session_config, self._services, self.outbox
            )
        if "request_human_approval" in self.registry:  # when to ask a person, and how
            self.session_config = with_hitl_section(self.session_config)
        # Discovery before recovery (sessions reloaded from the store restore what they had
        # loaded) and before the MCP servers (their first listing is indexed as it arrives).
        await self.catalog.start_discovery(self._services)
        # Timers are loaded now, so recovered sessions' timer tools see every timer, and fire
        # only once recovery has queued the pending events.
        self.timers = await load_timers(settings, store, self._services, self._hand)
        if self.subagents is not None:
            self._services.state[Subagents] = self.subagents
            if store is not None:
                self.subagents.repository = store.subagents
            self.subagents.starting()
        if self.cluster is not None:
            # Each session's requests and children are taken up with the session, by the
            # worker that takes it over (see `_take_up`), whose outcomes go to the store.
            self._fence_session_writes(self.cluster)
            self.inbox = self._new_inbox(store)
        elif self.subagents is not None:
            await self.subagents.restore()
        await self._recover()
        if self.timers is not None:
            await self._tg.start(self.timers.run)
        # After recovery too: what a channel delivers now goes to sessions already restored.
        self.inbox = self._new_inbox(store)
        if self.cluster is None:
            # The requests to people a previous run left: open again (answerable as soon as
            # the channels run), their outcomes handed over, or ended with their call.
            await self._approvals.restore(form_of=ElicitationForm.from_schema)
        if self.subagents is not None:
            host = RuntimeSubagentHost(
                self._deliver_once,
                self.sessions,
                self._services.tasks,
                self._services.tasks.settled,
            )
            await self.subagents.start(host, self._tg)
        self._channels = await start_channels(
            settings, self._tg, self.inbox, store, self._services, cluster=self.cluster
        )
        if delivery is not None:
            delivery.reach = self.outbox.reach = self._channels
            await self._tg.start(delivery.run, name="delivery policy")
        # After recovery, so a server's alerts cannot start sessions before it is done.
        await self.catalog.connect(
            self._stack, emit=self.submit, gate=self.gate, alert_operator=self._alert_operator
        )

    def _delivery_for(self, outbox: Outbox) -> Dispatcher | None:
        """The delivery policy, installed in `outbox` for this run (None when the caller's
        outbox routes messages its own way)."""
        if outbox.route is not None:
            return None
        settings = self.settings.delivery or DeliverySettings()
        self.activity.active_minutes = settings.active_minutes
        dispatcher = Dispatcher(settings, activity=self.activity, clock=self.settings.clock)
        self.delivery = dispatcher
        if outbox.clock is None and self.settings.clock is not None:
            outbox.clock = self.settings.clock
        dispatcher.install(outbox)
        self._stack.callback(dispatcher.uninstall, outbox)
        return dispatcher

    def _new_inbox(self, store: RuntimeStore | None) -> RuntimeInbox:
        return RuntimeInbox(
            store=store,
            hand=self._hand,
            answers_approval=self._answers_approval,
            max_event_bytes=self.session_config.max_event_bytes,
            settled=self._inbox_settled,
        )

    def _inbox_settled(self) -> None:
        """The inbox handed over the last event it was delivering: wake `wait_idle`."""
        if self._services is not None:
            self._services.tasks.settled.notify()

    async def _hand(self, event: Event) -> Decision:
        """Hand a stored event to its session, noting the user's activity (as one worker of
        several: only when its session runs here)."""
        self.activity.saw(event)
        if self.cluster is not None and (elsewhere := await self.cluster.route(event)):
            return elsewhere
        return await self._sessions.hand(event)

    def _fence_session_writes(self, cluster: SessionCluster) -> None:
        """Have every write of a session (its messages, task records, requests to a person,
        children) go through the view fenced by its lease (see wakeful.core.session_writes),
        until the runtime stops: a worker that lost a session writes nothing more for it."""
        parts: list[Outbox | TaskManager | Approvals | Subagents] = [self.outbox, self.tasks]
        if self.subagents is not None:
            parts.append(self.subagents)
        # A queue of requests given a repository of its own keeps its writes there.
        shared = self.store.human_requests if self.store is not None else None
        if self._approvals is not None and self._approvals.repository is shared:
            parts.append(self._approvals)
        for part in parts:
            part.session_writes = cluster.fenced
            self._stack.callback(setattr, part, "session_writes", shared_writes)

    async def _take_up(self, session_id: str) -> None:
        """Take up what a previous owner left of a session taken over here (as one worker of
        several): its open requests to a person, and the children that go with it."""
        if self.subagents is not None:
            await self.subagents.restore(session=session_id)
        if self._approvals is not None:
            await self._approvals.restore(form_of=ElicitationForm.from_schema, session=session_id)

    def _has_work(self, session_id: str) -> bool:
        """Whether a session has work under way here (tasks, a child, an answer awaited):
        as one worker of several, such a session is not released as idle."""
        if self.services.tasks.has_unsettled(session_id):
            return True
        if self.subagents is not None and self.subagents.busy(session_id):
            return True
        return self._approvals is not None and self._approvals.awaiting(session_id)

    def _forget(self, session_id: str) -> None:
        """Drop a session this worker no longer owns (see `.worker`), writing nothing."""
        if session_id in self.sessions:
            self._sessions.unload(session_id)
            self.catalog.forget_session(session_id)
        # Its new owner reports them lost to the session: they must not run on here.
        for task in self.services.tasks.running(session_id):
            task.cancel("its session moved to another worker")
        # Its new owner takes up its requests to a person and its children too.
        if self._approvals is not None:
            self._approvals.forget_session(session_id)
        if self.subagents is not None:
            self.subagents.forget_session(session_id)

    @property
    def channels(self) -> dict[str, ChannelHealth]:
        """The running channels' health by name ("email:work"); empty before entry."""
        return self._channels.health() if self._channels is not None else {}

    async def connect_channel(self, spec: ChannelSpec) -> None:
        """Start a channel now (kept in the store and reconnected on the next start); a bad
        kind, name or settings raise UserError naming the field."""
        await self._running_channels().connect(spec)

    async def disconnect_channel(self, name: str) -> bool:
        """Stop the channel `name` ("webhook:ci") and forget it; False when there is none."""
        return await self._running_channels().disconnect(name)

    def _running_channels(self) -> RuntimeChannels:
        if self._channels is None:
            raise UserError("The runtime is not running: use `async with Runtime(...) as rt:`.")
        return self._channels

    def _complete_gate(self, store: RuntimeStore | None) -> CallGate | None:
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
        approvals, audit = given.approvals, given.audit
        if approvals is None:
            from ..safety.approvals import Approvals

            approvals = Approvals(
                self.outbox,
                timeout_seconds=given.approval_timeout_seconds,
                cases=self.cases,
                repository=store.human_requests if store is not None else None,
            )
        reviewer = given.reviewer
        if reviewer is not None and reviewer.cases is None and approvals.cases is not None:
            reviewer = reviewer.with_cases(approvals.cases)
        if audit is None and store is not None:
            from ..safety.audit import AuditLog

            audit = AuditLog(store, emit=self._alert_operator)
        breaker = DenialBreaker(given.breaker.threshold)
        return replace(
            given,
            sidecar=sidecar,
            breaker=breaker,
            approvals=approvals,
            reviewer=reviewer,
            audit=audit,
        )

    async def _alert_operator(self, event: Event) -> None:
        """An alert for whoever runs the runtime (see `.operator_alerts`); no agent is woken."""
        await alert_operator(self.store, self.outbox, event)

    def _disk_space_changed(self, short: bool) -> None:
        """One operator alert when the store's disk fills, one when it has room again."""
        if self.store is not None and self._tg is not None:
            alert = disk_space_alert(self.store, short)
            self._tg.start_soon(self._alert_operator, alert, name="disk space alert")

    def _policy_settings(self) -> PolicySettings:
        """The command policy's settings (see `RuntimeSettings.policy_settings`)."""
        return self.settings.policy_settings()

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

    @property
    def mcp(self) -> MCPToolset | None:
        """The MCP servers' connections while the runtime runs with any; else None."""
        return self.catalog.mcp

    async def _recover(self) -> None:
        """Reload what a previous run left unfinished (see `.recovery`); only the sessions
        concerned are loaded, the others on their next event.

        Sessions are started only once everything is queued, so their first model request
        sees the whole picture rather than half of it.
        """
        if self.store is None:
            return
        if self.cluster is not None and self._tg is not None:  # only the sessions it takes over
            await self.cluster.start(
                self._tg,
                self.store,
                self._sessions,
                submit=self.submit,
                forget=self._forget,
                has_tasks=self._has_work,
                settled=self.services.tasks.settled.notify,
                take_up=self._take_up,
                saw=self.activity.saw,
            )
            self._sessions.on_moved = self.cluster.moved
            return
        with self._sessions.held():
            await recover(self.store, load=self._sessions.loaded, submit=self.submit)
        await self._sessions.start_all()

    # --- sessions and events -------------------------------------------------------------------

    async def session(self, session_id: str = "main") -> AgentSession:
        """The session with this id, started (and reloaded from the store) on first use.

        With eviction on (see `evict_idle_after_seconds`), the object returned stands for the
        session while it is in memory: once unloaded, the next call returns a new one.
        """
        return await self._sessions.session(session_id)

    async def _load_session(self, session_id: str) -> AgentSession:
        if self._tg is None:
            raise UserError("The runtime is not running: use `async with Runtime(...) as rt:`.")
        writes = self.cluster.writes(session_id) if self.cluster is not None else None
        trajectory = await restored_trajectory(session_id, self.store, writes=writes)
        model, registry, config = self.model, self.registry, self.session_config
        subagents = self.subagents
        child = await subagents.load(session_id) if subagents is not None else None
        if subagents is not None and child is not None:
            record, definition = child
            model = definition.model or model
            registry = child_registry(definition, record, registry, subagents.limits.max_depth)
            config = child_config(config, definition, record)
        return AgentSession(
            session_id,
            model=model,
            registry=registry,
            services=self.services,
            trajectory=trajectory,
            router=self.router,
            config=config,
            parallel_model=self.settings.parallel_model,
            observer=self.settings.observer,
            settled=self._settled_signal(session_id),
            alert=self._alert_operator,
            gate=self.gate,
            cache=self.catalog.result_cache,
        )

    def _settled_signal(self, session_id: str) -> ActivitySignal:
        """What the session notifies when it goes idle: the shared signal `wait_idle` waits
        on, and with eviction on, the start of the session's countdown too."""
        shared = self.services.tasks.settled
        if self._eviction is None:
            return shared
        return SessionSettled(session_id, shared, self._eviction)

    def _evict(self, session_id: str) -> bool:
        """Unload a session that stayed idle; False when it cannot go now.

        It goes only when idle with nothing of its own in flight: no event waiting, held for
        its next batch (progress) or being handed to it, no side answer, no unsettled task, no
        open approval. Nothing here awaits, so no event can slip in between the check and the
        unloading: an event handed before it pins the session (see `LoadedSessions.hand`), one
        handed after it reloads the session from the store.
        """
        session = self.sessions.get(session_id)
        if session is None:
            return True
        if not self._sessions.may_unload(session):
            return False
        if self.services.tasks.has_unsettled(session_id):
            return False
        if self.store is not None and self.store.held_writes:
            return False  # its trajectory may be held in memory for a full disk: keep it
        approvals = self.approvals
        if approvals is not None and approvals.pending(session_id):
            return False
        self._sessions.unload(session_id)
        self.catalog.forget_session(session_id)
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
        return await self._intake.submit(event)

    def _answers_approval(self, event: Event) -> bool:
        approvals = self.approvals
        if approvals is None or event.kind != USER_INPUT:
            return False
        if not isinstance(event.content, str):
            return False
        if not approvals.answer_from_text(event.session, event.content):
            return False
        self.activity.saw(event)
        return True

    def _approvals_for(self, gate: CallGate | None, store: RuntimeStore | None) -> Approvals:
        """The gate's request queue, or one of the runtime's own when it has no gate (kept in
        the store, when there is one)."""
        if gate is not None and gate.approvals is not None:
            return gate.approvals
        repository = store.human_requests if store is not None else None
        return Approvals(self.outbox, cases=self.cases, repository=repository)

    def _last_user_request(self, session: str) -> str:
        """What the user of `session` last asked (a case's context), if it is loaded."""
        loaded = self.sessions.get(session)
        return last_user_request(loaded.trajectory.messages) if loaded is not None else ""

    @property
    def approvals(self) -> Approvals | None:
        """Open requests to people (approvals, input), to list and answer from code (a web
        console, a bot); None before the runtime is entered."""
        return self._approvals

    async def _deliver_once(self, event: Event) -> None:
        """Store and hand over an event the runtime itself made, once: an id stored already
        (a result handed over again after a restart) is dropped."""
        await self.inbox.deliver(event)

    async def submit_many(self, events: Sequence[Event]) -> list[Decision]:
        """Persist several events in one write, then hand each to its session, in order.

        For channels that deliver bursts (a mailbox sync, a webhook batch): one commit instead
        of one per event. Nothing is stored if any event cannot be (e.g. a duplicate id, or a
        full disk: StoreFull).
        """
        return await self._intake.submit_many(events)

    def is_idle(self, *, include_tasks: bool = True) -> bool:
        """No session is working or holding pending events (nor, by default, running tasks).

        It costs O(sessions handed work since the last check), not O(sessions in memory):
        sessions found idle are dropped from the set it looks at until work reaches them."""
        if include_tasks and self._services is not None and self._services.tasks.has_unsettled():
            return False
        if include_tasks and self.subagents is not None and self.subagents.busy():
            return False  # a child at work, or a result on its way to the parent
        if include_tasks and self._approvals is not None and self._approvals.busy():
            return False  # a person's answer on its way to a session
        if self.cluster is not None and self.cluster.settling:
            return False  # a session taken over here, its events on their way to it
        if self.inbox.delivering:
            return False  # an event a channel brought in, stored, on its way to its session
        return self._sessions.all_idle()

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
