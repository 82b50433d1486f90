"""The store's methods from before the repositories (``store.add_event``, ``store.tasks`` …),
each a thin delegation to one repository method, so that callers written against them keep
working, on either backend: the SQLite and the PostgreSQL store both inherit them (they are part
of :class:`wakeful.core.runtime_store.RuntimeStore`). New code can use the repositories
(``store.events.add``) directly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

from ..core.records import (
    AuditRow,
    EventStatus,
    IdempotencyEntry,
    StoredConfirmation,
    StoredEvent,
    TaskRecord,
    TimerRecord,
)
from ..core.repositories import (
    AuditRepository,
    ConfirmationRepository,
    EventRepository,
    IdempotencyRepository,
    TaskRepository,
    TimerRepository,
    TrajectoryRepository,
)
from ..events import Event
from ..messages import Message

__all__ = ["RepositoryMethods"]


class RepositoryMethods:
    """One method per store operation, each delegating to the repository that does it."""

    events: EventRepository
    trajectories: TrajectoryRepository
    task_records: TaskRepository
    timer_records: TimerRepository
    idempotency_keys: IdempotencyRepository
    confirmations: ConfirmationRepository
    audit_log: AuditRepository

    async def add_event(self, event: Event, status: EventStatus = "pending") -> int:
        """See :meth:`EventRepository.add`."""
        return await self.events.add(event, status)

    async def keep_event(self, event: Event, status: EventStatus = "pending") -> None:
        """See :meth:`EventRepository.keep`."""
        await self.events.keep(event, status)

    async def add_events(
        self, events: Sequence[Event], status: EventStatus = "pending"
    ) -> list[int]:
        """See :meth:`EventRepository.add_many`."""
        return await self.events.add_many(events, status)

    async def mark_events(self, ids: Iterable[str], status: str) -> None:
        """See :meth:`EventRepository.mark`."""
        await self.events.mark(ids, status)

    async def pending_events(self, session: str | None = None) -> list[Event]:
        """See :meth:`EventRepository.pending`."""
        return await self.events.pending(session)

    async def recent_events(
        self, limit: int = 50, session: str | None = None, after_rowid: int | None = None
    ) -> list[StoredEvent]:
        """See :meth:`EventRepository.recent`."""
        return await self.events.recent(limit, session, after_rowid)

    async def append_messages(self, session: str, messages: Sequence[Message]) -> None:
        """See :meth:`TrajectoryRepository.append`."""
        await self.trajectories.append(session, messages)

    async def load_trajectory(self, session: str) -> list[Message]:
        """See :meth:`TrajectoryRepository.load`."""
        return await self.trajectories.load(session)

    async def sessions(self) -> list[str]:
        """See :meth:`TrajectoryRepository.sessions`."""
        return await self.trajectories.sessions()

    async def sessions_to_resume(self) -> list[str]:
        """See :meth:`TrajectoryRepository.sessions_to_resume`."""
        return await self.trajectories.sessions_to_resume()

    async def save_task(self, record: TaskRecord) -> None:
        """See :meth:`TaskRepository.save`."""
        await self.task_records.save(record)

    def save_task_nowait(self, record: TaskRecord) -> None:
        """See :meth:`TaskRepository.save_nowait` (for TaskManager's synchronous `on_change`)."""
        self.task_records.save_nowait(record)

    def save_stopped_task_nowait(self, record: TaskRecord, note: Event) -> None:
        """See :meth:`TaskRepository.save_stopped_nowait`."""
        self.task_records.save_stopped_nowait(record, note)

    async def tasks(self, session: str | None = None) -> list[TaskRecord]:
        """See :meth:`TaskRepository.find`."""
        return await self.task_records.find(session)

    async def mark_running_tasks_lost(self) -> list[TaskRecord]:
        """See :meth:`TaskRepository.mark_running_lost`."""
        return await self.task_records.mark_running_lost()

    async def save_timer(self, record: TimerRecord) -> None:
        """See :meth:`TimerRepository.save`."""
        await self.timer_records.save(record)

    async def save_timers(self, records: Sequence[TimerRecord]) -> None:
        """See :meth:`TimerRepository.save_many`."""
        await self.timer_records.save_many(records)

    async def record_timer_fires(
        self, fires: Sequence[Event], timers: Sequence[TimerRecord]
    ) -> None:
        """See :meth:`TimerRepository.record_fires`."""
        await self.timer_records.record_fires(fires, timers)

    async def delete_timer(self, timer_id: str) -> bool:
        """See :meth:`TimerRepository.delete`."""
        return await self.timer_records.delete(timer_id)

    async def timers(
        self, session: str | None = None, *, active_only: bool = False
    ) -> list[TimerRecord]:
        """See :meth:`TimerRepository.find`."""
        return await self.timer_records.find(session, active_only=active_only)

    async def claim_idempotency_key(
        self, tool: str, key: str, arguments_hash: str, started_at: datetime
    ) -> IdempotencyEntry | None:
        """See :meth:`IdempotencyRepository.claim`."""
        return await self.idempotency_keys.claim(tool, key, arguments_hash, started_at)

    async def finish_idempotency_key(
        self,
        tool: str,
        key: str,
        finished_at: datetime,
        *,
        result: str | None = None,
        error: str | None = None,
    ) -> None:
        """See :meth:`IdempotencyRepository.finish`."""
        await self.idempotency_keys.finish(tool, key, finished_at, result=result, error=error)

    async def release_idempotency_key(self, tool: str, key: str) -> None:
        """See :meth:`IdempotencyRepository.release`."""
        await self.idempotency_keys.release(tool, key)

    async def idempotency_entry(self, tool: str, key: str) -> IdempotencyEntry | None:
        """See :meth:`IdempotencyRepository.entry`."""
        return await self.idempotency_keys.entry(tool, key)

    async def add_confirmation(self, entry: StoredConfirmation) -> None:
        """See :meth:`ConfirmationRepository.add`."""
        await self.confirmations.add(entry)

    async def use_confirmation(
        self,
        token: str,
        check: Callable[[StoredConfirmation | None], None],
        used_at: datetime,
    ) -> None:
        """See :meth:`ConfirmationRepository.use`."""
        await self.confirmations.use(token, check, used_at)

    async def fail_confirmation(self, token: str, error: str) -> bool:
        """See :meth:`ConfirmationRepository.fail`."""
        return await self.confirmations.fail(token, error)

    async def confirmation(self, token: str) -> StoredConfirmation | None:
        """See :meth:`ConfirmationRepository.get`."""
        return await self.confirmations.get(token)

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
    ) -> None:
        """See :meth:`AuditRepository.add_nowait`."""
        self.audit_log.add_nowait(
            ts=ts,
            session=session,
            tool=tool,
            call_id=call_id,
            status=status,
            duration_ms=duration_ms,
            data=data,
        )

    async def audit_rows(
        self,
        *,
        since: datetime | None = None,
        session: str | None = None,
        tool: str | None = None,
        after_seq: int = 0,
        limit: int = 1000,
    ) -> list[AuditRow]:
        """See :meth:`AuditRepository.rows`."""
        return await self.audit_log.rows(
            since=since, session=session, tool=tool, after_seq=after_seq, limit=limit
        )
