"""The tasks table: the record of every background task, in the order it was first saved."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial

from ..core.records import TaskRecord
from ..events import Event
from .access import StoreAccess
from .events import INSERT_EVENT, event_row
from .rows import decode_row, task_from_json

__all__ = ["SqliteTasks"]


class SqliteTasks:
    """The :class:`~wakeful.core.repositories.TaskRepository` of a SQLite store."""

    def __init__(self, access: StoreAccess) -> None:
        self._access = access

    async def save(self, record: TaskRecord) -> None:
        await self._access.write_kept(_upsert_task(record), f"task {record.id}")

    def save_nowait(self, record: TaskRecord) -> None:
        self._access.write_nowait(_upsert_task(record), f"task {record.id}", keep=True)

    def save_stopped_nowait(self, record: TaskRecord, note: Event) -> None:
        upsert = _upsert_task(record)
        row = event_row(note, "pending")

        def apply(conn: sqlite3.Connection) -> None:
            upsert(conn)
            conn.execute(INSERT_EVENT, row)

        self._access.write_nowait(apply, f"task {record.id}, stopped with the runtime", keep=True)

    async def find(self, session: str | None = None) -> list[TaskRecord]:
        return await self._access.read(partial(self._access.reader.tasks, session))

    async def mark_running_lost(self) -> list[TaskRecord]:
        path = self._access.path

        def apply(conn: sqlite3.Connection) -> list[TaskRecord]:
            rows = conn.execute(
                "SELECT id, data FROM tasks WHERE state = 'running' ORDER BY rowid"
            ).fetchall()
            ended = datetime.now(UTC)
            lost = []
            for task_id, data in rows:
                record = decode_row(path, f"task {task_id}", partial(task_from_json, data))
                record.state = "lost"
                record.ended_at = ended
                lost.append(record)
            conn.executemany(
                "UPDATE tasks SET state = 'lost', data = ? WHERE id = ?",
                [(json.dumps(r.to_dict()), r.id) for r in lost],
            )
            return lost

        return await self._access.write(apply, "the marking of running tasks as lost")


def _upsert_task(record: TaskRecord) -> Callable[[sqlite3.Connection], None]:
    row = (record.id, record.session, record.state, json.dumps(record.to_dict()))

    def apply(conn: sqlite3.Connection) -> None:
        conn.execute(
            "INSERT INTO tasks (id, session, state, data) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (id) DO UPDATE SET session = excluded.session, state = excluded.state, "
            "data = excluded.data",
            row,
        )

    return apply
