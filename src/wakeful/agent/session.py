"""The agent session loop: one per session, consuming events only at safe points.

The loop keeps the five rules of the trajectory:

1. the assistant message is recorded as soon as the model has finished it;
2. a tool result is recorded only when the tool has finished;
3. a tool interrupted while running gets a placeholder result (it goes on as a background task)
   or, when the interrupt is a stop, a cancellation result, so every call stays paired;
4. a model turn interrupted mid-stream is discarded, never recorded;
5. events that do not interrupt wait in a queue and are appended together at the next safe point.

Safe points are the end of a model turn and the return of a tool call. Everything that reaches
the session goes through :meth:`AgentSession.handle`, which asks the router and then either
queues the event (:mod:`.intake`), interrupts the running step (:mod:`.interruption`), or answers
the event in a side session (:mod:`.side_question`). A turn's tool calls are run by
:mod:`.call_scheduling` through the session's tool pipeline (:mod:`wakeful.tools.pipeline`); the
model's stream and a failed request are :mod:`.model_turn`'s.

A session's fault stays in that session. A model request that fails unexpectedly (an exception
other than `ModelAPIError`, or a stream silent for `model_stream_idle_seconds`) is retried with
exponential backoff `model_fault_retries` times, since a stuck connection or a flaky SDK often
recovers; then the session pauses until its next event, the user is told and the operator gets a
`system.alert`. Any other unexpected exception in the loop (a tool's path, the store) pauses the
session at once, after answering its open calls, with the same alert; the alert event (stored as
consumed) is the record. Other sessions never notice.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Literal

import anyio
from anyio.abc import TaskGroup

from ..activity import ActivitySignal, UserActivity
from ..core.executor import CallChecks
from ..discovery.session_tools import Discovery
from ..errors import SessionMoved
from ..events import TOOL_RESULT, Event
from ..messages import Message, SystemMessage
from ..models.base import Model, TurnEnd, Usage
from ..services import Services
from ..tools.cache import ResultCache
from ..tools.pipeline import assemble_pipeline
from ..tools.registry import ToolRegistry
from .batch import ParallelExchange, PendingItem, render_status
from .call_scheduling import CallScheduler, describe_call
from .faults import FaultReporter, describe_exception, single_exception
from .intake import Intake
from .interruption import Interruption
from .model_turn import ModelTurns
from .router import Decision, Router, Strategy
from .session_config import NoObserver, SessionConfig, SessionObserver
from .side_question import SideQuestions
from .trajectory import Trajectory
from .turn_repair import repair_turn

__all__ = ["AgentSession", "SessionConfig", "SessionObserver", "describe_call"]

log = logging.getLogger(__name__)

Phase = Literal["idle", "model", "tools"]


class AgentSession:
    """One agent session: its trajectory, its queue of pending events, and its loop."""

    def __init__(
        self,
        session_id: str,
        *,
        model: Model,
        registry: ToolRegistry,
        services: Services,
        trajectory: Trajectory,
        router: Router | None = None,
        config: SessionConfig | None = None,
        parallel_model: Model | None = None,
        observer: SessionObserver | None = None,
        settled: ActivitySignal | None = None,
        alert: Callable[[Event], Awaitable[None]] | None = None,
        gate: CallChecks | None = None,
        cache: ResultCache | None = None,
    ) -> None:
        self.id = session_id
        self.model = model
        self.registry = registry
        self.services = services
        self.trajectory = trajectory
        self.router = router or Router()
        self.config = config or SessionConfig()
        self.parallel_model = parallel_model
        self.observer: SessionObserver = observer or NoObserver()
        self.intake = Intake()
        self.interruption = Interruption()
        self.loaded_tools: list[str] = []  # shown in the status block
        self.phase: Phase = "idle"
        # With discovery, the prompt holds only the core tools, fixed for the session's life so
        # that every request starts with the same bytes; other tools are found on demand.
        self.discovery: Discovery | None = services.state.get(Discovery)
        if self.discovery is not None:
            tool_definitions = self.discovery.core_definitions(registry)
            self.loaded_tools = self.discovery.loaded_for(session_id)
            self.discovery.restore(session_id, trajectory.messages)
        else:
            tool_definitions = registry.definitions()
        # Every call of this session and of its side sessions goes through the same pipeline:
        # call_tool unwrapped, the gate, the cache, the tool.
        self.tools = assemble_pipeline(
            registry,
            gate=gate,
            cache=cache,
            discovery=self.discovery is not None,
            recent=lambda: self.trajectory.messages,
        )
        # Where faults are reported: the runtime's operator channel (default: the outbox's).
        self.reporter = FaultReporter(session_id, services.outbox, alert)
        self.turns = ModelTurns(
            session_id,
            model=model,
            registry=registry,
            tool_definitions=tool_definitions,
            fixed_tools=self.discovery is not None,
            messages=lambda: self.trajectory.messages,
            tools=self.tools,
            config=self.config,
            observer=self.observer,
            interruption=self.interruption,
            reporter=self.reporter,
            pause=self._pause_until_event,
        )
        self.calls = CallScheduler(
            session_id,
            tools=self.tools,
            services=services,
            config=self.config,
            interruption=self.interruption,
            record=self._record,
            task_summary=trajectory.task_summary,
        )
        self._needs_model = trajectory.needs_model
        self._wait_for_event = False
        self._tg: TaskGroup | None = None
        self._started = anyio.Event()
        # Set when its writes were refused because another lease owns the session (a store
        # shared by workers): the loop has ended, and the runtime drops this copy.
        self.moved = False
        self.side_questions = SideQuestions(
            session_id,
            model=parallel_model or model,
            registry=registry,
            services=services,
            gate=gate,
            cache=cache,
            config=self.config,
            task_summary=trajectory.task_summary,
            done=self._side_answered,
        )
        # Notified each time the session goes idle.
        self.settled = settled or ActivitySignal()
        self._refused_calls: dict[str, str] = {}  # call id → error, for calls never run

    # --- what the outside world calls ----------------------------------------------------------

    @property
    def pending(self) -> list[PendingItem]:
        return self.intake.pending

    @property
    def passive(self) -> dict[str, Event]:
        return self.intake.passive

    @property
    def usage(self) -> Usage:
        """Tokens of every finished turn of this session (discarded turns report none)."""
        return self.turns.usage

    @property
    def faults(self) -> int:
        """Faults contained so far, for whoever watches the session."""
        return self.reporter.faults

    @property
    def busy(self) -> bool:
        return self.phase != "idle"

    @property
    def idle(self) -> bool:
        """Waiting for an event, with none waiting for it and no side answer in flight."""
        return self.phase == "idle" and not self.pending and not self.side_questions.in_flight

    async def handle(self, event: Event) -> Decision:
        """Route one event and carry out the decision. Returns the decision taken."""
        decision = await self.router.decide(
            event, busy=self.busy, task_summary=self.trajectory.task_summary()
        )
        self.apply(event, decision)
        return decision

    def apply(self, event: Event, decision: Decision) -> None:
        if decision.strategy is Strategy.PARALLEL and self.busy and self._tg is not None:
            self.side_questions.ask(self._tg, event)
            return
        self.intake.add(event, decision)
        if decision.wake and decision.strategy is Strategy.CANCEL:
            self.interruption.request(decision)

    async def wait_started(self) -> None:
        await self._started.wait()

    # --- the loop ------------------------------------------------------------------------------

    async def run(self) -> None:
        """Run the session until cancelled. Call inside a task group that owns it.

        An unexpected exception in the loop is contained here (see the module docstring): the
        session pauses until its next event, and the task group that owns it never sees it.
        """
        faults_in_a_row = 0
        while True:
            seen = self.turns.requests
            try:
                async with anyio.create_task_group() as tg:
                    self._tg = tg
                    await self._loop()
            except Exception as exc:  # the session's fault boundary: alert, pause, go on
                self._tg = None
                fault = single_exception(exc)
                if isinstance(fault, SessionMoved):
                    # Its lease is gone (another worker, or this one under a newer lease, owns
                    # the session now): this copy stops for good, writing and telling nothing.
                    # The events it held stay pending in the store for the owner.
                    log.warning("session %s: %s", self.id, fault)
                    self.moved = True
                    self.pending.clear()
                    self.phase = "idle"
                    self._started.set()  # whoever waits for it to start goes on
                    self.settled.notify()
                    return
                await self._contain_fault(fault)
                faults_in_a_row = faults_in_a_row + 1 if self.turns.requests == seen else 1
                if self.pending:
                    # Events are waiting, so the loop would go on at once: if it keeps failing
                    # before it gets anywhere (a broken store), do not spin; wait, doubling.
                    base = self.config.model_fault_backoff_seconds
                    await anyio.sleep(min(60.0, base * 2.0 ** (faults_in_a_row - 1)))

    async def _loop(self) -> None:
        """The loop proper: idle until an event, then flush, model turn, tools, again."""
        if not self.trajectory.messages:
            await self._record(SystemMessage(content=self._system_prompt()))
        self._started.set()
        requests_this_activation = 0
        while True:
            if not self.pending and (not self._needs_model or self._wait_for_event):
                self.phase = "idle"
                requests_this_activation = 0
                self.settled.notify()
                await self.intake.wait()
                continue
            self._wait_for_event = False
            self.phase = "model"
            self._apply_stop()
            if self.pending:
                await self._flush_pending()
            if not self._needs_model:
                continue
            if requests_this_activation >= self.config.max_model_requests_per_activation:
                await self._give_up_activation()
                continue
            requests_this_activation += 1
            end = await self.turns.next_turn(self._tg)
            if end is None:
                continue
            repaired = repair_turn(end.message)
            if repaired.notes:
                await self.reporter.repair(
                    "the model's turn had tool calls it could not use as they came: "
                    + "; ".join(repaired.notes)
                    + " (refused calls are answered with an error the model reads)"
                )
            self._refused_calls = repaired.refused
            end = TurnEnd(repaired.message, end.usage, end.stop_reason)
            recorded = await self._record(end.message)  # rule 1
            if end.message.tool_calls:
                self.phase = "tools"
                await self.calls.run_turn(end.message.tool_calls, self._refused_calls)
                self._needs_model = True
            else:
                self._needs_model = False
                if self.config.send_assistant_text and recorded.content.strip():
                    await self.services.outbox.send(self.id, recorded.content)

    def _system_prompt(self) -> str:
        """The configured prompt, with the tool hierarchy when tools are found on demand. It
        is recorded once, as the first message, so it is the same on every request."""
        hint = self.discovery.hint() if self.discovery is not None else ""
        return f"{self.config.system_prompt}\n\n{hint}" if hint else self.config.system_prompt

    async def _record(self, message: Message) -> Message:
        """Append `message`; returns it as stored (text the store cannot hold is repaired)."""
        (stored,) = await self.trajectory.append(message)
        self.observer.on_message(self.id, stored)
        if stored is not message:
            await self.reporter.repair(
                f"a {message.role} message held text UTF-8 cannot encode (lone UTF-16 "
                "surrogates); it was stored with U+FFFD in their place"
            )
        return stored

    def _apply_stop(self) -> None:
        """On a stop, cancel this session's background tasks too, and note it for the model."""
        decision = self.interruption.decision
        if decision is not None and decision.stop and self.config.stop_cancels_background:
            note = self.calls.cancel_background(decision.reason or "stopped")
            if note is not None:
                self.pending.append(note)

    async def _flush_pending(self) -> None:
        """Rule 5: append pending items as one user message at a safe point; at most
        `max_events_per_batch` (see `Intake.take_batch`), so a burst of thousands of events
        reaches the model as a few readable batches rather than one it cannot take in."""
        batch = self.intake.take_batch(self.config.max_events_per_batch)
        self.interruption.handled()
        status = render_status(
            self.services.tasks.running(self.id), self.loaded_tools, away=self._away(batch.items)
        )
        await self._record(batch.message(status))
        await self.trajectory.consume_events([*batch.event_ids, *batch.superseded])
        if batch.needs_model:
            self._needs_model = True

    def _away(self, items: Sequence[PendingItem]) -> str:
        """Where the user is, when a background task's result arrives while they are away (so
        the model is prompted to notify them); "" otherwise."""
        activity = self.services.state.get(UserActivity)
        if not isinstance(activity, UserActivity):
            return ""
        if not any(isinstance(item, Event) and item.kind == TOOL_RESULT for item in items):
            return ""
        return activity.away()

    async def _give_up_activation(self) -> None:
        limit = self.config.max_model_requests_per_activation
        self._needs_model = False
        await self.services.outbox.send(
            self.id,
            f"I stopped after {limit} model requests in a row without finishing, to avoid a "
            "runaway loop. Send a message to let me continue, or raise "
            "agent.max_model_requests_per_activation in wakeful.toml.",
            urgency="high",
        )

    # --- faults --------------------------------------------------------------------------------

    def _pause_until_event(self) -> None:
        """Wait for the next event before asking the model again (after a failed request)."""
        self._wait_for_event = True

    async def _contain_fault(self, exc: Exception) -> None:
        """An unexpected exception ended the loop: close open calls so the trajectory stays
        well-formed, alert the operator, tell the user, and pause until the next event."""
        log.error("session %s: fault contained", self.id, exc_info=exc)
        self.reporter.faults += 1
        self.interruption.reset()
        self.turns.reset()
        self._refused_calls = {}
        self.tools.discard(self.id)
        self.calls.cancel_inline("the session hit an internal error")
        what = describe_exception(exc)
        try:
            await self.trajectory.repair(why=f"The session hit an internal error ({what})")
        except Exception as repair_exc:
            log.error("session %s: could not close open calls", self.id, exc_info=repair_exc)
        self._needs_model = self.trajectory.needs_model
        self._wait_for_event = True
        self.phase = "idle"
        await self.reporter.fault(
            f"Session {self.id!r} paused after an internal error ({what}). Its open tool calls "
            "were answered as lost; events being appended stay pending in the store. It resumes "
            "with its next event; other sessions are not affected. The log has the traceback.",
            exc,
        )
        await self.reporter.tell_user(
            f"Something went wrong on my side ({what}). I paused; send a message to go on."
        )

    # --- parallel side sessions ----------------------------------------------------------------

    def _side_answered(self, event: Event, answer: str | None) -> None:
        """Record a side question and its answer in the main trajectory at the next safe point;
        if the side session failed, the question waits for the main loop instead."""
        if answer is None:
            self.apply(event, Decision(Strategy.QUEUE, reason="parallel answer failed"))
        else:
            self.intake.add_item(ParallelExchange(event, answer))
