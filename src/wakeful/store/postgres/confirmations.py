"""The confirmations table on PostgreSQL: confirmation tokens, each used at most once; the same
semantics as :class:`wakeful.store.confirmations.SqliteConfirmations`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from ...core.records import StoredConfirmation
from ..events import utc_key
from ..rows import CONFIRMATION_COLUMNS, confirmation_row, decode_confirmation, decode_row
from .access import Connection, PostgresAccess

__all__ = ["PostgresConfirmations"]


class PostgresConfirmations:
    """The :class:`~wakeful.core.repositories.ConfirmationRepository` of a PostgreSQL store.

    :meth:`use` locks the token's row (``SELECT … FOR UPDATE``) before its check, so a token
    redeemed at once by two workers is checked by the second only after the first's mark is
    committed: it is used once.
    """

    def __init__(self, access: PostgresAccess) -> None:
        self._access = access

    async def add(self, entry: StoredConfirmation) -> None:
        row = confirmation_row(entry)

        async def apply(conn: Connection) -> None:
            await conn.execute(
                "INSERT INTO confirmations (token, tool, arguments_hash, field_hashes, preview, "
                "issued_at, expires_at, state) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                row,
            )

        await self._access.write(apply, f"a confirmation token of {entry.tool}")

    async def use(
        self,
        token: str,
        check: Callable[[StoredConfirmation | None], None],
        used_at: datetime,
    ) -> None:
        where = self._access.where

        async def apply(conn: Connection) -> None:
            cursor = await conn.execute(
                f"SELECT {CONFIRMATION_COLUMNS} FROM confirmations WHERE token = %s FOR UPDATE",
                (token,),
            )
            found = await cursor.fetchone()
            # A refusal raised by `check` rolls this write back and reaches the caller.
            check(_confirmation(where, found) if found is not None else None)
            await conn.execute(
                "UPDATE confirmations SET state = 'used', used_at = %s WHERE token = %s",
                (used_at.astimezone(UTC), token),
            )

        await self._access.write(apply, "the use of a confirmation token")

    async def fail(self, token: str, error: str) -> bool:
        async def apply(conn: Connection) -> bool:
            cursor = await conn.execute(
                "UPDATE confirmations SET state = 'failed', error = %s WHERE token = %s",
                (error, token),
            )
            return cursor.rowcount > 0

        return await self._access.write(apply, "the failure of a confirmed action")

    async def get(self, token: str) -> StoredConfirmation | None:
        rows = await self._access.read(
            f"SELECT {CONFIRMATION_COLUMNS} FROM confirmations WHERE token = %s", (token,)
        )
        return _confirmation(self._access.where, rows[0]) if rows else None


def _confirmation(where: str, row: Sequence[Any]) -> StoredConfirmation:
    *issued, used_at, error = row
    text_row = (*issued, utc_key(used_at), error)
    return decode_row(
        where, f"confirmation token of {row[1]}", lambda: decode_confirmation(text_row)
    )
