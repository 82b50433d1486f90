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
queues the event, interrupts the running step, or answers the event in a side session.

A session's fault stays in that session. A model request that fails unexpectedly (an exception
other than `ModelAPIError`, or a stream silent for `model_stream_idle_seconds`) is retried with
exponential backoff `model_fault_retries` times, since a stuck connection or a flaky SDK often
recovers; then the session pauses until its next event, the user is told and the operator gets a
`system.alert`. Any other unexpected exception in the loop (a tool's path, the store) pauses the
session at once, after answering its open calls, with the same alert; the alert event (stored as
consumed) is the record. Other sessions never notice.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from typing import Literal, Protocol

import anyio
from anyio.abc import TaskGroup

from ..activity import ActivitySignal
from ..discovery.session_tools import Discovery, unwrap_call
from ..errors import ModelAPIError
from ..events import DEFAULT_MAX_EVENT_BYTES, TOOL_RESULT, Event
from ..messages import (
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
    image_attachments,
)
from ..models.base import (
    Model,
    ModelRequest,
    StreamPart,
    ToolCallPart,
    ToolDefinition,
    TurnEnd,
    Usage,
)
from ..services import Services
from ..tools.registry import ToolRegistry, execute_call
from ..tools.shaping import Compressor, shape
from ..tools.spec import Tool, ToolContext, ToolResult
from ..tools.tasks import TaskHandle
from .batch import (
    Note,
    ParallelExchange,
    PendingItem,
    render_batch,
    render_status,
    split_batch,
)
from .faults import StreamIdle, describe_exception, fault_alert, single_exception, until_idle
from .router import Decision, Router, Strategy
from .side_question import answer_side_question, result_message
from .trajectory import Trajectory
from .turn_repair import repair_turn, safe_call

log = logging.getLogger(__name__)

Phase = Literal["idle", "model", "tools"]


@dataclass(frozen=True)
class SessionConfig:
    system_prompt: str = "You are a helpful assistant."
    # Plain assistant text stays in the trajectory; reply_to_user is how the agent talks.
    send_assistant_text: bool = False
    max_model_requests_per_activation: int = 50
    # A stop also cancels this session's background tasks ("stop everything").
    stop_cancels_background: bool = True
    # How long a cancelled tool may take to clean up before the loop moves on.
    cancel_grace_seconds: float = 5.0
    parallel_max_steps: int = 4
    # Optional query-aware compression of tool results longer than compress_over_chars; without
    # a compressor, results are recorded as the tools gave them (tools cut their own output).
    compressor: Compressor | None = None
    compress_over_chars: int = 10_000
    # A model request that fails unexpectedly (not a provider's ModelAPIError, which the
    # adapters already retry) or whose stream is silent for model_stream_idle_seconds is tried
    # again this many times, waiting model_fault_backoff_seconds, doubling each time; then the
    # session pauses until its next event and the operator is alerted.
    model_fault_retries: int = 2
    model_fault_backoff_seconds: float = 2.0
    # No part of a model's stream for this long (None: wait forever) fails the request.
    model_stream_idle_seconds: float | None = 300.0
    # Events larger than this (as stored JSON) are refused with InvalidEvent at submit.
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES
    # At most this many pending events are appended at one safe point; a closing line says how
    # many more wait, and they come at the next safe point, after the model's next turn.
    max_events_per_batch: int = 50


class SessionObserver(Protocol):
    """Hooks for whoever shows the session as it runs (console, demo, tests)."""

    def on_message(self, session: str, message: Message) -> None: ...

    def on_stream_part(self, session: str, part: StreamPart) -> None: ...

    def on_turn_discarded(self, session: str, reason: str) -> None: ...


class _NoObserver:
    def on_message(self, session: str, message: Message) -> None:
        pass

    def on_stream_part(self, session: str, part: StreamPart) -> None:
        pass

    def on_turn_discarded(self, session: str, reason: str) -> None:
        pass


def describe_call(call: ToolCall, limit: int = 80) -> str:
    """A short human description of a call, e.g. the shell command it runs."""
    try:
        args = json.loads(call.arguments)
    except json.JSONDecodeError:
        args = None
    if isinstance(args, dict) and isinstance(args.get("command"), str):
        text: str = args["command"]
    else:
        text = call.arguments
    return text if len(text) <= limit else text[: limit - 1] + "…"


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
    ) -> None:
        self.id = session_id
        self.model = model
        self.registry = registry
        self.services = services
        self.trajectory = trajectory
        self.router = router or Router()
        self.config = config or SessionConfig()
        self.parallel_model = parallel_model
        self.observer: SessionObserver = observer or _NoObserver()
        self.pending: list[PendingItem] = []
        # Events that ride along with the next batch without waking the session (progress),
        # the latest per task; and the ids of those a newer one replaced.
        self.passive: dict[str, Event] = {}
        self._superseded: list[str] = []
        self.loaded_tools: list[str] = []  # shown in the status block
        self.phase: Phase = "idle"
        self.model_requests = 0
        # Tokens of every finished turn of this session (discarded turns report none).
        self.usage = Usage()
        # With discovery, the prompt holds only the core tools, fixed for the session's life so
        # that every request starts with the same bytes; other tools are found on demand.
        self.discovery: Discovery | None = services.state.get(Discovery)
        if self.discovery is not None:
            self._tool_definitions: list[ToolDefinition] = self.discovery.core_definitions(registry)
            self.loaded_tools = self.discovery.loaded_for(session_id)
            self.discovery.restore(session_id, trajectory.messages)
        else:
            self._tool_definitions = registry.definitions()
        self._tools_version = registry.version
        self._wake = anyio.Event()
        self._scope: anyio.CancelScope | None = None
        self._interrupt: Decision | None = None
        self._needs_model = trajectory.needs_model
        self._wait_for_event = False
        self._tg: TaskGroup | None = None
        self._started = anyio.Event()
        self._side_answers = 0  # parallel answers in flight (see `idle`)
        # Notified each time the session goes idle.
        self.settled = settled or ActivitySignal()
        # Where faults are reported: the runtime's operator channel (default: the outbox's).
        self._alert = alert
        self._request_faults = 0  # failed requests in a row, for the backoff
        self._refused_calls: dict[str, str] = {}  # call id → error, for calls never run
        self._interrupting: set[str] = set()  # ids of pending events that interrupted
        self.faults = 0  # faults contained so far, for whoever watches the session

    # --- what the outside world calls ----------------------------------------------------------

    @property
    def busy(self) -> bool:
        return self.phase != "idle"

    @property
    def idle(self) -> bool:
        """Waiting for an event, with none waiting for it and no side answer in flight."""
        return self.phase == "idle" and not self.pending and not self._side_answers

    async def _side_answer(self, event: Event) -> None:
        try:
            await self._answer_in_parallel(event)
        finally:
            self._side_answers -= 1

    async def handle(self, event: Event) -> Decision:
        """Route one event and carry out the decision. Returns the decision taken."""
        decision = await self.router.decide(
            event, busy=self.busy, task_summary=self.trajectory.task_summary()
        )
        self.apply(event, decision)
        return decision

    def apply(self, event: Event, decision: Decision) -> None:
        if decision.strategy is Strategy.PARALLEL and self.busy and self._tg is not None:
            self._side_answers += 1  # counted now, so the session is never idle meanwhile
            self._tg.start_soon(self._side_answer, event, name=f"parallel {event.id}")
            return
        task_id = event.context.get("task_id")
        key = task_id if isinstance(task_id, str) else event.id
        if not decision.wake:
            self._supersede(key)
            self.passive[key] = event
            return
        if event.kind == TOOL_RESULT:
            self._supersede(key)  # the result says more than any progress update
        self.pending.append(event)
        if decision.strategy is Strategy.CANCEL:
            self._interrupting.add(event.id)  # goes in the next batch, however long the queue
            self._request_interrupt(decision)
        self._wake.set()

    def _supersede(self, key: str) -> None:
        old = self.passive.pop(key, None)
        if old is not None:
            self._superseded.append(old.id)

    def _request_interrupt(self, decision: Decision) -> None:
        if self._interrupt is None or (decision.stop and not self._interrupt.stop):
            self._interrupt = decision
        if self._scope is not None:
            self._scope.cancel()

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
            seen = self.model_requests
            try:
                async with anyio.create_task_group() as tg:
                    self._tg = tg
                    await self._loop()
            except Exception as exc:  # the session's fault boundary: alert, pause, go on
                self._tg = None
                await self._contain_fault(single_exception(exc))
                faults_in_a_row = faults_in_a_row + 1 if self.model_requests == seen else 1
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
                await self._wake.wait()
                self._wake = anyio.Event()
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
            end = await self._model_turn()
            if end is None:
                continue
            repaired = repair_turn(end.message)
            if repaired.notes:
                await self._report_repair(
                    "the model's turn had tool calls it could not use as they came: "
                    + "; ".join(repaired.notes)
                    + " (refused calls are answered with an error the model reads)"
                )
            self._refused_calls = repaired.refused
            end = TurnEnd(repaired.message, end.usage, end.stop_reason)
            recorded = await self._record(end.message)  # rule 1
            if end.message.tool_calls:
                await self._run_tool_calls(end.message.tool_calls)
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
            await self._report_repair(
                f"a {message.role} message held text UTF-8 cannot encode (lone UTF-16 "
                "surrogates); it was stored with U+FFFD in their place"
            )
        return stored

    def _apply_stop(self) -> None:
        """On a stop, cancel this session's background tasks too, and note it for the model."""
        decision = self._interrupt
        if decision is None or not decision.stop or not self.config.stop_cancels_background:
            return
        running = self.services.tasks.running(self.id)
        for handle in running:
            handle.cancel(decision.reason or "stopped")
        if running:
            names = ", ".join(f"{h.id} ({h.tool} {h.description!r})" for h in running)
            self.pending.append(Note(f"Cancelled background tasks because of the stop: {names}."))

    async def _flush_pending(self) -> None:
        """Rule 5: append the pending items as one user message at a safe point.

        At most `max_events_per_batch` items go in one message (see `split_batch`: events that
        interrupted always go, then the oldest others); the message closes with how many more
        wait, and those come at the next safe point, so a burst of thousands of events reaches
        the model as a few readable batches rather than one message it cannot take in.
        """
        limit = max(1, self.config.max_events_per_batch)
        riding = list(self.passive.values())
        items, self.pending, left_riding = split_batch(
            self.pending, riding, limit, first=lambda e: e.id in self._interrupting
        )
        self._interrupting -= {item.id for item in items if isinstance(item, Event)}
        left = {id(event) for event in left_riding}
        self.passive = {k: e for k, e in self.passive.items() if id(e) in left}
        superseded, self._superseded = self._superseded, []
        self._interrupt = None
        text = render_batch(items, waiting=[*self.passive.values(), *self.pending])
        status = render_status(self.services.tasks.running(self.id), self.loaded_tools)
        if status:
            text = f"{text}\n{status}"
        event_ids = [
            item.id if isinstance(item, Event) else item.event.id
            for item in items
            if isinstance(item, Event | ParallelExchange)
        ]
        if len(items) > 1:
            mark: Literal["events", "parallel", "event", "note"] = "events"
        elif isinstance(items[0], ParallelExchange):
            mark = "parallel"
        elif isinstance(items[0], Note):
            mark = "note"
        else:
            mark = "event"
        # Images that background tools returned ride along (other event sources carry none).
        attachments = [
            image
            for item in items
            if isinstance(item, Event) and item.kind == TOOL_RESULT
            for image in image_attachments(item.context)
        ]
        await self._record(
            UserMessage(content=text, event_ids=event_ids, mark=mark, attachments=attachments)
        )
        await self.trajectory.consume_events([*event_ids, *superseded])
        if any(not isinstance(item, ParallelExchange) for item in items):
            self._needs_model = True

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

    async def _model_turn(self) -> TurnEnd | None:
        """Stream one turn. Returns None when it was interrupted (rule 4) or failed."""
        self.phase = "model"
        self.model_requests += 1
        changed = self._tools_version != self.registry.version
        if changed and self.discovery is None:  # e.g. an MCP server came or went
            self._tool_definitions = self.registry.definitions()
            self._tools_version = self.registry.version
        request = ModelRequest(
            messages=list(self.trajectory.messages), tools=self._tool_definitions
        )
        end: TurnEnd | None = None
        with anyio.CancelScope() as scope:
            self._scope = scope
            if self._interrupt is not None:
                scope.cancel()
            try:
                async with (
                    aclosing(self.model.stream(request)) as parts,
                    aclosing(
                        until_idle(parts, self.config.model_stream_idle_seconds)
                    ) as timed_parts,
                ):
                    async for part in timed_parts:
                        if isinstance(part, TurnEnd):
                            end = part
                        else:
                            if isinstance(part, ToolCallPart):
                                part = ToolCallPart(safe_call(part.call))
                            if isinstance(part, ToolCallPart) and self.services.gate is not None:
                                # The sidecar starts now, while the model goes on streaming.
                                inner = unwrap_call(part.call)
                                tool = self.registry.get(inner.name)
                                spec = tool.spec if tool is not None else None
                                self.services.gate.begin(self.id, inner, spec, self._tg)
                            self.observer.on_stream_part(self.id, part)
            except ModelAPIError as exc:
                self._scope = None
                await self._model_failed(exc)
                return None
            except Exception as exc:  # the model edge: a bug in an adapter or a model function
                self._scope = None
                reason = (
                    str(exc)
                    if isinstance(exc, StreamIdle)
                    else f"the model raised {describe_exception(exc)}"
                )
                await self._request_faulted(reason, exc)
                return None
        self._scope = None
        if end is None:
            if self.services.gate is not None:
                self.services.gate.discard(self.id)
            reason = "interrupted by an urgent event" if scope.cancel_called else "no final turn"
            self.observer.on_turn_discarded(self.id, reason)
            return None
        self._request_faults = 0
        self.usage += end.usage
        return end

    async def _model_failed(self, exc: ModelAPIError) -> None:
        log.info("session %s: model request failed: %s", self.id, exc)
        self.observer.on_turn_discarded(self.id, f"model error: {exc}")
        self._wait_for_event = True
        await self.services.outbox.send(
            self.id,
            f"The model request failed: {exc} Nothing was lost; send a message to retry.",
            urgency="high",
        )

    async def _request_faulted(self, reason: str, exc: BaseException) -> None:
        """A request failed unexpectedly: retry with backoff, then pause and alert."""
        if self.services.gate is not None:
            self.services.gate.discard(self.id)
        self.observer.on_turn_discarded(self.id, f"model fault: {reason}")
        retries = self.config.model_fault_retries
        if self._request_faults < retries:
            delay = self.config.model_fault_backoff_seconds * 2.0**self._request_faults
            self._request_faults += 1
            log.warning(
                "session %s: model request failed (%s); retry %d of %d in %.1f s",
                self.id,
                reason,
                self._request_faults,
                retries,
                delay,
                exc_info=exc,
            )
            await self._wait_unless_interrupted(delay)
            return  # _needs_model still holds: the loop asks again
        attempts = self._request_faults + 1
        self._request_faults = 0
        self._wait_for_event = True
        log.error("session %s: model request failed: %s", self.id, reason, exc_info=exc)
        self.faults += 1
        await self._report_fault(
            f"Session {self.id!r} paused: its model request failed {attempts} time(s) in a row; "
            f"the last time {reason}. Its trajectory is intact and it resumes with its next "
            "event. If this repeats, check the model (adapter, model function or provider).",
            exc,
        )
        await self.services.outbox.send(
            self.id,
            f"The model request failed unexpectedly ({reason}). Nothing was lost; send a "
            "message to retry.",
            urgency="high",
        )

    async def _wait_unless_interrupted(self, seconds: float) -> None:
        with anyio.CancelScope() as scope:
            self._scope = scope
            if self._interrupt is not None:
                scope.cancel()
            await anyio.sleep(seconds)
        self._scope = None

    async def _contain_fault(self, exc: Exception) -> None:
        """An unexpected exception ended the loop: close open calls so the trajectory stays
        well-formed, alert the operator, tell the user, and pause until the next event."""
        log.error("session %s: fault contained", self.id, exc_info=exc)
        self.faults += 1
        self._scope = None
        self._interrupt = None
        self._request_faults = 0
        self._refused_calls = {}
        if self.services.gate is not None:
            self.services.gate.discard(self.id)
        for handle in self.services.tasks.list(self.id, background_only=False):
            if not handle.background and not handle.done:
                handle.cancel("the session hit an internal error")
        what = describe_exception(exc)
        try:
            await self.trajectory.repair(why=f"The session hit an internal error ({what})")
        except Exception as repair_exc:
            log.error("session %s: could not close open calls", self.id, exc_info=repair_exc)
        self._needs_model = self.trajectory.needs_model
        self._wait_for_event = True
        self.phase = "idle"
        await self._report_fault(
            f"Session {self.id!r} paused after an internal error ({what}). Its open tool calls "
            "were answered as lost; events being appended stay pending in the store. It resumes "
            "with its next event; other sessions are not affected. The log has the traceback.",
            exc,
        )
        try:
            await self.services.outbox.send(
                self.id,
                f"Something went wrong on my side ({what}). I paused; send a message to go on.",
                urgency="high",
            )
        except Exception as send_exc:
            log.error("session %s: could not tell the user", self.id, exc_info=send_exc)

    async def _report_repair(self, what: str) -> None:
        """Tell the operator that something the session could not use as it came was
        repaired; the session goes on."""
        text = f"Session {self.id!r}: {what}."
        log.warning("%s", text)
        await self._report_fault(text, None)

    async def _report_fault(self, text: str, exc: BaseException | None) -> None:
        """A `system.alert` for the operator (stored and sent on the "operator" channel); a
        failure to report is logged, never raised, so reporting cannot fault the session."""
        event = fault_alert(self.id, text, exc, faults=self.faults)
        text = event.text
        try:
            if self._alert is not None:
                await self._alert(event)
            else:
                await self.services.outbox.send(
                    self.id, text, channel="operator", urgency=event.urgency
                )
        except Exception as alert_exc:
            log.error("session %s: could not alert the operator", self.id, exc_info=alert_exc)

    # --- tools ---------------------------------------------------------------------------------

    async def _run_tool_calls(self, calls: Sequence[ToolCall]) -> None:
        """Run a turn's calls in order; a run of read-only calls goes concurrently."""
        self.phase = "tools"
        index = 0
        while index < len(calls):
            call = calls[index]
            refused = self._refused_calls.pop(call.id, None)
            if refused is not None:
                await self._record(
                    ToolMessage(
                        tool_call_id=call.id, name=call.name, content=refused, status="error"
                    )
                )
                index += 1
                continue
            if self._interrupt is not None:
                await self._record(self._not_started_result(call, self._interrupt))
                index += 1
                continue
            tool = self.registry.get(unwrap_call(call).name)
            if tool is not None and tool.spec.run_mode == "background":
                await self._record(self._start_background(tool, call))
                index += 1
                continue
            group = [(tool, call)]
            index += 1
            while (
                self._read_only(tool)
                and index < len(calls)
                and calls[index].id not in self._refused_calls
            ):
                following = self.registry.get(unwrap_call(calls[index]).name)
                if not self._read_only(following):
                    break
                group.append((following, calls[index]))
                index += 1
            await self._run_inline(group)

    @staticmethod
    def _read_only(tool: Tool | None) -> bool:
        return (
            tool is not None and tool.spec.annotations.read_only and tool.spec.run_mode == "inline"
        )

    def _task_runner(self, tool: Tool | None, call: ToolCall) -> _CallRunner:
        return _CallRunner(self, tool, call)

    def _start_background(self, tool: Tool, call: ToolCall) -> ToolMessage:
        handle = self.services.tasks.start(
            session=self.id,
            tool=call.name,
            call_id=call.id,
            description=describe_call(call),
            run=self._task_runner(tool, call),
            background=True,
        )
        content = json.dumps(
            {
                "task_id": handle.id,
                "status": "running",
                "note": "The result will arrive as a separate event; use task_status to check.",
            }
        )
        return ToolMessage(tool_call_id=call.id, name=call.name, content=content)

    async def _run_inline(self, group: Sequence[tuple[Tool | None, ToolCall]]) -> None:
        """Run calls together, recording each result as it finishes (rule 2); on an
        interrupt, answer the unfinished ones with a placeholder or a cancellation (rule 3)."""
        handles = [
            (
                call,
                self.services.tasks.start(
                    session=self.id,
                    tool=call.name,
                    call_id=call.id,
                    description=describe_call(call),
                    run=self._task_runner(tool, call),
                ),
            )
            for tool, call in group
        ]

        answered: set[str] = set()

        async def record_when_done(call: ToolCall, handle: TaskHandle) -> None:
            result = await handle.wait()
            message = await self._finished_result(call, result)
            answered.add(call.id)  # no await between this and the append below
            await self._record(message)

        with anyio.CancelScope() as scope:
            self._scope = scope
            if self._interrupt is not None:
                scope.cancel()
            async with anyio.create_task_group() as tg:
                for call, handle in handles:
                    tg.start_soon(record_when_done, call, handle)
        self._scope = None
        for call, handle in handles:
            if call.id in answered:
                continue
            if handle.done:  # it finished just as the interrupt arrived
                assert handle.result is not None
                await self._record(await self._finished_result(call, handle.result))
                continue
            decision = self._interrupt or Decision(Strategy.CANCEL, stop=True)
            if decision.stop:
                await self._record(await self._cancel_inline(handle, call, decision))
            else:
                handle.detach()  # rule 3: it goes on in the background
                await self._record(self._placeholder_result(call, handle))

    @staticmethod
    def _placeholder_result(call: ToolCall, handle: TaskHandle) -> ToolMessage:
        return ToolMessage(
            tool_call_id=call.id,
            name=call.name,
            content=(
                f"Still running in the background as task {handle.id}; its result will arrive "
                "as a separate event. Handle the new events first, and do not assume any result "
                f"of this call until that event arrives (task_status('{handle.id}') shows "
                "progress)."
            ),
            status="placeholder",
        )

    async def _cancel_inline(
        self, handle: TaskHandle, call: ToolCall, decision: Decision
    ) -> ToolMessage:
        handle.cancel(decision.reason or "interrupted")
        with anyio.move_on_after(self.config.cancel_grace_seconds, shield=True):
            await handle.wait()
        tail = handle.last_lines(5)
        output = ("\nOutput before the cancellation:\n" + "\n".join(tail)) if tail else ""
        return ToolMessage(
            tool_call_id=call.id,
            name=call.name,
            content=(
                f"Cancelled after {handle.runtime_seconds:.1f}s because "
                f"{decision.reason or 'of an interrupt'} (task {handle.id}); it did not "
                f"finish.{output}"
            ),
            status="cancelled",
        )

    def _not_started_result(self, call: ToolCall, decision: Decision) -> ToolMessage:
        return ToolMessage(
            tool_call_id=call.id,
            name=call.name,
            content=(
                f"Not run: an interrupt arrived before this call started ({decision.reason}). "
                "Call it again if it is still needed."
            ),
            status="cancelled",
        )

    async def _finished_result(self, call: ToolCall, result: ToolResult) -> ToolMessage:
        """The message of a finished inline call, compressed for the task when it is long and a
        compressor is configured (the text then says so, or says why it was cut instead)."""
        message = result_message(call, result)
        compressor = self.config.compressor
        limit = self.config.compress_over_chars
        if compressor is None or result.is_error or len(result.content) <= limit:
            return message
        shaped = await shape(
            result.content,
            limit,
            how_to_get_more=(
                f"the full result is not kept: call {call.name} again with offset/limit or a "
                "narrower query to read them"
            ),
            query=self.trajectory.task_summary(),
            compressor=compressor,
        )
        return message.model_copy(update={"content": shaped.text})

    # --- parallel side sessions ----------------------------------------------------------------

    async def _answer_in_parallel(self, event: Event) -> None:
        """Answer an independent query now (see :mod:`.side_question`), then record it in the
        main trajectory; if the side session fails, the question waits for the main loop."""
        answer = await answer_side_question(
            event,
            session=self.id,
            model=self.parallel_model or self.model,
            registry=self.registry,
            services=self.services,
            system_prompt=self.config.system_prompt,
            task_summary=self.trajectory.task_summary(),
            max_steps=self.config.parallel_max_steps,
        )
        if answer is None:
            self.apply(event, Decision(Strategy.QUEUE, reason="parallel answer failed"))
            return
        await self.services.outbox.send(self.id, answer, parallel=True)
        self.pending.append(ParallelExchange(event, answer))
        self._wake.set()


class _CallRunner:
    """Runs one tool call inside its task, with a context that knows the task."""

    def __init__(self, session: AgentSession, tool: Tool | None, call: ToolCall) -> None:
        self._session = session
        self._tool = tool
        self._call = call

    async def __call__(self, handle: TaskHandle) -> ToolResult:
        s = self._session
        # A call_tool call runs as the call it wraps: the gate and the tool see that one.
        call = unwrap_call(self._call)
        if (
            self._tool is None
            and s.discovery is not None
            and call.name not in s.registry.unavailable
        ):
            return ToolResult.error(
                f"There is no tool named {call.name!r}. Find one for the need with "
                "discover_tools, then call it by the name it gives."
            )
        ctx = ToolContext(s.id, call.id, call.name, s.services, task=handle)
        gate = s.services.gate
        if gate is None:
            return await execute_call(self._tool, call, ctx, s.registry)
        return await gate.run(
            self._tool, call, ctx, self._execute, recent=lambda: s.trajectory.messages
        )

    async def _execute(self, ctx: ToolContext) -> ToolResult:
        call = unwrap_call(self._call)
        return await execute_call(self._tool, call, ctx, self._session.registry)
