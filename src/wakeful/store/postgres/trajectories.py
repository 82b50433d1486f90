"""The trajectory table on PostgreSQL: each session's messages in the order they were appended;
the same semantics as :class:`wakeful.store.trajectories.SqliteTrajectories`."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

from ...messages import Message, message_from_json, message_to_json
from .access import Connection, PostgresAccess, decode_row
from .events import check_fenced_session
from .leases import Lease

__all__ = ["PostgresTrajectories", "ending_needs_work"]


def ending_needs_work(message: Message) -> bool:
    """Whether a trajectory that ends with `message` was cut off: a tool call without its result
    or a message that calls for a model turn (a tool result, or a user message that is not a
    parallel answer's). The rule of `Trajectory.needs_model` and `Trajectory.unanswered_calls`
    for a last message, which the SQLite store evaluates in SQL."""
    if message.role == "tool":
        return True
    if message.role == "user":
        return message.mark != "parallel"
    if message.role == "assistant":
        return bool(message.tool_calls)
    return False


class PostgresTrajectories:
    """The :class:`~wakeful.core.repositories.TrajectoryRepository` of a PostgreSQL store (or of
    a view of it fenced by `fence`: appends to the lease's session only, each checked against the
    lease)."""

    def __init__(self, access: PostgresAccess, fence: Lease | None = None) -> None:
        self._access = access
        self._fence = fence

    async def append(self, session: str, messages: Sequence[Message]) -> None:
        check_fenced_session(self._fence, [session], "the trajectory")
        rows = [(session, ending_needs_work(m), message_to_json(m)) for m in messages]

        async def apply(conn: Connection) -> None:
            async with conn.cursor() as cursor:
                await cursor.executemany(
                    "INSERT INTO trajectory (session, needs_work, data) VALUES (%s, %s, %s)", rows
                )

        await self._access.write(
            apply, f"{len(rows)} trajectory message(s) of session {session!r}", fence=self._fence
        )

    async def load(self, session: str) -> list[Message]:
        rows = await self._access.read(
            "SELECT seq, data FROM trajectory WHERE session = %s ORDER BY seq", (session,)
        )
        where = self._access.where
        return [
            decode_row(where, f"trajectory message #{seq}", partial(message_from_json, data))
            for seq, data in rows
        ]

    async def sessions(self) -> list[str]:
        rows = await self._access.read(
            "SELECT session FROM trajectory UNION SELECT session FROM events ORDER BY session"
        )
        return [session for (session,) in rows]

    async def sessions_to_resume(self) -> list[str]:
        rows = await self._access.read(
            "SELECT session FROM ("
            "SELECT DISTINCT ON (session) session, needs_work FROM trajectory "
            "ORDER BY session, seq DESC) AS last WHERE needs_work ORDER BY session"
        )
        return [session for (session,) in rows]
