"""How child agents run, end and hand over their results.

A child is spawned by a session's `spawn_subagent` call: its record is stored (the repository:
the store's `subagents` table, in memory without a store), then its task reaches its own session
as an `agent.input` event tagged `[FROM_MAIN_AGENT]`. A watcher in the runtime's task group
follows each child until it ends:

- it **returns** a result (`return_result`, checked against its agent's output schema; a result
  that does not match is refused once with the reason, and a second bad one fails the child), or
  goes idle with a final text, taken as its result when its agent has no schema (otherwise it is
  reminded once to call return_result);
- it is **cancelled** (`cancel_subagent`, a stop of its parent's call, its parent's own
  cancellation: cancelling cascades to its children first);
- it goes over a **limit** (wall time, tokens, its tree's tokens): it is cancelled and the
  parent told which limit and how to raise it. Tokens count over every run: a working child's
  are stored now and then (and as the runtime stops), and a tree's are summed from the
  repository's records, so neither a crash nor a restart resets them.

The result goes to the parent once: as the result of the `spawn_subagent` call while that call
waits (mode "sync"), otherwise as a `subagent.result` event (mode "async", "stream", a sync call
that went to the background, or a parent whose call a restart cut off). With a store, a child
outlives a restart: its session is recovered like any other, its watcher starts again (its wall
time counted from its spawn), and a result stored but not yet handed over is handed over then,
under an event id that makes a second hand-over a duplicate the store drops. As one worker of
several sharing a store, a running child is followed by the worker that owns its session and an
ended one by its parent's owner, each taken up with that session (:meth:`Subagents.restore`),
and its record written through that session's fence.

The limits on running children (`max_children`, `max_tree`) hold for spawns at the same moment:
in this process a spawn past its check holds its place until its record is stored, and the
repository counts again as it stores the record, in one step with the insert, for other
workers' spawns.
"""

from __future__ import annotations

import json
import logging
import re
import secrets
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

import anyio
import jsonschema
from anyio.abc import TaskGroup

from ..collab import (
    CallContextSettings,
    ContextRecord,
    ManualShare,
    ParentView,
    prepare_child_context,
)
from ..core.channel import source_event_id
from ..core.records import SubagentMode, SubagentRecord, SubagentStatus
from ..core.repositories import (
    RunningLimit,
    SubagentLimitReached,
    SubagentRepository,
    check_running_limits,
    refuse_over_running_limits,
)
from ..core.session_writes import SessionWrites, shared_writes
from ..errors import SessionMoved, ToolError, UserError
from ..events import (
    AGENT_INPUT,
    AGENT_INTERRUPT,
    SUBAGENT_PROGRESS,
    SUBAGENT_QUESTION,
    SUBAGENT_RESULT,
    Event,
    Source,
)
from ..messages import Message
from ..models.base import Model
from .definitions import AgentDefinition
from .limits import SubagentLimits

__all__ = [
    "MemorySubagents",
    "SubagentError",
    "SubagentHost",
    "Subagents",
    "new_subagent_id",
]

log = logging.getLogger(__name__)

# How often a watcher looks at a running child's tokens.
CHECK_SECONDS = 0.5
# How often, at most, a running child's grown tokens are stored (and at its end).
RECORD_SECONDS = 2.0
# A child's id, which is also its session's.
_CHILD_ID = re.compile(r"sub_[0-9a-f]{8}")


# Where the events for a parent that is not a runtime session go (an MCP client).
ParentInbox = Callable[[Event], Awaitable[None]]


class SubagentError(ToolError):
    """A request about subagents that cannot be carried out; the message says why and what to
    do instead. Raised inside the collaboration tools, it is the tool's error the model reads."""


def new_subagent_id() -> str:
    return f"sub_{secrets.token_hex(4)}"


def _now() -> str:
    return datetime.now(UTC).isoformat()


class SubagentHost(Protocol):
    """What the manager needs from the runtime."""

    async def deliver(self, event: Event) -> None:
        """Store an event and hand it to its session (a duplicate id is dropped)."""
        ...

    def tokens_of(self, session: str) -> int:
        """Model tokens the session used in this run (0 when it is not loaded)."""
        ...

    def is_idle(self, session: str) -> bool:
        """Whether the session has nothing pending and nothing running."""
        ...

    def last_text(self, session: str) -> str:
        """The session's last assistant text ("" when none)."""
        ...

    def messages(self, session: str) -> Sequence[Message]:
        """The session's trajectory so far (empty when it is not loaded)."""
        ...

    def wait_settled(self) -> Awaitable[None]:
        """Until some session or task next settles."""
        ...

    def changed(self) -> None:
        """Tell those waiting for the runtime to settle that a child's state changed."""
        ...


