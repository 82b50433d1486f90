"""The trajectory table on PostgreSQL: each session's messages in the order they were appended;
the same semantics as :class:`wakeful.store.trajectories.SqliteTrajectories`."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Final

from ...messages import Message, message_from_json, message_to_json
from .access import Connection, PostgresAccess, decode_row
from .events import check_fenced_session
from .leases import LEASE_FOUND, LEASE_HELD, LEASE_ROW, Lease, lease_row_params, refuse_unless_held

__all__ = ["PostgresTrajectories", "ending_needs_work"]

# The rows of one append, from three parameters (the session, then each message's `needs_work`
# and JSON as arrays): one statement however many messages, numbered (`seq`) in their order.
_MESSAGES: Final = (
    "(session, needs_work, data) SELECT %s, m.needs_work, m.data "
    "FROM unnest(%s::boolean[], %s::text[]) WITH ORDINALITY AS m(needs_work, data, n)"
)
_APPEND: Final = f"INSERT INTO trajectory {_MESSAGES} ORDER BY m.n"
# A fenced append: the lease checked in the same statement (see .leases.LEASE_ROW).
_APPEND_FENCED: Final = (
    f"WITH {LEASE_ROW}, appended AS (INSERT INTO trajectory {_MESSAGES} "
    f"WHERE {LEASE_HELD} ORDER BY m.n) {LEASE_FOUND}"
)


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
        what = f"{len(messages)} trajectory message(s) of session {session!r}"
        params = (
            session,
            [ending_needs_work(m) for m in messages],
            [message_to_json(m) for m in messages],
        )
        fence = self._fence

        async def apply(conn: Connection) -> None:
            if fence is None:
                await conn.execute(_APPEND, params)
                return
            cursor = await conn.execute(_APPEND_FENCED, (*lease_row_params(fence), *params))
            refuse_unless_held(await cursor.fetchone(), fence, what)

        await self._access.write(apply, what)

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
