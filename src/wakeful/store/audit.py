"""The audit table: one row per audited tool call, in the order they were recorded."""

from __future__ import annotations

import sqlite3
from datetime import datetime
from functools import partial
from typing import Any

from ..core.records import AuditRow
from .access import StoreAccess
from .events import utc_key
from .rows import audit_row

__all__ = ["SqliteAuditLog"]


class SqliteAuditLog:
    """The :class:`~wakeful.core.repositories.AuditRepository` of a SQLite store."""

    def __init__(self, access: StoreAccess) -> None:
        self._access = access

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
        row = audit_row(utc_key(ts), session, tool, call_id, status, duration_ms, data)

        def apply(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO audit (ts, session, tool, call_id, status, duration_ms, data) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                row,
            )

        self._access.write_nowait(apply, f"the audit record of call {call_id}", keep=True)

    async def rows(
        self,
        *,
        since: datetime | None = None,
        session: str | None = None,
        tool: str | None = None,
        after_seq: int = 0,
        limit: int = 1000,
    ) -> list[AuditRow]:
        """See :meth:`StoreReader.audit_rows`."""
        read = partial(
            self._access.reader.audit_rows,
            since=utc_key(since),
            session=session,
            tool=tool,
            after_seq=after_seq,
            limit=limit,
        )
        return await self._access.read(read)
