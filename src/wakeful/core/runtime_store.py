"""The store a runtime runs on, whatever its backend: :class:`RuntimeStore`.

Two classes implement it: the SQLite store (:class:`wakeful.store.sqlite.Store`, one file, the
default) and the PostgreSQL store (:class:`wakeful.store.postgres.PostgresStore`, a database
several workers can share). The runtime, its services and the tools are written against this
interface; only what needs SQLite itself (reading a file without a runtime, the alert about the
store's disk) names the SQLite class.

Besides one repository per group of tables (:mod:`.repositories`), a store has the disk-space
API of the SQLite store. On PostgreSQL a full disk is the server's concern: the store is never
short of space, holds no write in memory, and its watcher is never called.

The older delegating methods (``store.add_event`` …, from
:class:`wakeful.store.delegation.RepositoryMethods`) are part of it, so code written against them
runs on both backends.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from ..events import Event
from ..messages import Message
from .records import (
    AuditRow,
    ConnectedChannel,
    EventStatus,
    IdempotencyEntry,
    StoredConfirmation,
    StoredEvent,
    TaskRecord,
    TimerRecord,
)
from .repositories import (
    AuditRepository,
    CaseRepository,
    ChannelCursorRepository,
    ConfirmationRepository,
    EventRepository,
    HumanRequestRepository,
    IdempotencyRepository,
    MessageRepository,
    SubagentRepository,
    TaskRepository,
    TimerRepository,
    TrajectoryRepository,
)

__all__ = ["ConnectedChannelRepository", "RuntimeStore"]


class ConnectedChannelRepository(Protocol):
    """The channels the agent connected while running (`connect_channel`), by unique name, so
    the next start reconnects them."""

    async def save(
        self, name: str, kind: str, settings: Mapping[str, Any], filter: Mapping[str, Any]
    ) -> None:
        """Store (or replace) the channel `name`."""
        ...

    async def remove(self, name: str) -> bool:
        """Forget the channel `name`; say whether it was stored."""
        ...

    async def all(self) -> list[ConnectedChannel]:
        """Every stored channel."""
        ...


class RuntimeStore(Protocol):
    """What the runtime, its services and the tools use of a store (see the module docs)."""

    # -- the repositories --

    @property
    def events(self) -> EventRepository: ...
    @property
    def trajectories(self) -> TrajectoryRepository: ...
    @property
    def task_records(self) -> TaskRepository: ...
    @property
    def timer_records(self) -> TimerRepository: ...
    @property
    def idempotency_keys(self) -> IdempotencyRepository: ...
    @property
    def confirmations(self) -> ConfirmationRepository: ...
    @property
    def audit_log(self) -> AuditRepository: ...
    @property
    def channel_cursors(self) -> ChannelCursorRepository: ...
    @property
    def connected_channels(self) -> ConnectedChannelRepository: ...
    @property
    def messages(self) -> MessageRepository: ...
    @property
    def subagents(self) -> SubagentRepository: ...
    @property
    def cases(self) -> CaseRepository: ...
    @property
    def human_requests(self) -> HumanRequestRepository: ...

    # -- the store itself --

    @property
    def instance_id(self) -> str:
        """Names this opening of the store (the owner of its idempotency claims)."""
        ...

    @property
    def path(self) -> Path | None:
        """The store's file on this machine (SQLite), whose disk the runtime watches; None for a
        store on a database server."""
        ...

    @property
    def where(self) -> str:
        """The store in words, for messages: a file's path, or a database's name and host
        (never a password)."""
        ...

    @property
    def closed(self) -> bool: ...

    async def flush(self) -> None:
        """Wait until every write queued so far (including `*_nowait` ones) is committed."""
        ...

    async def close(self) -> None:
        """Finish every queued write and close the store. Safe to call twice."""
        ...

    # -- disk space (never short on PostgreSQL: the server's disk is its own concern) --

    @property
    def held_writes(self) -> int:
        """How many writes are held in memory until a full disk has room for them."""
        ...

    @property
    def space_short(self) -> bool:
        """Whether the store's disk is full (or below the reserve): new events are refused."""
        ...

    def watch_space(self, listener: Callable[[bool], None]) -> None:
        """Call `listener(True)` when the store's disk fills, `listener(False)` once it has room
        again and every held write is stored."""
        ...

    # -- the older delegating methods (see wakeful.store.delegation) --

    async def add_event(self, event: Event, status: EventStatus = "pending") -> int: ...
    async def keep_event(self, event: Event, status: EventStatus = "pending") -> None: ...
    async def add_events(
        self, events: Sequence[Event], status: EventStatus = "pending"
    ) -> list[int]: ...
    async def mark_events(self, ids: Iterable[str], status: str) -> None: ...
    async def pending_events(self, session: str | None = None) -> list[Event]: ...
    async def recent_events(
        self, limit: int = 50, session: str | None = None, after_rowid: int | None = None
    ) -> list[StoredEvent]: ...
    async def append_messages(self, session: str, messages: Sequence[Message]) -> None: ...
    async def load_trajectory(self, session: str) -> list[Message]: ...
    async def sessions(self) -> list[str]: ...
    async def sessions_to_resume(self) -> list[str]: ...
    async def save_task(self, record: TaskRecord) -> None: ...
    def save_task_nowait(self, record: TaskRecord) -> None: ...
    def save_stopped_task_nowait(self, record: TaskRecord, note: Event) -> None: ...
    async def tasks(self, session: str | None = None) -> list[TaskRecord]: ...
    async def mark_running_tasks_lost(self) -> list[TaskRecord]: ...
    async def save_timer(self, record: TimerRecord) -> None: ...
    async def save_timers(self, records: Sequence[TimerRecord]) -> None: ...
    async def record_timer_fires(
        self, fires: Sequence[Event], timers: Sequence[TimerRecord]
    ) -> None: ...
    async def delete_timer(self, timer_id: str) -> bool: ...
    async def timers(
        self, session: str | None = None, *, active_only: bool = False
    ) -> list[TimerRecord]: ...
    async def claim_idempotency_key(
        self, tool: str, key: str, arguments_hash: str, started_at: datetime
    ) -> IdempotencyEntry | None: ...
    async def finish_idempotency_key(
        self,
        tool: str,
        key: str,
        finished_at: datetime,
        *,
        result: str | None = None,
        error: str | None = None,
    ) -> None: ...
    async def release_idempotency_key(self, tool: str, key: str) -> None: ...
    async def idempotency_entry(self, tool: str, key: str) -> IdempotencyEntry | None: ...
    async def add_confirmation(self, entry: StoredConfirmation) -> None: ...
    async def use_confirmation(
        self,
        token: str,
        check: Callable[[StoredConfirmation | None], None],
        used_at: datetime,
    ) -> None: ...
    async def fail_confirmation(self, token: str, error: str) -> bool: ...
    async def confirmation(self, token: str) -> StoredConfirmation | None: ...
    def add_audit_nowait(
        self,
        *,
        ts: datetime,
        session: str,
        tool: str,
        call_id: str,
        status: str,
        duration_ms: float,
        data: dict[str, Any],
    ) -> None: ...
    async def audit_rows(
        self,
        *,
        since: datetime | None = None,
        session: str | None = None,
        tool: str | None = None,
        after_seq: int = 0,
        limit: int = 1000,
    ) -> list[AuditRow]: ...
