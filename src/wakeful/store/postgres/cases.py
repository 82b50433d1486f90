"""The cases table on PostgreSQL: the decisions people made on requests, numbered by the store
("case 12"); the same semantics as :class:`wakeful.store.cases.SqliteCases`.

Numbers come from an identity column, so workers adding cases at once never get the same one; a
write that failed leaves its number unused (a gap), where SQLite would hand it out again.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from ...core.records import CaseRecord
from ..rows import CASE_COLUMNS, case_row, decode_case, decode_row
from .access import Connection, PostgresAccess

__all__ = ["PostgresCases"]


class PostgresCases:
    """The :class:`~wakeful.core.repositories.CaseRepository` of a PostgreSQL store."""

    def __init__(self, access: PostgresAccess) -> None:
        self._access = access

    async def add(self, case: CaseRecord) -> CaseRecord:
        row = case_row(case)

        async def apply(conn: Connection) -> int:
            cursor = await conn.execute(
                "INSERT INTO cases (session, kind, tool, request, reasons, context, decision, "
                "reason, decided_at, timed_out, request_id, answer) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING number",
                row,
            )
            found = await cursor.fetchone()
            assert found is not None
            return int(found[0])

        number = await self._access.write(apply, f"a case of session {case.session}")
        return case._replace(number=number)

    async def get(self, number: int) -> CaseRecord | None:
        found = await self._select("WHERE number = %s", (number,))
        return found[0] if found else None

    async def recent(self, limit: int = 50, *, before: int | None = None) -> list[CaseRecord]:
        where, params = ("WHERE number < %s", (before,)) if before is not None else ("", ())
        return await self._select(f"{where} ORDER BY number DESC LIMIT %s", (*params, limit))

    async def all(self) -> list[CaseRecord]:
        return await self._select("ORDER BY number", ())

    async def _select(self, where: str, params: tuple[Any, ...]) -> list[CaseRecord]:
        rows = await self._access.read(f"SELECT {CASE_COLUMNS} FROM cases {where}", params)
        stored = self._access.where
        return [decode_row(stored, f"case {row[0]}", partial(decode_case, row)) for row in rows]
