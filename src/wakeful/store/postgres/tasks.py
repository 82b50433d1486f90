"""The tasks table on PostgreSQL: the record of every background task, in the order it was first
saved; the same semantics as :class:`wakeful.store.tasks.SqliteTasks`.

Each record also keeps the worker that saved it (the owner of the lease of a fenced view, else
the worker registered on the store), so that marking running tasks lost touches only tasks
whose worker is gone: a worker restarting with a stable name marks its own, and the new owner of
a session marks those of the session's previous owners (:meth:`PostgresTasks.mark_running_lost`).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from functools import partial
from typing import Final

from ...core.records import TaskRecord
from ...events import Event
from ..rows import decode_row, task_from_json
from .access import Connection, PostgresAccess
from .events import check_fenced_session, insert_events
from .leases import Lease

__all__ = ["PostgresTasks"]

_UPSERT_TASK: Final = (
    "INSERT INTO tasks (id, session, state, data, worker) VALUES (%s, %s, %s, %s, %s) "
    "ON CONFLICT (id) DO UPDATE SET session = excluded.session, state = excluded.state, "
    "data = excluded.data, worker = coalesce(excluded.worker, tasks.worker)"
)


class PostgresTasks:
    """The :class:`~wakeful.core.repositories.TaskRepository` of a PostgreSQL store (or of a
    view of it fenced by `fence`: the lease's session only, each write checked against it)."""

    def __init__(self, access: PostgresAccess, fence: Lease | None = None) -> None:
        self._access = access
        self._fence = fence

    def _worker(self) -> str | None:
        return self._fence.owner if self._fence is not None else self._access.worker

    async def save(self, record: TaskRecord) -> None:
        check_fenced_session(self._fence, [record.session], "a task")
        await self._access.write(
            _upsert_task(record, self._worker()), f"task {record.id}", fence=self._fence
        )

    def save_nowait(self, record: TaskRecord) -> None:
        check_fenced_session(self._fence, [record.session], "a task")
        self._access.write_nowait(
            _upsert_task(record, self._worker()), f"task {record.id}", fence=self._fence
        )

    def save_stopped_nowait(self, record: TaskRecord, note: Event) -> None:
        check_fenced_session(self._fence, [record.session, note.session], "a task")
        upsert = _upsert_task(record, self._worker())

        async def apply(conn: Connection) -> None:
            await upsert(conn)
            await insert_events(conn, [note], "pending", self._access.where)

        self._access.write_nowait(
            apply, f"task {record.id}, stopped with the runtime", fence=self._fence
        )

    async def find(self, session: str | None = None) -> list[TaskRecord]:
        sql, params = "SELECT id, data FROM tasks", []
        if session is not None:
            sql, params = sql + " WHERE session = %s", [session]
        rows = await self._access.read(sql + " ORDER BY seq", params)
        where = self._access.where
        return [
            decode_row(where, f"task {task_id}", partial(task_from_json, data))
            for task_id, data in rows
        ]

    async def mark_running_lost(self) -> list[TaskRecord]:
        """Mark as lost, and return, the running tasks whose worker is gone: on a fenced view,
        those of the lease's session saved by any other worker (its previous owners); on a store
        with a registered worker, that worker's own (saved by it before a restart, under the
        same name); on a store without workers (one process), every running task."""
        where = self._access.where
        sql, params = "SELECT id, data FROM tasks WHERE state = 'running'", []
        if self._fence is not None:
            sql += " AND session = %s AND worker IS DISTINCT FROM %s"
            params = [self._fence.session, self._fence.owner]
        elif self._access.worker is not None:
            sql, params = sql + " AND worker = %s", [self._access.worker]

        async def apply(conn: Connection) -> list[TaskRecord]:
            cursor = await conn.execute(sql + " ORDER BY seq FOR UPDATE", params)
            ended = datetime.now(UTC)
            lost = []
            for task_id, data in await cursor.fetchall():
                record = decode_row(where, f"task {task_id}", partial(task_from_json, data))
                record.state = "lost"
                record.ended_at = ended
                lost.append(record)
            async with conn.cursor() as update:
                await update.executemany(
                    "UPDATE tasks SET state = 'lost', data = %s WHERE id = %s",
                    [(json.dumps(r.to_dict()), r.id) for r in lost],
                )
            return lost

        return await self._access.write(
            apply, "the marking of running tasks as lost", fence=self._fence
        )


def _upsert_task(record: TaskRecord, worker: str | None) -> Callable[[Connection], Awaitable[None]]:
    row = (record.id, record.session, record.state, json.dumps(record.to_dict()), worker)

    async def apply(conn: Connection) -> None:
        await conn.execute(_UPSERT_TASK, row)

    return apply
