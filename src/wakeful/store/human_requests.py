"""The human_requests table: the requests to a person, how each ended and whether its session has
the outcome (see :class:`~wakeful.core.repositories.HumanRequestRepository`)."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from functools import partial
from typing import Any

from ..core.records import HumanRequestRecord, HumanRequestStatus, iso_utc
from ..errors import UserError
from .access import StoreAccess
from .rows import (
    HUMAN_REQUEST_COLUMNS,
    check_closing_status,
    decode_human_request,
    decode_late_answers,
    decode_row,
    human_request_row,
    late_answer,
)

__all__ = ["SqliteHumanRequests"]


class SqliteHumanRequests:
    """The :class:`~wakeful.core.repositories.HumanRequestRepository` of a SQLite store."""

    def __init__(self, access: StoreAccess) -> None:
        self._access = access

    async def add(self, record: HumanRequestRecord) -> None:
        row = human_request_row(record)

        def apply(conn: sqlite3.Connection) -> None:
            try:
                conn.execute(
                    f"INSERT INTO human_requests ({HUMAN_REQUEST_COLUMNS}) VALUES "
                    "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    row,
                )
            except sqlite3.IntegrityError as exc:
                raise UserError(
                    f"A request to a person with the id {record.id.lower()} is stored already; "
                    "give the new request another id."
                ) from exc

        await self._access.write(apply, f"request {record.id}")

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

        def apply(conn: sqlite3.Connection) -> bool:
            cursor = conn.execute(
                "UPDATE human_requests SET status = ?, decision = ?, closed_at = ?, "
                "delivered = max(delivered, ?) WHERE id = ? AND status = 'open'",
                (status, decision, now, int(delivered), request_id.lower()),
            )
            return cursor.rowcount == 1

        return await self._access.write(apply, f"the end of request {request_id}")

    async def add_late(self, request_id: str, answer: str) -> bool:
        value = late_answer(request_id, answer)

        path = self._access.path

        def apply(conn: sqlite3.Connection) -> bool:
            found = conn.execute(
                "SELECT late FROM human_requests WHERE id = ? AND status != 'open'",
                (request_id.lower(),),
            ).fetchone()
            if found is None:
                return False
            late = decode_row(
                path, f"request {request_id.lower()}", partial(decode_late_answers, found[0])
            )
            late.append(value)
            conn.execute(
                "UPDATE human_requests SET late = ? WHERE id = ?",
                (json.dumps(late, ensure_ascii=False), request_id.lower()),
            )
            return True

        return await self._access.write(apply, f"a late answer to request {request_id}")

    async def mark_delivered(self, request_id: str) -> bool:
        def apply(conn: sqlite3.Connection) -> bool:
            cursor = conn.execute(
                "UPDATE human_requests SET delivered = 1 WHERE id = ? AND delivered = 0",
                (request_id.lower(),),
            )
            return cursor.rowcount == 1

        return await self._access.write(apply, f"the outcome of request {request_id} delivered")

    async def get(self, request_id: str) -> HumanRequestRecord | None:
        rows = await self._select("WHERE id = ?", (request_id.lower(),))
        return rows[0] if rows else None

    async def unsettled(self) -> list[HumanRequestRecord]:
        return await self._select("WHERE status = 'open' OR delivered = 0 ORDER BY seq", ())

    async def recent(
        self, limit: int = 50, *, session: str | None = None
    ) -> list[HumanRequestRecord]:
        if session is None:
            return await self._select("ORDER BY seq DESC LIMIT ?", (limit,))
        return await self._select("WHERE session = ? ORDER BY seq DESC LIMIT ?", (session, limit))

    async def _select(self, where: str, params: tuple[Any, ...]) -> list[HumanRequestRecord]:
        reader = self._access.reader
        sql = f"SELECT {HUMAN_REQUEST_COLUMNS} FROM human_requests {where}"

        def read() -> list[HumanRequestRecord]:
            return [
                decode_row(reader.path, f"request {row[0]}", partial(decode_human_request, row))
                for row in reader.rows(sql, params)
            ]

        return await self._access.read(read)
