"""The requests to a person on PostgreSQL: the open ones, how each ended and whether its session
has the outcome; the same semantics as :class:`wakeful.store.human_requests.SqliteHumanRequests`.

"The first ending wins" and "delivered once" hold across workers: each is one update that
re-checks its condition on the row it locks. A late answer is appended under the row's lock, so
two answers arriving at two workers at once are both kept.

In a view fenced by a session's lease (``PostgresStore.fenced(lease)``), opening a request and
marking its outcome delivered are writes of that session, checked against the lease: a worker
that lost the lease must not open requests for it, nor mark an outcome delivered that it can no
longer append to the session (the outcome would be lost to the new owner). Closing a request and
adding a late answer are not: a person's answer arrives through a channel on any worker (the web
console, a Telegram reply), and must never be refused because that worker does not own the
session; "the first ending wins" keeps a stale close from undoing one.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from functools import partial
from typing import Any, Final

from ...core.records import HumanRequestRecord, HumanRequestStatus, iso_utc
from ..rows import (
    HUMAN_REQUEST_COLUMNS,
    check_closing_status,
    decode_human_request,
    decode_late_answers,
    decode_row,
    human_request_row,
    late_answer,
)
from .access import Connection, PostgresAccess, insert_new
from .events import check_fenced_session
from .leases import Lease

__all__ = ["PostgresHumanRequests"]

_ID_CONSTRAINT: Final = "human_requests_pkey"


class PostgresHumanRequests:
    """The :class:`~wakeful.core.repositories.HumanRequestRepository` of a PostgreSQL store (or
    of a view of it fenced by `fence`, see the module docs for which writes it checks)."""

    def __init__(self, access: PostgresAccess, fence: Lease | None = None) -> None:
        self._access = access
        self._fence = fence

    async def add(self, record: HumanRequestRecord) -> None:
        check_fenced_session(self._fence, [record.session], "requests to a person")
        row = human_request_row(record)

        async def apply(conn: Connection) -> None:
            await insert_new(
                conn,
                f"INSERT INTO human_requests ({HUMAN_REQUEST_COLUMNS}) VALUES "
                "(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                row,
                constraint=_ID_CONSTRAINT,
                taken=f"A request to a person with the id {record.id.lower()} is stored already; "
                "give the new request another id.",
            )

        await self._access.write(apply, f"request {record.id}", fence=self._fence)

    async def close(
        self,
        request_id: str,
        status: HumanRequestStatus,
        decision: str,
        *,
        delivered: bool = False,
    ) -> bool:
        check_closing_status(request_id, status)
        now = iso_utc(datetime.now(UTC))

        async def apply(conn: Connection) -> bool:
            cursor = await conn.execute(
                "UPDATE human_requests SET status = %s, decision = %s, closed_at = %s, "
                "delivered = delivered OR %s WHERE id = %s AND status = 'open'",
                (status, decision, now, delivered, request_id.lower()),
            )
            return cursor.rowcount == 1

        return await self._access.write(apply, f"the end of request {request_id}")

    async def add_late(self, request_id: str, answer: str) -> bool:
        value = late_answer(request_id, answer)
        where = self._access.where

        async def apply(conn: Connection) -> bool:
            cursor = await conn.execute(
                "SELECT late FROM human_requests WHERE id = %s AND status <> 'open' FOR UPDATE",
                (request_id.lower(),),
            )
            found = await cursor.fetchone()
            if found is None:
                return False
            late = decode_row(
                where, f"request {request_id.lower()}", partial(decode_late_answers, found[0])
            )
            late.append(value)
            await conn.execute(
                "UPDATE human_requests SET late = %s WHERE id = %s",
                (json.dumps(late, ensure_ascii=False), request_id.lower()),
            )
            return True

        return await self._access.write(apply, f"a late answer to request {request_id}")

    async def mark_delivered(self, request_id: str) -> bool:
        fence = self._fence

        async def apply(conn: Connection) -> bool:
            if fence is not None:
                # Before anything changes, in the write's transaction: the request is the
                # lease's session's (a request stored nowhere is simply not marked).
                found = await conn.execute(
                    "SELECT session FROM human_requests WHERE id = %s", (request_id.lower(),)
                )
                row = await found.fetchone()
                if row is not None:
                    check_fenced_session(fence, [row[0]], "the outcome of requests to a person")
            cursor = await conn.execute(
                "UPDATE human_requests SET delivered = true WHERE id = %s AND NOT delivered",
                (request_id.lower(),),
            )
            return cursor.rowcount == 1

        return await self._access.write(
            apply, f"the outcome of request {request_id} delivered", fence=fence
        )

    async def get(self, request_id: str) -> HumanRequestRecord | None:
        found = await self._select("WHERE id = %s", (request_id.lower(),))
        return found[0] if found else None

    async def unsettled(self) -> list[HumanRequestRecord]:
        return await self._select("WHERE status = 'open' OR NOT delivered ORDER BY seq", ())

    async def recent(
        self, limit: int = 50, *, session: str | None = None
    ) -> list[HumanRequestRecord]:
        where, params = ("WHERE session = %s", (session,)) if session is not None else ("", ())
        return await self._select(f"{where} ORDER BY seq DESC LIMIT %s", (*params, limit))

    async def _select(self, where: str, params: tuple[Any, ...]) -> list[HumanRequestRecord]:
        rows = await self._access.read(
            f"SELECT {HUMAN_REQUEST_COLUMNS} FROM human_requests {where}", params
        )
        stored = self._access.where
        return [
            decode_row(stored, f"request {row[0]}", partial(decode_human_request, row))
            for row in rows
        ]