@dataclass
class MemorySubagents:
    """The :class:`~wakeful.core.repositories.SubagentRepository` of a runtime without a store."""

    _records: dict[str, SubagentRecord] = field(default_factory=dict)

    async def add(
        self,
        record: SubagentRecord,
        *,
        max_children: int | None = None,
        max_tree: int | None = None,
    ) -> None:
        check_running_limits(max_children, max_tree)
        # No await from the count to the insert: one step in the event loop.
        running = [r for r in self._records.values() if r.status == "running"]
        refuse_over_running_limits(
            sum(r.parent == record.parent for r in running),
            sum(r.root == record.root for r in running),
            max_children,
            max_tree,
        )
        if record.id in self._records:
            raise UserError(f"A subagent with the id {record.id} is stored already.")
        self._records[record.id] = record

    async def finish(
        self,
        subagent_id: str,
        status: SubagentStatus,
        *,
        result: str | None = None,
        error: str | None = None,
        tokens: int = 0,
    ) -> bool:
        record = self._records.get(subagent_id)
        if record is None or record.status != "running":
            return False
        self._records[subagent_id] = record._replace(
            status=status,
            finished_at=_now(),
            result=result,
            error=error,
            tokens=max(record.tokens, tokens),
        )
        return True

    async def record_tokens(self, subagent_id: str, tokens: int) -> None:
        record = self._records.get(subagent_id)
        if record is not None and tokens > record.tokens:
            self._records[subagent_id] = record._replace(tokens=tokens)

    async def mark_delivered(self, subagent_id: str) -> bool:
        record = self._records.get(subagent_id)
        if record is None or record.delivered:
            return False
        self._records[subagent_id] = record._replace(delivered=True)
        return True

    async def get(self, subagent_id: str) -> SubagentRecord | None:
        return self._records.get(subagent_id)

    async def children(self, parent: str) -> list[SubagentRecord]:
        return [r for r in self._records.values() if r.parent == parent]

    async def unsettled(self) -> list[SubagentRecord]:
        return [r for r in self._records.values() if r.status == "running" or not r.delivered]


@dataclass
class _Child:
    """What the manager keeps in memory about one running child."""

    record: SubagentRecord
    definition: AgentDefinition
    ended: anyio.Event = field(default_factory=anyio.Event)
    # Stops its follower (see `Subagents.forget_session`), once it follows the child.
    watching: anyio.CancelScope | None = None
    attached: bool = False  # a sync spawn call is waiting for the result
    taken: bool = False  # that call has it (or was stopped): no event to hand over
    bad_results: int = 0
    reminded: bool = False
    # Its cancel is under way (its own children first): idle with nothing running then is
    # not "stopped without a result".
    cancelling: bool = False
    question: tuple[anyio.Event, list[str]] | None = None
    question_text: str = ""
    last_message: str = ""
    # Its model tokens over every run: those stored when this run took it up, plus this run's.
    tokens: int = 0
    seen: int = 0  # the session's own count (of this run) when last looked at
    stored: int = 0  # the most the repository holds
    # When that was stored, or this run took it up (anyio's clock): a child that ends within
    # RECORD_SECONDS has its tokens stored only with its ending.
    stored_at: float = field(default_factory=anyio.current_time)


