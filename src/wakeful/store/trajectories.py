"""The trajectory table: each session's messages in the order they were appended."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from functools import partial

from ..messages import Message, message_to_json
from .access import StoreAccess

__all__ = ["SqliteTrajectories"]


class SqliteTrajectories:
    """The :class:`~wakeful.core.repositories.TrajectoryRepository` of a SQLite store."""

    def __init__(self, access: StoreAccess) -> None:
        self._access = access

    async def append(self, session: str, messages: Sequence[Message]) -> None:
        rows = [(session, message_to_json(m)) for m in messages]

        def apply(conn: sqlite3.Connection) -> None:
            conn.executemany("INSERT INTO trajectory (session, data) VALUES (?, ?)", rows)

        await self._access.write_kept(
            apply, f"{len(rows)} trajectory message(s) of session {session!r}"
        )

    async def load(self, session: str) -> list[Message]:
        return await self._access.read(partial(self._access.reader.load_trajectory, session))

    async def sessions(self) -> list[str]:
        return await self._access.read(self._access.reader.sessions)

    async def sessions_to_resume(self) -> list[str]:
        """See :meth:`StoreReader.sessions_to_resume` (the SQL twin of the trajectory's own
        checks)."""
        return await self._access.read(self._access.reader.sessions_to_resume)
