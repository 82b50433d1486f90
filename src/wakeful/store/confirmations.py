"""The confirmations table: confirmation tokens, each used at most once."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import datetime
from functools import partial

from ..core.records import StoredConfirmation
from .access import StoreAccess
from .events import utc_key
from .reader import confirmation_from_row
from .rows import CONFIRMATION_COLUMNS, confirmation_row

__all__ = ["SqliteConfirmations"]


class SqliteConfirmations:
    """The :class:`~wakeful.core.repositories.ConfirmationRepository` of a SQLite store."""

    def __init__(self, access: StoreAccess) -> None:
        self._access = access

    async def add(self, entry: StoredConfirmation) -> None:
        row = confirmation_row(entry)

        def apply(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO confirmations (token, tool, arguments_hash, field_hashes, preview, "
                "issued_at, expires_at, state) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                row,
            )

        await self._access.write(apply, f"a confirmation token of {entry.tool}")

    async def use(
        self,
        token: str,
        check: Callable[[StoredConfirmation | None], None],
        used_at: datetime,
    ) -> None:
        path = self._access.path

        def apply(conn: sqlite3.Connection) -> None:
            found = conn.execute(
                f"SELECT {CONFIRMATION_COLUMNS} FROM confirmations WHERE token = ?", (token,)
            ).fetchone()
            check(confirmation_from_row(path, found) if found is not None else None)
            conn.execute(
                "UPDATE confirmations SET state = 'used', used_at = ? WHERE token = ?",
                (utc_key(used_at), token),
            )

        await self._access.write(apply, "the use of a confirmation token")

    async def fail(self, token: str, error: str) -> bool:
        def apply(conn: sqlite3.Connection) -> bool:
            cursor = conn.execute(
                "UPDATE confirmations SET state = 'failed', error = ? WHERE token = ?",
                (error, token),
            )
            return cursor.rowcount > 0

        return await self._access.write(apply, "the failure of a confirmed action")

    async def get(self, token: str) -> StoredConfirmation | None:
        return await self._access.read(partial(self._access.reader.confirmation, token))