class Subagents:
    """The children of every session of a runtime; see the module docs."""

    def __init__(
        self,
        definitions: Mapping[str, AgentDefinition],
        *,
        limits: SubagentLimits | None = None,
        repository: SubagentRepository | None = None,
        context_model: Model | None = None,
    ) -> None:
        self.definitions = dict(definitions)
        # The model that writes a child's context under the llm strategy (None: that strategy
        # is refused, and adaptive selection never picks it).
        self.context_model = context_model
        self.limits = limits or SubagentLimits()
        self.repository: SubagentRepository = repository or MemorySubagents()
        # Where a child's record is written (see wakeful.core.session_writes): as one worker of
        # several, through the view fenced by the lease of its own session (the worker that
        # runs it), or of its parent's before its session runs anywhere (its spawn), so a
        # worker that lost the session writes nothing more for the child.
        self.session_writes: SessionWrites = shared_writes
        self._host: SubagentHost | None = None
        self._tg: TaskGroup | None = None
        # Set by start() once restore() ran: a session recovered at a restart may call a tool
        # before the runtime follows children, and waits for that (see _ready).
        self._started: anyio.Event | None = None
        self._children: dict[str, _Child] = {}  # running, and ended ones not yet handed over
        # The children of this run not yet handed over and ended (others: the repository).
        self._records: dict[str, SubagentRecord] = {}
        # Spawns of this process past their limit check and not yet stored: they count as
        # running for the spawns after them (see spawn).
        self._spawning: dict[str, SubagentRecord] = {}
        # Parents that are not sessions of the runtime (a client of the collaboration MCP
        # server), by session id: their children's questions, progress and results go here.
        self.outside_parents: dict[str, ParentInbox] = {}

    # --- the runtime's side ---------------------------------------------------------------------

    async def restore(self, *, session: str | None = None) -> None:
        """Take up the children a previous run left (running, or ended with a result not yet
        handed over), before their sessions are recovered.

        With `session`, only what goes with that session, followed at once when the runtime
        follows children already: as one worker of several, each is taken up by the worker that
        takes that session over, so by one worker at a time. A running child goes with its own
        session (its follower looks at it: idle, its tokens, its last words), an ended one with
        its parent's (its result goes there)."""
        self.starting()
        for record in await self.repository.unsettled():
            if record.id in self._children or not _goes_with(record, session):
                continue  # followed here already, or another session's
            definition = self.definitions.get(record.agent)
            self._records[record.id] = record
            if definition is None:
                await self._end(
                    record.id,
                    "failed",
                    error=f"its agent {record.agent!r} is no longer defined",
                    record=record,
                )
                continue
            child = _Child(record, definition, tokens=record.tokens, stored=record.tokens)
            if record.status != "running":
                child.ended.set()
            self._children[record.id] = child
            if self._tg is not None:
                self._tg.start_soon(self._watch, child, name=f"subagent {record.id}")

    def starting(self) -> None:
        """The runtime is starting: a tool called before :meth:`start` (by a session recovered
        meanwhile) waits for it."""
        if self._started is None:
            self._started = anyio.Event()

    async def start(self, host: SubagentHost, tg: TaskGroup) -> None:
        """Follow the children from now on (those :meth:`restore` took up too)."""
        self._host, self._tg = host, tg
        if self._started is not None:
            self._started.set()
        for child in list(self._children.values()):
            tg.start_soon(self._watch, child, name=f"subagent {child.record.id}")

    def child(self, session: str) -> tuple[SubagentRecord, AgentDefinition] | None:
        """The record and agent of the child whose session this is, if it is one."""
        record = self._records.get(session)
        if record is None:
            return None
        definition = self.definitions.get(record.agent)
        return None if definition is None else (record, definition)

    async def load(self, session: str) -> tuple[SubagentRecord, AgentDefinition] | None:
        """The same, looking in the repository for a child of an earlier run."""
        found = self.child(session)
        if found is not None or not session.startswith("sub_"):
            return found
        record = await self.repository.get(session)
        if record is None:
            return None
        self._records[record.id] = record
        return self.child(session)

    # --- the parent's side ----------------------------------------------------------------------

    async def spawn(
        self,
        parent: str,
        call_id: str,
        *,
        agent: str,
        task: str,
        mode: SubagentMode,
        share: ManualShare | None = None,
        call: CallContextSettings | None = None,
    ) -> tuple[SubagentRecord, ContextRecord]:
        """Start a child of `parent` on `task`, with what its context strategy shares of the
        parent's conversation (see :mod:`wakeful.collab`); the child's record and how its
        context was chosen. SubagentError when the agent is unknown, a limit would be passed or
        the context cannot be made as asked."""
        host, tg = await self._ready()
        definition = self.definitions.get(agent)
        if definition is None:
            names = ", ".join(sorted(self.definitions)) or "none are defined"
            raise SubagentError(
                f"There is no agent named {agent!r}; the agents are: {names}. Define more with "
                "[[agents]] in wakeful.toml or an agents/<name>/AGENT.md folder."
            )
        parent_record = self._records.get(parent)
        depth = parent_record.depth + 1 if parent_record else 1
        subagent_id = new_subagent_id()
        # A tree is one delegation: a top-level session's child and all its descendants.
        root = parent_record.root if parent_record else subagent_id
        limits = self.limits
        if depth > limits.max_depth:
            raise SubagentError(
                f"A child here would be at depth {depth}, over the limit of {limits.max_depth} "
                "(subagents.max_depth): do this part yourself, or hand it back to your parent."
            )
        record = SubagentRecord(
            id=subagent_id,
            parent=parent,
            parent_call=call_id,
            root=root,
            depth=depth,
            agent=agent,
            task=task,
            mode=mode,
            status="running",
            created_at=_now(),
        )
        running = await self._running_near(parent, root if root != subagent_id else None)
        # From this count to the reservation nothing awaits: of this process's spawns at the
        # same moment, each counts those before it (running, or reserved while their context is
        # made). The store counts again as it stores the record, for other workers' spawns.
        mine = sum(r.parent == parent for r in running)
        if mine >= limits.max_children:
            raise SubagentError(_over_limit("max_children", mine, limits.max_children))
        tree = sum(r.root == root for r in running)
        if tree >= limits.max_tree:
            raise SubagentError(_over_limit("max_tree", tree, limits.max_tree))
        self._spawning[subagent_id] = record
        try:
            child, context = await self._start_child(
                host, record, definition, share=share, call=call
            )
        finally:
            del self._spawning[subagent_id]
        tg.start_soon(self._watch, child, name=f"subagent {record.id}")
        return child.record, context

    async def _start_child(
        self,
        host: SubagentHost,
        record: SubagentRecord,
        definition: AgentDefinition,
        *,
        share: ManualShare | None,
        call: CallContextSettings | None,
    ) -> tuple[_Child, ContextRecord]:
        """The rest of a spawn whose place is reserved: its tree's tokens checked, its context
        made, its record stored (within the limits, counted again by the repository) and its
        task delivered to its session."""
        limits = self.limits
        # A new tree (a top-level session's child) has used nothing yet.
        used = await self.tree_tokens(record.root) if record.root != record.id else 0
        if used >= limits.max_tokens_per_tree:
            raise SubagentError(
                f"The children of this tree used {used:,} tokens, the limit "
                f"(subagents.max_tokens_per_tree = {limits.max_tokens_per_tree:,}): finish "
                "the work yourself."
            )
        try:
            view = ParentView.from_trajectory(record.task, host.messages(record.parent))
            prepared = await prepare_child_context(
                view,
                definition.context,
                call=call,
                share=share,
                model=self.context_model,
            )
        except UserError as exc:
            raise SubagentError(str(exc)) from exc
        record = record._replace(created_at=_now(), context_strategy=prepared.record.strategy)
        try:
            await self._writes(record.id, record.parent).add(
                record, max_children=limits.max_children, max_tree=limits.max_tree
            )
        except SubagentLimitReached as exc:
            raise SubagentError(_over_limit(exc.kind, exc.running, exc.limit)) from exc
        child = _Child(record, definition, attached=record.mode == "sync")
        self._children[record.id] = child
        self._records[record.id] = record
        await host.deliver(
            Event(
                kind=AGENT_INPUT,
                source=Source(type="agent", id=record.parent),
                content=prepared.text,
                # The blocks carry their own source tags ([FROM_MAIN_AGENT], [FROM_USER], …).
                context={
                    "from": "parent",
                    "subagent": record.id,
                    "mode": record.mode,
                    "tagged": True,
                },
                session=record.id,
            )
        )
        return child, prepared.record

    async def wait(self, subagent_id: str) -> SubagentRecord:
        """Until the child ends (a sync spawn call); its final record, marked handed over. A
        cancelled wait (the parent's call stopped) cancels the child."""
        child = self._children.get(subagent_id)
        if child is None:
            raise SubagentError(f"No child {subagent_id} is running.")
        child.attached = True
        try:
            await child.ended.wait()
        except BaseException:
            with anyio.CancelScope(shield=True):
                if child.record.status == "running":
                    await self.cancel(subagent_id, "its parent's call was stopped")
            raise
        finally:
            child.taken = True
            child.attached = False
        record = child.record
        await self._writes(record.id).mark_delivered(record.id)
        self._forget(record.id)
        if self._host is not None:
            self._host.changed()
        return record

    async def message(self, parent: str, subagent_id: str, text: str) -> str:
        """Send the child a message: the answer to its open question, or a new input."""
        child = await self._own(parent, subagent_id)
        if child.record.status != "running":
            raise SubagentError(
                f"{subagent_id} has ended ({child.record.status}); it cannot take messages. "
                "Spawn a new one if there is more to do."
            )
        if child.question is not None:
            answered, answers = child.question
            answers.append(text)
            answered.set()
            return f"answered the question of {subagent_id}"
        host, _ = await self._ready()
        await host.deliver(
            Event(
                kind=AGENT_INPUT,
                source=Source(type="agent", id=parent),
                content=text,
                context={"from": "parent", "subagent": subagent_id},
                session=subagent_id,
            )
        )
        return f"sent to {subagent_id}"

    async def cancel(self, subagent_id: str, reason: str, *, parent: str | None = None) -> str:
        """Cancel a child and, first, its own children; what happened, in a line."""
        host, _ = await self._ready()  # its ending counts the tokens of this run too
        child = await self._own(parent, subagent_id)
        record = child.record
        if record.status != "running":
            return f"{subagent_id} had already ended ({record.status}); nothing to cancel"
        child.cancelling = True
        doomed = [
            c
            for c in self._children.values()
            if c.record.parent == subagent_id and c.record.status == "running"
        ]
        for grandchild in doomed:
            grandchild.taken = True  # its parent stops too: nobody is left to read its ending
        # Siblings are cancelled together, so the store commits their writes together.
        async with anyio.create_task_group() as tg:
            for grandchild in doomed:
                tg.start_soon(
                    self._cancel_orphan,
                    grandchild.record.id,
                    f"its parent {subagent_id} was cancelled",
                )
        cascaded = len(doomed)
        ended = await self._end(subagent_id, "cancelled", error=reason)
        if ended:
            await host.deliver(
                Event(
                    kind=AGENT_INTERRUPT,
                    source=Source(type="agent", id=record.parent),
                    content=f"Cancelled by your parent: {reason}. Stop now.",
                    context={"from": "parent", "subagent": subagent_id},
                    session=subagent_id,
                )
            )
        more = f", with {cascaded} of its children" if cascaded else ""
        return f"cancelled {subagent_id}{more}"

    def open_question(self, subagent_id: str) -> str | None:
        """The question the child is waiting to have answered (ask_parent), or None."""
        child = self._children.get(subagent_id)
        return child.question_text if child is not None and child.question else None

    async def tree_tokens(self, root: str) -> int:
        """Tokens one delegation tree used over every run: each of its children's as stored,
        or as counted so far when one running now has used more (see :meth:`_count_tokens`)."""
        total = 0
        for record in await self._tree(root):
            child = self._children.get(record.id)
            counted = self._count_tokens(child) if child is not None else 0
            total += max(record.tokens, counted)
        return total

    async def _running_near(self, parent: str, root: str | None) -> list[SubagentRecord]:
        """The children running now among `parent`'s and those of the tree `root` (None: a new
        tree): those followed here, and those the store says are running, which other workers of
        a cluster may follow (the limits hold for the whole tree, wherever its children run),
        and the spawns of this process under way (:attr:`_spawning`). What is in memory is read
        after the store, with no await before the caller's count."""
        stored = await self.repository.children(parent)
        if root is not None:
            stored += await self._tree(root)
        running = {
            c.record.id: c.record for c in self._children.values() if c.record.status == "running"
        }
        running.update(self._spawning)
        for record in stored:
            if record.status == "running":
                running.setdefault(record.id, record)
        return list(running.values())

    async def _tree(self, root: str) -> list[SubagentRecord]:
        """Every child of the tree `root` names (it, and all its descendants), ended or
        running, from the repository: what a restart leaves of the tree's spending."""
        top = await self.repository.get(root)
        if top is None:
            return []
        found, parents = [top], [top]
        while parents:
            parents = [
                child for parent in parents for child in await self.repository.children(parent.id)
            ]
            found.extend(parents)
        return found

    def _count_tokens(self, child: _Child) -> int:
        """The child's tokens over every run so far. Its session counts only this run's, from 0
        (and from 0 again when it is loaded anew), so what it adds is counted on top of those
        the child had when this run took it up."""
        if child.record.status != "running" or self._host is None:
            return child.tokens
        live = self._host.tokens_of(child.record.id)
        child.tokens += live - child.seen if live >= child.seen else live
        child.seen = live
        return child.tokens

    async def _record_tokens(self, child: _Child, *, at_once: bool = False) -> None:
        """Store the running child's tokens when they grew, at most every RECORD_SECONDS
        (unless `at_once`), so that a crash loses little of its tree's spending."""
        if child.record.status != "running":
            return  # its ending stored them
        tokens = self._count_tokens(child)
        now = anyio.current_time()
        if tokens <= child.stored or (not at_once and now - child.stored_at < RECORD_SECONDS):
            return
        child.stored, child.stored_at = tokens, now
        await self._writes(child.record.id).record_tokens(child.record.id, tokens)

    async def listing(self, parent: str) -> list[dict[str, Any]]:
        """The children of `parent`, oldest first: status, tokens, last message."""
        host = self._host
        out = []
        for record in await self.repository.children(parent):
            record = self._records.get(record.id, record)
            child = self._children.get(record.id)
            tokens = max(record.tokens, self._count_tokens(child) if child else 0)
            last = (child.last_message if child else "") or (
                host.last_text(record.id) if host else ""
            )
            out.append(
                {
                    "id": record.id,
                    "agent": record.agent,
                    "mode": record.mode,
                    "status": record.status,
                    "tokens": tokens,
                    "task": _cut(record.task, 200),
                    "last_message": _cut(last, 300),
                    **(
                        {"question": child.question_text}
                        if child is not None and child.question
                        else {}
                    ),
                    **({"error": record.error} if record.error else {}),
                    **({"result": _cut(record.result, 300)} if record.result else {}),
                }
            )
        return out

    # --- the child's side -----------------------------------------------------------------------

    async def return_result(self, session: str, result: Any) -> str:
        """The child `session` hands back `result`; a result its schema refuses raises
        SubagentError (once; a second bad one fails the child)."""
        child = self._children.get(session)
        if child is None or child.record.status != "running":
            raise SubagentError("This session is not a running subagent; there is no parent.")
        await self._ready()  # its ending counts the tokens of this run too
        problem = schema_problem(child.definition, result)
        if problem is not None:
            child.bad_results += 1
            if child.bad_results >= 2:
                await self._end(
                    session,
                    "failed",
                    error=f"its result did not match its schema twice: {problem}",
                )
                return "failed: the result did not match the schema again; your parent is told"
            raise SubagentError(
                f"The result does not match your output schema: {problem}. Fix it and call "
                "return_result again (once more only)."
            )
        await self._end(session, "done", result=json.dumps(result, ensure_ascii=False))
        return "returned to your parent; stop here"

    async def ask(self, session: str, question: str) -> str:
        """The child asks its parent and waits for the answer (at most
        `answer_timeout_seconds`)."""
        child = self._children.get(session)
        if child is None or child.record.status != "running":
            raise SubagentError("This session is not a running subagent; there is no parent.")
        host, _ = await self._ready()
        answered, answers = anyio.Event(), list[str]()
        child.question, child.question_text = (answered, answers), question
        try:
            await self._to_parent(
                host,
                Event(
                    kind=SUBAGENT_QUESTION,
                    source=Source(type="agent", id=session),
                    content=question,
                    context={"subagent": session, "agent": child.record.agent},
                    session=child.record.parent,
                ),
            )
            with anyio.move_on_after(self.limits.answer_timeout_seconds):
                await answered.wait()
        finally:
            child.question, child.question_text = None, ""
        if not answers:
            return (
                f"No answer from your parent in {self.limits.answer_timeout_seconds:g} s. Go on "
                "with the most conservative choice, and say in your result what you assumed."
            )
        return str(answers[0])

    async def progress(self, session: str, text: str) -> str:
        """The child reports progress: an event for a streaming parent, noted otherwise."""
        child = self._children.get(session)
        if child is None or child.record.status != "running":
            raise SubagentError("This session is not a running subagent; there is no parent.")
        child.last_message = text
        if child.record.mode != "stream":
            return "noted (your parent sees it in list_subagents)"
        host, _ = await self._ready()
        await self._to_parent(
            host,
            Event(
                kind=SUBAGENT_PROGRESS,
                source=Source(type="agent", id=session),
                content=text,
                context={"subagent": session, "agent": child.record.agent},
                session=child.record.parent,
            ),
        )
        return "sent to your parent"

    # --- internals ------------------------------------------------------------------------------

    async def _to_parent(self, host: SubagentHost, event: Event) -> None:
        """Hand an event to the parent it names: a runtime session, or an outside parent."""
        outside = self.outside_parents.get(event.session or "")
        if outside is not None:
            await outside(event)
        else:
            await host.deliver(event)

    async def _ready(self) -> tuple[SubagentHost, TaskGroup]:
        """The runtime's side, waiting while the runtime starts: its sessions recovered at a
        restart run (and may call the tools) before it follows children."""
        if self._host is None and self._started is not None:
            await self._started.wait()
        return self._running()

    def _running(self) -> tuple[SubagentHost, TaskGroup]:
        if self._host is None or self._tg is None:
            raise SubagentError("Subagents run only inside a running runtime.")
        return self._host, self._tg

    async def _own(self, parent: str | None, subagent_id: str) -> _Child:
        """The child `subagent_id` of `parent` (any parent's for None), running or ended (an
        ended one from the repository); SubagentError when there is none."""
        child = self._children.get(subagent_id)
        record = child.record if child else self._records.get(subagent_id)
        if record is None and _CHILD_ID.fullmatch(subagent_id):
            record = await self.repository.get(subagent_id)
        if record is None or (parent is not None and record.parent != parent):
            raise SubagentError(
                f"You have no child {subagent_id}; list_subagents shows the ones you spawned."
            )
        if child is None:
            child = _Child(record, self.definitions[record.agent])
            child.ended.set()
        return child

    async def _end(
        self,
        subagent_id: str,
        status: SubagentStatus,
        *,
        result: str | None = None,
        error: str | None = None,
        record: SubagentRecord | None = None,
    ) -> bool:
        """Record how the child ended (the first ending wins) and wake its waiter."""
        running = self._children.get(subagent_id)
        tokens = self._count_tokens(running) if running is not None else 0
        parent = record.parent if record is not None else None
        ended = await self._writes(subagent_id, parent).finish(
            subagent_id, status, result=result, error=error, tokens=tokens
        )
        if not ended:
            return False
        known = record or self._records.get(subagent_id)
        if known is not None:
            final = known._replace(
                status=status,
                result=result,
                error=error,
                finished_at=_now(),
                tokens=max(known.tokens, tokens),
            )
            self._records[subagent_id] = final
            child = self._children.get(subagent_id)
            if child is not None:
                child.record = final
                child.ended.set()
        if status != "cancelled":  # a cancellation cascades by itself, children first
            orphans = self._running_children(subagent_id)
            for orphan in orphans:
                self._children[orphan.id].taken = True  # its parent will not read its ending
            async with anyio.create_task_group() as tg:
                for orphan in orphans:
                    tg.start_soon(
                        self._cancel_orphan, orphan.id, f"its parent {subagent_id} ended ({status})"
                    )
        return True

    async def _cancel_orphan(self, subagent_id: str, reason: str) -> None:
        """Cancel a child whose parent was cancelled or ended: nobody will read its ending."""
        await self.cancel(subagent_id, reason)
        await self._writes(subagent_id).mark_delivered(subagent_id)

    async def _watch(self, child: _Child) -> None:
        """Follow one child until it ends, then hand its result to the parent unless a sync
        call is waiting for it; stop following it when the session it goes with moved to
        another worker (its record's writes refused here), which takes it up."""
        with anyio.CancelScope() as child.watching:
            try:
                await self._watch_here(child)
            except SessionMoved as exc:
                log.warning(
                    "subagent %s is followed by another worker now: %s", child.record.id, exc
                )
                self._children.pop(child.record.id, None)

    def forget_session(self, session: str) -> None:
        """Stop following the children that go with `session` (see :meth:`restore`): the
        session moved to another worker (as one worker of several), which took them up."""
        for child in list(self._children.values()):
            if _goes_with(child.record, session):
                del self._children[child.record.id]
                if child.watching is not None:
                    child.watching.cancel()

    async def _watch_here(self, child: _Child) -> None:
        host, _ = self._running()
        try:
            await self._follow(child)
        except anyio.get_cancelled_exc_class():
            # The runtime stops while the child works: what it spent counts in the next run.
            with anyio.CancelScope(shield=True):
                await self._record_tokens(child, at_once=True)
            raise
        await child.ended.wait()
        if child.attached:
            return  # the spawn call hands it over
        if not child.taken:
            await self._hand_over(child.record)
        self._forget(child.record.id)
        host.changed()

    async def _follow(self, child: _Child) -> None:
        """Until the child ends: its limits (wall time, its tokens, its tree's), its tokens
        stored now and then, and its idling without a result."""
        host, _ = self._running()
        record = child.record
        definition = child.definition
        limit_seconds = definition.max_seconds or self.limits.max_seconds
        limit_tokens = min(
            definition.max_tokens or self.limits.max_tokens_per_child,
            self.limits.max_tokens_per_child,
        )
        started = datetime.fromisoformat(record.created_at)
        checked = child.tokens  # its tokens when its tree's were last looked at
        while not child.ended.is_set():
            elapsed = (datetime.now(UTC) - started).total_seconds()
            if elapsed >= limit_seconds:
                await self.cancel(
                    record.id,
                    f"it ran {elapsed:.1f} s, over its wall time of {limit_seconds:g} s "
                    "(max_seconds of the agent, or subagents.max_seconds)",
                )
                break
            with anyio.move_on_after(min(CHECK_SECONDS, limit_seconds - elapsed)):
                await host.wait_settled()
            if child.ended.is_set():
                break
            tokens = self._count_tokens(child)
            if tokens > limit_tokens:
                await self.cancel(
                    record.id,
                    f"it used {tokens:,} tokens, over its limit of {limit_tokens:,} "
                    "(max_tokens of the agent, or subagents.max_tokens_per_child)",
                )
                break
            await self._record_tokens(child)
            # Its tree is looked at when it spent (what others spend, their watchers look at).
            if tokens > checked:
                checked = tokens
                used = await self.tree_tokens(record.root)
                if used > self.limits.max_tokens_per_tree:
                    await self.cancel(
                        record.id,
                        f"its tree used over {self.limits.max_tokens_per_tree:,} tokens "
                        "(subagents.max_tokens_per_tree)",
                    )
                    break
            if child.ended.is_set():
                break
            if (
                not child.cancelling
                and host.is_idle(record.id)
                and not self._running_children(record.id)
            ):
                await self._idle_without_result(child)

    def _writes(self, subagent_id: str, parent: str | None = None) -> SubagentRepository:
        """Where the record of child `subagent_id` (of `parent`, or of the parent this run
        knows) is written: the fenced view of its own session, else of its parent's (its
        spawn, before its session runs anywhere), else the repository."""
        if parent is None:
            known = self._records.get(subagent_id)
            parent = known.parent if known is not None else None
        fenced = self.session_writes(subagent_id)
        if fenced is None and parent is not None:
            fenced = self.session_writes(parent)
        return fenced.subagents if fenced is not None else self.repository

    def _forget(self, subagent_id: str) -> None:
        """Drop an ended child whose ending went where it goes (the repository keeps it)."""
        self._children.pop(subagent_id, None)
        if not any(r.parent == subagent_id for r in self._records.values()):
            self._records.pop(subagent_id, None)

    def busy(self, parent: str | None = None) -> bool:
        """Whether a child (of `parent`) is running or has a result its parent does not have
        yet."""
        return any(
            not c.taken and parent in (None, c.record.parent) for c in self._children.values()
        )

    def _running_children(self, parent: str) -> list[SubagentRecord]:
        return [
            c.record
            for c in self._children.values()
            if c.record.parent == parent and c.record.status == "running"
        ]

    async def _idle_without_result(self, child: _Child) -> None:
        """The child stopped without return_result: its final text is its result when it needs
        no schema (or matches it); otherwise it is reminded once, then failed."""
        host, _ = self._running()
        if child.cancelling:
            return  # it ends cancelled
        text = host.last_text(child.record.id).strip()
        value: Any = text
        if child.definition.output_schema is not None:
            try:
                value = json.loads(text)
            except json.JSONDecodeError:
                value = None
        if text and value is not None and schema_problem(child.definition, value) is None:
            await self._end(child.record.id, "done", result=json.dumps(value, ensure_ascii=False))
            return
        if child.reminded:
            await self._end(
                child.record.id,
                "failed",
                error="it stopped without returning a result"
                + (f"; its last words: {_cut(text, 300)}" if text else ""),
            )
            return
        child.reminded = True
        await host.deliver(
            Event(
                kind=AGENT_INPUT,
                source=Source(type="agent", id=child.record.parent),
                content=(
                    "You stopped without returning a result. Call return_result now with your "
                    "result"
                    + (" matching your output schema." if child.definition.output_schema else ".")
                ),
                context={"from": "parent", "subagent": child.record.id},
                session=child.record.id,
            )
        )

    async def _hand_over(self, record: SubagentRecord) -> None:
        """Hand the child's ending to its parent as a `subagent.result` event, once."""
        host, _ = self._running()
        if record.delivered:
            return
        parent = self._records.get(record.parent)
        if parent is None and _CHILD_ID.fullmatch(record.parent):
            # A parent child that another worker follows (as one worker of several).
            parent = await self.repository.get(record.parent)
        parent_gone = parent is None and _CHILD_ID.fullmatch(record.parent) is not None
        if parent_gone or (parent is not None and parent.status != "running"):
            # Its parent is a child that ended (or was cancelled) meanwhile: nobody is there to
            # read it, and waking that session for it would run a turn after it was stopped.
            await self._writes(record.id, record.parent).mark_delivered(record.id)
            return
        await self._to_parent(
            host,
            Event(
                id=source_event_id("subagent", record.id),
                kind=SUBAGENT_RESULT,
                source=Source(type="agent", id=record.id),
                content=describe_ending(record),
                context={
                    "subagent": record.id,
                    "agent": record.agent,
                    "status": record.status,
                    "call_id": record.parent_call,
                },
                session=record.parent,
            ),
        )
        await self._writes(record.id, record.parent).mark_delivered(record.id)


