"""The subagents table on PostgreSQL: every child agent, its tree and its result; the same
semantics as :class:`wakeful.store.subagents.SqliteSubagents`.

"The first ending wins" and "delivered once" hold across workers too: each is one update that
re-checks its condition (`status = 'running'`, `NOT delivered`) on the row it locks, so of two
workers ending one child at once exactly one changes it.

In a view fenced by a session's lease (``PostgresStore.fenced(lease)``), every write is a write of
that session's tree of children (the lease's session is the subagent itself, its parent or its
root), checked against the lease: the worker holding the session runs its children, and one that
lost the lease must not record a child's ending (the first ending wins, so a stale "done" would
beat the new owner's repair), its tokens, or a result as delivered that it can no longer hand to
the parent (the result would be lost).

The limits on running children hold across workers: a spawn counts its parent's and its tree's
running children and inserts the new one in one transaction, under advisory locks on that parent
and tree (see :func:`_check_running`), so two workers spawning at once in one tree are counted
one after the other.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Final

from ...core.records import SubagentRecord, SubagentStatus
from ...core.repositories import check_running_limits, refuse_over_running_limits
from ..rows import SUBAGENT_COLUMNS, decode_subagent, subagent_row
from .access import Connection, PostgresAccess, insert_new
from .events import check_fenced_session
from .leases import Lease

__all__ = ["PostgresSubagents"]

_ID_CONSTRAINT: Final = "subagents_id_unique"
# The running children of a parent and of a tree (its root), for the limits on running children;
# the partial index of unsettled rows serves it (few rows are unsettled at any time).
_RUNNING_NEAR: Final = (
    "SELECT count(*) FILTER (WHERE parent = %s), count(*) FILTER (WHERE root = %s) "
    "FROM subagents WHERE status = 'running'"
)


class PostgresSubagents:
    """The :class:`~wakeful.core.repositories.SubagentRepository` of a PostgreSQL store (or of a
    view of it fenced by `fence`: the lease's session's tree only, each write checked against
    the lease)."""

    def __init__(self, access: PostgresAccess, fence: Lease | None = None) -> None:
        self._access = access
        self._fence = fence

    async def add(
        self,
        record: SubagentRecord,
        *,
        max_children: int | None = None,
        max_tree: int | None = None,
    ) -> None:
        check_running_limits(max_children, max_tree)
        if self._fence is not None and self._fence.session not in (record.root, record.id):
            check_fenced_session(self._fence, [record.parent], "subagents")
        row = subagent_row(record)

        async def apply(conn: Connection) -> None:
            # In the write's transaction, after its lease check when fenced.
            if max_children is not None or max_tree is not None:
                await _check_running(conn, record, max_children, max_tree)
            await insert_new(
                conn,
                f"INSERT INTO subagents ({SUBAGENT_COLUMNS}) VALUES "
                "(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                row,
                constraint=_ID_CONSTRAINT,
                taken=f"A subagent with the id {record.id} is stored already.",
            )

        await self._access.write(apply, f"subagent {record.id}", fence=self._fence)

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

        async def apply(conn: Connection) -> bool:
            await self._check_tree(conn, subagent_id)
            cursor = await conn.execute(
                "UPDATE subagents SET status = %s, finished_at = %s, result = %s, error = %s, "
                "tokens = greatest(tokens, %s) WHERE id = %s AND status = 'running'",
                (status, now, result, error, tokens, subagent_id),
            )
            return cursor.rowcount == 1

        return await self._access.write(
            apply, f"the end of subagent {subagent_id}", fence=self._fence
        )

    async def record_tokens(self, subagent_id: str, tokens: int) -> None:
        async def apply(conn: Connection) -> None:
            await self._check_tree(conn, subagent_id)
            await conn.execute(
                "UPDATE subagents SET tokens = %s WHERE id = %s AND tokens < %s",
                (tokens, subagent_id, tokens),
            )

        # PostgreSQL holds no write back for a full disk (it refuses it): a kept write is an
        # ordinary one here.
        await self._access.write(apply, f"the tokens of subagent {subagent_id}", fence=self._fence)

    async def mark_delivered(self, subagent_id: str) -> bool:
        async def apply(conn: Connection) -> bool:
            await self._check_tree(conn, subagent_id)
            cursor = await conn.execute(
                "UPDATE subagents SET delivered = true WHERE id = %s AND NOT delivered",
                (subagent_id,),
            )
            return cursor.rowcount == 1

        return await self._access.write(
            apply, f"the result of subagent {subagent_id} delivered", fence=self._fence
        )

    async def _check_tree(self, conn: Connection, subagent_id: str) -> None:
        """In a fenced view, refuse (UserError) a write for a subagent outside the tree of the
        lease's session (in the write's transaction, before it changes anything)."""
        fence = self._fence
        if fence is None:
            return
        cursor = await conn.execute(
            "SELECT parent FROM subagents WHERE id = %s AND %s NOT IN (id, parent, root)",
            (subagent_id, fence.session),
        )
        row = await cursor.fetchone()
        if row is not None:
            check_fenced_session(fence, [row[0]], "subagents")

    async def get(self, subagent_id: str) -> SubagentRecord | None:
        rows = await self._select("WHERE id = %s", (subagent_id,))
        return rows[0] if rows else None

    async def children(self, parent: str) -> list[SubagentRecord]:
        return await self._select("WHERE parent = %s ORDER BY seq", (parent,))

    async def unsettled(self) -> list[SubagentRecord]:
        return await self._select("WHERE status = 'running' OR NOT delivered ORDER BY seq", ())

    async def _select(self, where: str, params: tuple[Any, ...]) -> list[SubagentRecord]:
        rows = await self._access.read(f"SELECT {SUBAGENT_COLUMNS} FROM subagents {where}", params)
        return [decode_subagent(row) for row in rows]


async def _check_running(
    conn: Connection, record: SubagentRecord, max_children: int | None, max_tree: int | None
) -> None:
    """Refuse (SubagentLimitReached) a new child over a limit on running children, counting
    them under transaction-scoped advisory locks on its parent and its tree: another worker's
    spawn in the same parent or tree waits for this transaction to end, then counts this child
    (each statement reads what was committed before it began). The locks are taken in one order
    (by their names) so that two spawns cannot wait for each other."""
    keys = set()
    if max_children is not None:
        keys.add(f"wakeful subagents of parent {record.parent}")
    if max_tree is not None:
        keys.add(f"wakeful subagents of tree {record.root}")
    for key in sorted(keys):
        await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (key,))
    cursor = await conn.execute(_RUNNING_NEAR, (record.parent, record.root))
    row = await cursor.fetchone()
    assert row is not None  # an aggregate has one row
    refuse_over_running_limits(row[0], row[1], max_children, max_tree)
