"""The audit table on PostgreSQL: one row per audited tool call, in the order they were
recorded; the same semantics as :class:`wakeful.store.audit.SqliteAuditLog`.

"In the order they were recorded" is `seq` order. Within one worker its one writer commits seqs
in order, so paging with `after_seq` misses nothing; across workers two transactions can commit
out of seq order (see the package docs on tailing), which a live tail of several workers' audit
would need a commit-order watermark for.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from functools import partial
from typing import Any

from ...core.records import AuditRow
from ..events import utc_key
from ..rows import audit_page_query, audit_row, decode_audit, decode_row
from .access import Connection, PostgresAccess

__all__ = ["PostgresAuditLog", "audit_from_row"]


class PostgresAuditLog:
    """The :class:`~wakeful.core.repositories.AuditRepository` of a PostgreSQL store."""

    def __init__(self, access: PostgresAccess) -> None:
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
        row = audit_row(ts.astimezone(UTC), session, tool, call_id, status, duration_ms, data)

        async def apply(conn: Connection) -> None:
            await conn.execute(
                "INSERT INTO audit (ts, session, tool, call_id, status, duration_ms, data) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s)",
                row,
            )

        # PostgreSQL holds no write back for a full disk (it refuses it): the SQLite store's
        # kept write is an ordinary queued write here, its failure logged.
        self._access.write_nowait(apply, f"the audit record of call {call_id}")

    async def rows(
        self,
        *,
        since: datetime | None = None,
        session: str | None = None,
        tool: str | None = None,
        after_seq: int = 0,
        limit: int = 1000,
    ) -> list[AuditRow]:
        sql, params = audit_page_query(
            "%s",
            since=since.astimezone(UTC) if since is not None else None,
            session=session,
            tool=tool,
            after_seq=after_seq,
            limit=limit,
        )
        rows = await self._access.read(sql, params)
        where = self._access.where
        return [
            decode_row(where, f"audit record #{row[0]}", partial(audit_from_row, row))
            for row in rows
        ]

    async def durations(self, since: datetime | None = None) -> list[tuple[str, str, float]]:
        """(tool, status, duration_ms) of every audited call since `since`, for statistics: only
        the three columns, so the web console's figures never read the calls' arguments."""
        sql, params = "SELECT tool, status, duration_ms FROM audit", []
        if since is not None:
            sql, params = sql + " WHERE ts >= %s", [since.astimezone(UTC)]
        rows = await self._access.read(sql, params)
        return [(tool, status, float(ms)) for tool, status, ms in rows]


def audit_from_row(row: Sequence[Any]) -> AuditRow:
    """An audited call from its row (`AUDIT_COLUMNS`), its time as the SQLite store writes it."""
    seq, ts, *rest = row
    return decode_audit((seq, utc_key(ts) or "", *rest))