def _over_limit(kind: RunningLimit, running: int, limit: int) -> str:
    """What a parent is told when a new child would pass a limit on running children."""
    if kind == "max_children":
        return (
            f"{running} of your children are running, the most at once "
            f"(subagents.max_children = {limit}): wait for one to finish (list_subagents), or "
            "cancel one."
        )
    return (
        f"{running} children of this tree are running, the most at once "
        f"(subagents.max_tree = {limit}): wait for some to finish."
    )


def _goes_with(record: SubagentRecord, session: str | None) -> bool:
    """Whether the child is taken up with `session` (every child with None): a running one
    with its own session, an ended one with its parent's."""
    if session is None:
        return True
    return session == (record.id if record.status == "running" else record.parent)


def schema_problem(definition: AgentDefinition, value: Any) -> str | None:
    """Why `value` does not match the agent's output schema, or None."""
    schema = definition.output_schema
    if schema is None:
        return None
    error = jsonschema.exceptions.best_match(
        jsonschema.Draft202012Validator(schema).iter_errors(value)
    )
    if error is None:
        return None
    where = "/".join(map(str, error.absolute_path)) or "the result"
    return f"{where}: {error.message}"


def describe_ending(record: SubagentRecord) -> str:
    """How a child ended, for its parent: its result, or why it has none."""
    head = f"Subagent {record.id} ({record.agent}) "
    if record.status == "done":
        return head + f"returned: {record.result}"
    if record.status == "cancelled":
        return head + f"was cancelled: {record.error}. It has no result."
    return head + f"failed: {record.error}. It has no result."


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
