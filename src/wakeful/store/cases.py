"""The cases table: the decisions people made on requests (see
:class:`~wakeful.core.repositories.CaseRepository`).

The reads are plain functions of a :class:`StoreReader`, so `wakeful cases` runs them on a
read-only view of the file while a runtime writes to it, and the repository runs the same ones on
the store's read side.
"""

from __future__ import annotations

import sqlite3
from functools import partial
from typing import Any

from ..core.records import CaseRecord
from .access import StoreAccess
from .reader import StoreReader
from .rows import CASE_COLUMNS, case_row, decode_case, decode_row

__all__ = ["SqliteCases", "read_case", "read_cases", "read_recent_cases"]


def _case(reader: StoreReader, row: Any) -> CaseRecord:
    return decode_row(reader.path, f"case {row[0]}", partial(decode_case, row))


def read_case(reader: StoreReader, number: int) -> CaseRecord | None:
    """The case numbered `number`, or None."""
    rows = reader.rows(f"SELECT {CASE_COLUMNS} FROM cases WHERE number = ?", (number,))
    return _case(reader, rows[0]) if rows else None


def read_recent_cases(
    reader: StoreReader, limit: int = 50, *, before: int | None = None
) -> list[CaseRecord]:
    """Up to `limit` cases, newest first (numbered below `before`, when given)."""
    where, params = ("WHERE number < ?", (before,)) if before is not None else ("", ())
    sql = f"SELECT {CASE_COLUMNS} FROM cases {where} ORDER BY number DESC LIMIT ?"
    return [_case(reader, row) for row in reader.rows(sql, (*params, limit))]


def read_cases(reader: StoreReader) -> list[CaseRecord]:
    """Every case, oldest first."""
    rows = reader.rows(f"SELECT {CASE_COLUMNS} FROM cases ORDER BY number")
    return [_case(reader, row) for row in rows]


class SqliteCases:
    """The :class:`~wakeful.core.repositories.CaseRepository` of a SQLite store."""

    def __init__(self, access: StoreAccess) -> None:
        self._access = access

    async def add(self, case: CaseRecord) -> CaseRecord:
        row = case_row(case)

        def apply(conn: sqlite3.Connection) -> int:
            cursor = conn.execute(
                "INSERT INTO cases (session, kind, tool, request, reasons, context, decision, "
                "reason, decided_at, timed_out, request_id, answer) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                row,
            )
            assert cursor.lastrowid is not None
            return cursor.lastrowid

        number = await self._access.write(apply, f"a case of session {case.session}")
        return case._replace(number=number)

    async def get(self, number: int) -> CaseRecord | None:
        reader = self._access.reader
        return await self._access.read(lambda: read_case(reader, number))

    async def recent(self, limit: int = 50, *, before: int | None = None) -> list[CaseRecord]:
        reader = self._access.reader
        return await self._access.read(lambda: read_recent_cases(reader, limit, before=before))

    async def all(self) -> list[CaseRecord]:
        reader = self._access.reader
        return await self._access.read(lambda: read_cases(reader))
