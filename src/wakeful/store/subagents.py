"""The subagents table: every child agent, its tree and its result (see
:class:`~wakeful.core.repositories.SubagentRepository`)."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from typing import Any

from ..core.records import SubagentRecord, SubagentStatus
from ..core.repositories import check_running_limits, refuse_over_running_limits
from ..errors import UserError
from .access import StoreAccess
from .rows import SUBAGENT_COLUMNS, decode_subagent, subagent_row

__all__ = ["SqliteSubagents"]

# The running children of a parent and of a tree (its root), for the limits on running children.
# The repeated condition on status lets the partial index of unsettled rows serve it (SQLite uses
# a partial index only when the query names its condition): few rows are unsettled at any time.
_RUNNING_NEAR = (
    "SELECT coalesce(sum(parent = ?), 0), coalesce(sum(root = ?), 0) FROM subagents "
    "WHERE (status = 'running' OR delivered = 0) AND status = 'running'"
)


class SqliteSubagents:
    """The :class:`~wakeful.core.repositories.SubagentRepository` of a SQLite store."""

    def __init__(self, access: StoreAccess) -> None:
        self._access = access

    async def add(
        self,
        record: SubagentRecord,
        *,
        max_children: int | None = None,
        max_tree: int | None = None,
    ) -> None:
        check_running_limits(max_children, max_tree)
        row = subagent_row(record)

        def apply(conn: sqlite3.Connection) -> None:
            # One write on the one writer thread: the count and the insert are one step.
            if max_children is not None or max_tree is not None:
                children, tree = conn.execute(
                    _RUNNING_NEAR, (record.parent, record.root)
                ).fetchone()
                refuse_over_running_limits(children, tree, max_children, max_tree)
            try:
                conn.execute(
                    f"INSERT INTO subagents ({SUBAGENT_COLUMNS}) VALUES "
                    "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    row,
                )
            except sqlite3.IntegrityError as exc:
                raise UserError(f"A subagent with the id {record.id} is stored already.") from exc

        await self._access.write(apply, f"subagent {record.id}")

    async def finish(
        self,
        subagent_id: str,
        status: SubagentStatus,
        *,
        result: str | None = None,
        error: str | None = None,
        tokens: int = 0,
    ) -> bool:
        now = datetime.now(UTC).isoformat()

        def apply(conn: sqlite3.Connection) -> bool:
            cursor = conn.execute(
                "UPDATE subagents SET status = ?, finished_at = ?, result = ?, error = ?, "
                "tokens = max(tokens, ?) WHERE id = ? AND status = 'running'",
                (status, now, result, error, tokens, subagent_id),
            )
            return cursor.rowcount == 1

        return await self._access.write(apply, f"the end of subagent {subagent_id}")

    async def record_tokens(self, subagent_id: str, tokens: int) -> None:
        def apply(conn: sqlite3.Connection) -> None:
            conn.execute(
                "UPDATE subagents SET tokens = ? WHERE id = ? AND tokens < ?",
                (tokens, subagent_id, tokens),
            )

        # A record of work under way: on a full disk it is held and written later, in order.
        await self._access.write_kept(apply, f"the tokens of subagent {subagent_id}")

    async def mark_delivered(self, subagent_id: str) -> bool:
        def apply(conn: sqlite3.Connection) -> bool:
            cursor = conn.execute(
                "UPDATE subagents SET delivered = 1 WHERE id = ? AND delivered = 0",
                (subagent_id,),
            )
            return cursor.rowcount == 1

        return await self._access.write(apply, f"the result of subagent {subagent_id} delivered")

    async def get(self, subagent_id: str) -> SubagentRecord | None:
        rows = await self._select("WHERE id = ?", (subagent_id,))
        return rows[0] if rows else None

    async def children(self, parent: str) -> list[SubagentRecord]:
        return await self._select("WHERE parent = ? ORDER BY seq", (parent,))

    async def unsettled(self) -> list[SubagentRecord]:
        return await self._select("WHERE status = 'running' OR delivered = 0 ORDER BY seq", ())

    async def _select(self, where: str, params: tuple[Any, ...]) -> list[SubagentRecord]:
        reader = self._access.reader
        sql = f"SELECT {SUBAGENT_COLUMNS} FROM subagents {where}"

        def read() -> list[SubagentRecord]:
            return [decode_subagent(row) for row in reader.rows(sql, params)]

        return await self._access.read(read)
