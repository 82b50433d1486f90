"""The tasks table on PostgreSQL: the record of every background task, in the order it was first
saved; the same semantics as :class:`wakeful.store.tasks.SqliteTasks`."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from functools import partial
from typing import Final

from ...core.records import TaskRecord
from ...events import Event
from ..reader import task_from_json
from .access import Connection, PostgresAccess, decode_row
from .events import insert_events

__all__ = ["PostgresTasks"]

_UPSERT_TASK: Final = (
    "INSERT INTO tasks (id, session, state, data) VALUES (%s, %s, %s, %s) "
    "ON CONFLICT (id) DO UPDATE SET session = excluded.session, state = excluded.state, "
    "data = excluded.data"
)


class PostgresTasks:
    """The :class:`~wakeful.core.repositories.TaskRepository` of a PostgreSQL store."""

    def __init__(self, access: PostgresAccess) -> None:
        self._access = access

    async def save(self, record: TaskRecord) -> None:
        await self._access.write(_upsert_task(record), f"task {record.id}")

    def save_nowait(self, record: TaskRecord) -> None:
        self._access.write_nowait(_upsert_task(record), f"task {record.id}")

    def save_stopped_nowait(self, record: TaskRecord, note: Event) -> None:
        upsert = _upsert_task(record)

        async def apply(conn: Connection) -> None:
            await upsert(conn)
            await insert_events(conn, [note], "pending", self._access.where)

        self._access.write_nowait(apply, f"task {record.id}, stopped with the runtime")

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
        where = self._access.where

        async def apply(conn: Connection) -> list[TaskRecord]:
            cursor = await conn.execute(
                "SELECT id, data FROM tasks WHERE state = 'running' ORDER BY seq FOR UPDATE"
            )
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

        return await self._access.write(apply, "the marking of running tasks as lost")


def _upsert_task(record: TaskRecord) -> Callable[[Connection], Awaitable[None]]:
    row = (record.id, record.session, record.state, json.dumps(record.to_dict()))

    async def apply(conn: Connection) -> None:
        await conn.execute(_UPSERT_TASK, row)

    return apply
