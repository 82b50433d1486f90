"""The store's interfaces: one repository per group of tables, as :class:`typing.Protocol`s.

The SQLite store (:mod:`wakeful.store`) implements them all on one file, sharing one writer
thread; another backend (PostgreSQL, for many workers) implements the same methods with the same
guarantees. Every write method returns once its write is committed, and writes made from one event
loop are applied in the order they were made. "Kept" writes record work already under way: on a
full disk they are not refused but held in memory and written, in order, once space returns.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Literal, Protocol

from ..errors import UserError, WakefulError
from ..events import Event
from ..messages import Message
from .records import (
    AuditRow,
    CaseRecord,
    DeliveryState,
    EventStatus,
    HumanRequestRecord,
    HumanRequestStatus,
    IdempotencyEntry,
    OutboundMessage,
    StoredConfirmation,
    StoredEvent,
    SubagentRecord,
    SubagentStatus,
    TaskRecord,
    TimerRecord,
)

__all__ = [
    "AuditRepository",
    "CaseRepository",
    "ConfirmationRepository",
    "EventRepository",
    "HumanRequestRepository",
    "IdempotencyRepository",
    "MessageRepository",
    "Repositories",
    "RunningLimit",
    "SubagentLimitReached",
    "SubagentRepository",
    "TaskRepository",
    "TimerRepository",
    "TrajectoryRepository",
    "check_running_limits",
    "refuse_over_running_limits",
]


class EventRepository(Protocol):
    """Events in arrival order, each pending until its session has consumed it."""

    async def add(self, event: Event, status: EventStatus = "pending") -> int:
        """Store a new event; return its rowid (its position in arrival order). Refused with
        StoreFull while space is short (see :meth:`keep` for events about work already done)."""
        ...

    async def keep(self, event: Event, status: EventStatus = "pending") -> None:
        """Store an event about work already done (a task's result, an operator alert), as a
        kept write: never refused for a full disk."""
        ...

    async def add_many(self, events: Sequence[Event], status: EventStatus = "pending") -> list[int]:
        """Store several events in one write, all or none; return their rowids in order."""
        ...

    async def add_new(self, event: Event, status: EventStatus = "pending") -> bool:
        """Store `event` unless an event with its id is stored already (a redelivery); say
        whether it was stored. Refused with StoreFull while space is short, like :meth:`add`."""
        ...

    async def add_new_many(self, events: Sequence[tuple[Event, EventStatus]]) -> list[bool]:
        """Store each (event, status) whose id is not stored yet, in one transaction; say for
        each whether it was stored (False: a duplicate, already stored or earlier in `events`)."""
        ...

    async def count(self, session: str | None = None) -> dict[str, int]:
        """How many events are stored with each status (a status without any is absent)."""
        ...

    async def mark(self, ids: Iterable[str], status: str) -> None:
        """Set the status ('pending' or 'consumed') of the events with these ids (a kept write).
        Unknown ids are ignored: marking is idempotent."""
        ...

    async def pending(self, session: str | None = None) -> list[Event]:
        """Events not yet consumed, in arrival order."""
        ...

    async def recent(
        self,
        limit: int = 50,
        session: str | None = None,
        after_rowid: int | None = None,
        *,
        status: EventStatus | None = None,
    ) -> list[StoredEvent]:
        """Events in arrival order: the last `limit`, or the first `limit` after `after_rowid`;
        only those with `status` when it is given."""
        ...


class TrajectoryRepository(Protocol):
    """Each session's trajectory: its messages in the order they were appended."""

    async def append(self, session: str, messages: Sequence[Message]) -> None:
        """Append messages to a session's trajectory, all or none (a kept write)."""
        ...

    async def load(self, session: str) -> list[Message]:
        """The session's trajectory messages, in the order they were appended."""
        ...

    async def sessions(self) -> list[str]:
        """Every session with a trajectory or an event, sorted by name."""
        ...

    async def sessions_to_resume(self) -> list[str]:
        """Sessions whose trajectory ends where work was cut off (a tool call without a result,
        or a message that calls for a model turn), sorted by name."""
        ...


class TaskRepository(Protocol):
    """The records of tasks, in the order they were first saved."""

    async def save(self, record: TaskRecord) -> None:
        """Insert or update a task record (a kept write)."""
        ...

    def save_nowait(self, record: TaskRecord) -> None:
        """Queue a task save without waiting (for a synchronous caller). Saves are applied in
        order; a failure is logged. The store's `flush` waits for them."""
        ...

    def save_stopped_nowait(self, record: TaskRecord, note: Event) -> None:
        """Queue, as one transaction, the record of a task the runtime's stop cut off and the
        pending event (`note`) that tells its session at the next start."""
        ...

    async def find(self, session: str | None = None) -> list[TaskRecord]:
        """Stored task records (of `session`, or all), in the order they were first saved."""
        ...

    async def mark_running_lost(self) -> list[TaskRecord]:
        """Mark every task stored as running as lost, and return those records (at start-up:
        their results will never come)."""
        ...


class TimerRepository(Protocol):
    """Timers, and the recording of their fires."""

    async def save(self, record: TimerRecord) -> None:
        """Insert or update a timer (a kept write)."""
        ...

    async def save_many(self, records: Sequence[TimerRecord]) -> None:
        """Insert or update several timers in one transaction (a kept write)."""
        ...

    async def record_fires(self, fires: Sequence[Event], timers: Sequence[TimerRecord]) -> None:
        """Store the `timer.trigger` events of due timers (as pending) and the timers' new state
        in one transaction, so that a crash can neither lose a fire nor repeat one."""
        ...

    async def claim_due(
        self,
        decide: Callable[
            [Sequence[TimerRecord], datetime], tuple[Sequence[Event], Sequence[TimerRecord]]
        ],
        *,
        limit: int = 100,
        now: datetime | None = None,
    ) -> list[Event]:
        """Fire up to `limit` due timers (active, `next_fire` at or before `now`, by default the
        store's clock) and return the fire events stored.

        The claim, the decision and the writes are one transaction: the due timers are read as
        stored (not as a caller remembers them), ``decide(timers, now)`` returns their fire
        events and new state, and both are stored (the events as pending) before the next claim
        can see the timers. A due timer is claimed by one caller only, whichever process or
        worker asks, so each occurrence fires once; a timer fired or deleted meanwhile is not
        claimed. `decide` runs on the store's writer: it must be quick, must not touch the
        store, and may change only timers it was given (else nothing is saved)."""
        ...

    async def delete(self, timer_id: str) -> bool:
        """Delete a timer; return whether it was stored."""
        ...

    async def find(
        self, session: str | None = None, *, active_only: bool = False
    ) -> list[TimerRecord]:
        """Stored timers, active ones soonest first, then finished ones."""
        ...


class IdempotencyRepository(Protocol):
    """Idempotency keys: one claim per (tool, key), then the outcome of its action."""

    async def claim(
        self, tool: str, key: str, arguments_hash: str, started_at: datetime
    ) -> IdempotencyEntry | None:
        """Claim (tool, key) for a run by this store instance; None when claimed now. When the
        key is already stored, nothing changes and its entry is returned: the check and the
        claim are one write, so two calls with one key cannot both claim it."""
        ...

    async def finish(
        self,
        tool: str,
        key: str,
        finished_at: datetime,
        *,
        result: str | None = None,
        error: str | None = None,
    ) -> None:
        """Record the outcome of a claimed key: `result` (JSON) when done, else `error`."""
        ...

    async def release(self, tool: str, key: str) -> None:
        """Forget a claim whose action did not start, so the key can be used again."""
        ...

    async def entry(self, tool: str, key: str) -> IdempotencyEntry | None:
        """The stored entry of (tool, key), if any."""
        ...

    async def running_elsewhere(self, entry: IdempotencyEntry) -> bool:
        """Whether `entry` is a running claim of another store instance that is still alive (a
        live worker sharing this store), so its action may still be going on."""
        ...


class ConfirmationRepository(Protocol):
    """Confirmation tokens, each used at most once."""

    async def add(self, entry: StoredConfirmation) -> None:
        """Store a newly issued confirmation token."""
        ...

    async def use(
        self,
        token: str,
        check: Callable[[StoredConfirmation | None], None],
        used_at: datetime,
    ) -> None:
        """Mark `token` used if `check` (run on the stored token, or None) raises nothing. Check
        and mark are one write, so a token is used at most once even under concurrency; `check`
        may run on another thread and must not touch the event loop."""
        ...

    async def fail(self, token: str, error: str) -> bool:
        """Record that the action a token confirmed failed; return whether the token is stored."""
        ...

    async def get(self, token: str) -> StoredConfirmation | None:
        """The stored token, if any."""
        ...


class AuditRepository(Protocol):
    """The audit log: one row per audited tool call, in the order they were recorded."""

    def add_nowait(
        self,
        *,
        ts: datetime,
        session: str,
        tool: str,
        call_id: str,
        status: str,
        duration_ms: float,
        data: dict[str, Any],
    ) -> None:
        """Queue one audited call without waiting for its commit (a kept write); the store's
        `flush` waits for it."""
        ...

    async def rows(
        self,
        *,
        since: datetime | None = None,
        session: str | None = None,
        tool: str | None = None,
        after_seq: int = 0,
        limit: int = 1000,
    ) -> list[AuditRow]:
        """Audited calls in the order they were recorded, the first `limit` after `after_seq`."""
        ...


class Repositories(Protocol):
    """A whole store: one repository per group of tables, as :class:`wakeful.store.sqlite.Store`
    exposes them."""

    events: EventRepository
    trajectories: TrajectoryRepository
    task_records: TaskRepository
    timer_records: TimerRepository
    idempotency_keys: IdempotencyRepository
    confirmations: ConfirmationRepository
    audit_log: AuditRepository
    messages: MessageRepository


class ChannelCursorRepository(Protocol):
    """Where each channel keeps how far it has read its source (an IMAP mailbox's UIDVALIDITY
    and last UID, a bot's update offset), so a restart neither re-reads nor skips. A channel
    advances its cursor only after the events up to it were delivered to the Inbox; a crash in
    between re-reads a little, which the Inbox recognises as duplicates."""

    async def get(self, channel: str, key: str) -> str | None:
        """The value stored for (channel, key), or None."""
        ...

    async def put(self, channel: str, key: str, value: str) -> None:
        """Store (channel, key) = value, replacing any earlier value, durably."""
        ...

    async def put_many(self, channel: str, values: Mapping[str, str]) -> None:
        """Store several cursors of one channel in one transaction (values that only make sense
        together, like an IMAP mailbox's UIDVALIDITY and last UID)."""
        ...

    async def forget(self, channel: str) -> None:
        """Drop every cursor of `channel` (it was disconnected for good)."""
        ...


class MessageRepository(Protocol):
    """The messages sent to the user (`msg_…` ids), with their deliveries per channel and their
    one read state. Lists are newest first; `before` pages back from a message id."""

    async def add(self, message: OutboundMessage) -> None:
        """Store a new message with the deliveries it carries (usually "queued" ones), in one
        transaction. An id stored already is refused with a UserError."""
        ...

    async def record_delivery(
        self,
        message_id: str,
        channel: str,
        state: DeliveryState,
        *,
        channel_message_id: str | None = None,
        error: str | None = None,
    ) -> None:
        """Create or advance the delivery of `message_id` on `channel` (never moving it back:
        "sent" after "read" stays "read"); a given `channel_message_id` or `error` is kept.
        Recording "read" marks the message read (see :meth:`mark_read`)."""
        ...

    async def mark_read(self, ids: Iterable[str], *, channel: str) -> list[str]:
        """Mark these messages read, seen on `channel` (its delivery, if any, becomes "read");
        return the ids that were unread until now. Unknown or already read ids are skipped."""
        ...

    async def mark_read_through(self, session: str, message_id: str, *, channel: str) -> list[str]:
        """Mark read every message of `session` up to and including `message_id` (what a
        person who scrolled to it has seen); return the ids that were unread until now."""
        ...

    async def get(self, message_id: str) -> OutboundMessage | None:
        """The message with this id, with its deliveries, or None."""
        ...

    async def all_by_channel_id(
        self, channel: str, channel_message_id: str
    ) -> list[OutboundMessage]:
        """Every message whose copy on `channel` has that channel's id, oldest first: one for a
        copy of its own, each part of a digest (they share the digest's copy); none for an
        unknown id."""
        ...

    async def list(
        self,
        session: str | None = None,
        *,
        unread_only: bool = False,
        limit: int = 50,
        before: str | None = None,
    ) -> list[OutboundMessage]:
        """Up to `limit` messages (of `session`, or of every session), newest first, only those
        sent before the message `before` when given (the next page)."""
        ...

    async def unread_count(self, session: str | None = None) -> int:
        """How many messages (of `session`, or of every session) are not read yet."""
        ...


# Which limit on running children a new child would pass: of its parent, or of its tree.
RunningLimit = Literal["max_children", "max_tree"]


class SubagentLimitReached(WakefulError):
    """Raised by :meth:`SubagentRepository.add`: the new child would pass a limit on running
    children (`limit` of them, `running` now), so nothing was stored. The spawn is refused; it
    can be asked again once a child has ended."""

    def __init__(self, kind: RunningLimit, running: int, limit: int) -> None:
        super().__init__(
            f"{running} children are running, the most at once ({kind} = {limit}); the new "
            "child was not stored."
        )
        self.kind: RunningLimit = kind
        self.running = running
        self.limit = limit


def check_running_limits(max_children: int | None, max_tree: int | None) -> None:
    """Refuse (UserError) a limit on running children below 1: it would refuse every child."""
    for name, value in (("max_children", max_children), ("max_tree", max_tree)):
        if value is not None and value < 1:
            raise UserError(
                f"{name} = {value} would refuse every child: give at least 1, or None for no limit."
            )


def refuse_over_running_limits(
    children: int, tree: int, max_children: int | None, max_tree: int | None
) -> None:
    """SubagentLimitReached when one more child would pass a limit, with `children` of its
    parent's and `tree` of its tree's running now."""
    if max_children is not None and children >= max_children:
        raise SubagentLimitReached("max_children", children, max_children)
    if max_tree is not None and tree >= max_tree:
        raise SubagentLimitReached("max_tree", tree, max_tree)


class SubagentRepository(Protocol):
    """The child agents of every session (`sub_…` ids), their place in their tree and how they
    ended; what lets a restart find the children still at work and hand over results exactly
    once."""

    async def add(
        self,
        record: SubagentRecord,
        *,
        max_children: int | None = None,
        max_tree: int | None = None,
    ) -> None:
        """Store a new child (status "running"); an id stored already is refused (UserError).

        With limits, the running children of `record.parent` (at most `max_children`) and of
        its tree (rows with the same `root`, at most `max_tree`) are counted and the child is
        stored in one atomic step, so of spawns at once (in one process or on several workers
        of one store) no more pass than the limits let: over one, SubagentLimitReached and
        nothing is stored. A limit below 1 is refused (UserError)."""
        ...

    async def finish(
        self,
        subagent_id: str,
        status: SubagentStatus,
        *,
        result: str | None = None,
        error: str | None = None,
        tokens: int = 0,
    ) -> bool:
        """Record how a running child ended; False (nothing changed) when it had ended already:
        the first ending wins."""
        ...

    async def record_tokens(self, subagent_id: str, tokens: int) -> None:
        """Raise the stored model tokens of a child to `tokens` (never lowers them), so the
        tokens of its tree count across a restart; a kept write."""
        ...

    async def mark_delivered(self, subagent_id: str) -> bool:
        """Record that its parent has the result; False when it was delivered already."""
        ...

    async def get(self, subagent_id: str) -> SubagentRecord | None: ...

    async def children(self, parent: str) -> list[SubagentRecord]:
        """The children of session `parent`, oldest first."""
        ...

    async def unsettled(self) -> list[SubagentRecord]:
        """Children still running, or ended with a result their parent does not have yet."""
        ...


class CaseRepository(Protocol):
    """The decisions people made on requests (:class:`CaseRecord`, "case 12"), in the order they
    were made; what the learning loop retrieves similar cases from and exports as a dataset."""

    async def add(self, case: CaseRecord) -> CaseRecord:
        """Store a new case and return it with the number the store gave it (the `number`
        passed in is ignored)."""
        ...

    async def get(self, number: int) -> CaseRecord | None: ...

    async def recent(self, limit: int = 50, *, before: int | None = None) -> list[CaseRecord]:
        """Up to `limit` cases, newest first; only those numbered below `before` when given."""
        ...

    async def all(self) -> list[CaseRecord]:
        """Every case, oldest first."""
        ...


class HumanRequestRepository(Protocol):
    """The requests to a person (:class:`HumanRequestRecord`): the open ones, how each ended and
    whether its session has the outcome; what lets a restart put open requests back in the queue,
    apply the defaults that fell due meanwhile, and find a request a late answer names."""

    async def add(self, record: HumanRequestRecord) -> None:
        """Store a new request (status "open"); an id stored already is refused (UserError)."""
        ...

    async def close(
        self,
        request_id: str,
        status: HumanRequestStatus,
        decision: str,
        *,
        delivered: bool = False,
    ) -> bool:
        """Record how an open request ended (`decision` as JSON text; `closed_at` is now);
        False (nothing changed) when it had ended already: the first ending wins. `delivered`:
        the session already has the outcome (e.g. the call waited for it inline)."""
        ...

    async def add_late(self, request_id: str, answer: str) -> bool:
        """Append `answer` (JSON text) to the late answers of an ended request; False when there
        is no such ended request."""
        ...

    async def mark_delivered(self, request_id: str) -> bool:
        """Record that the session has the outcome; False when it was delivered already."""
        ...

    async def get(self, request_id: str) -> HumanRequestRecord | None:
        """The request with this id (any case), open or ended."""
        ...

    async def unsettled(self) -> list[HumanRequestRecord]:
        """Requests still open, or ended with an outcome their session does not have yet; oldest
        first."""
        ...

    async def recent(
        self, limit: int = 50, *, session: str | None = None
    ) -> list[HumanRequestRecord]:
        """Up to `limit` requests (of one session), open or ended, newest first."""
        ...
