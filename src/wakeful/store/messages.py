"""The messages to the user: one row per message, a delivery row per channel it went to, and
one read state per message whichever channel saw it read."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from datetime import UTC, datetime
from functools import partial
from typing import Final

from ..core.records import DeliveryState, OutboundMessage
from ..errors import UserError
from .access import StoreAccess
from .events import utc_key
from .rows import (
    DELIVERY_COLUMNS,
    check_delivery_state,
    delivery_rows,
    delivery_update,
    message_row,
)

__all__ = ["SqliteMessages"]

_INSERT_MESSAGE: Final = (
    "INSERT INTO messages (id, session, created_at, urgency, kind, body, read_at, read_on) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
_INSERT_DELIVERY: Final = (
    f"INSERT INTO message_deliveries ({DELIVERY_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)


def _now() -> str:
    return utc_key(datetime.now(UTC)) or ""


class SqliteMessages:
    """The :class:`~wakeful.core.repositories.MessageRepository` of a SQLite store."""

    def __init__(self, access: StoreAccess) -> None:
        self._access = access

    async def add(self, message: OutboundMessage) -> None:
        row, deliveries = message_row(message), delivery_rows(message)

        def apply(conn: sqlite3.Connection) -> None:
            try:
                conn.execute(_INSERT_MESSAGE, row)
            except sqlite3.IntegrityError as exc:
                raise UserError(
                    f"A message with the id {message.id} is stored already; give each message "
                    "a new id (Outbox.send does)."
                ) from exc
            conn.executemany(_INSERT_DELIVERY, deliveries)

        # Kept: a message being sent is work under way (an operator alert about a full disk
        # must still go out), so a full disk holds the write instead of refusing it.
        await self._access.write_kept(apply, f"message {message.id}")

    async def record_delivery(
        self,
        message_id: str,
        channel: str,
        state: DeliveryState,
        *,
        channel_message_id: str | None = None,
        error: str | None = None,
    ) -> None:
        check_delivery_state(state)
        now = _now()

        def apply(conn: sqlite3.Connection) -> None:
            found = conn.execute(
                "SELECT state FROM message_deliveries WHERE message_id = ? AND channel = ?",
                (message_id, channel),
            ).fetchone()
            if found is None:
                if conn.execute("SELECT 1 FROM messages WHERE id = ?", (message_id,)).fetchone():
                    conn.execute(
                        _INSERT_DELIVERY,
                        (message_id, channel, "queued", now, None, None, None, None),
                    )
                    found = ("queued",)
                else:
                    raise UserError(
                        f"No message {message_id} is stored, so its delivery on {channel} "
                        "cannot be recorded; store the message first (Outbox.send)."
                    )
            conn.execute(
                "UPDATE message_deliveries SET state = ?, updated_at = ?, "
                "sent_at = coalesce(sent_at, ?), read_at = coalesce(read_at, ?), "
                "channel_message_id = coalesce(?, channel_message_id), "
                "error = coalesce(?, error) WHERE message_id = ? AND channel = ?",
                (
                    *delivery_update(found[0], state, now, channel_message_id, error),
                    message_id,
                    channel,
                ),
            )
            if state == "read":
                _mark_read(conn, [message_id], channel, now)

        await self._access.write_kept(apply, f"the delivery of message {message_id} on {channel}")

    async def mark_read(self, ids: Iterable[str], *, channel: str) -> list[str]:
        wanted, now = list(dict.fromkeys(ids)), _now()
        newly: list[str] = []

        def apply(conn: sqlite3.Connection) -> None:
            newly.extend(_mark_read(conn, wanted, channel, now))

        # Kept: the user has read them, whatever the disk says; a write held for a full disk
        # is applied later, and this returns [] meanwhile.
        await self._access.write_kept(apply, f"{len(wanted)} message(s) read")
        return newly

    async def mark_read_through(self, session: str, message_id: str, *, channel: str) -> list[str]:
        now = _now()

        def apply(conn: sqlite3.Connection) -> list[str]:
            ids = [
                row[0]
                for row in conn.execute(
                    "SELECT id FROM messages WHERE session = ? AND read_at IS NULL AND seq <= "
                    "coalesce((SELECT seq FROM messages WHERE id = ? AND session = ?), -1) "
                    "ORDER BY seq",
                    (session, message_id, session),
                )
            ]
            return _mark_read(conn, ids, channel, now)

        return await self._access.write(apply, f"the messages of {session} read")

    async def get(self, message_id: str) -> OutboundMessage | None:
        reader = self._access.reader
        return await self._access.read(partial(reader.user_message, message_id))

    async def all_by_channel_id(
        self, channel: str, channel_message_id: str
    ) -> list[OutboundMessage]:
        reader = self._access.reader
        return await self._access.read(
            partial(reader.user_messages_by_channel_id, channel, channel_message_id)
        )

    async def list(
        self,
        session: str | None = None,
        *,
        unread_only: bool = False,
        limit: int = 50,
        before: str | None = None,
    ) -> list[OutboundMessage]:
        reader = self._access.reader
        return await self._access.read(
            partial(
                reader.user_messages, session, unread_only=unread_only, limit=limit, before=before
            )
        )

    async def unread_count(self, session: str | None = None) -> int:
        reader = self._access.reader
        return await self._access.read(partial(reader.unread_message_count, session))


def _mark_read(conn: sqlite3.Connection, ids: list[str], channel: str, now: str) -> list[str]:
    """Mark the unread ones of `ids` read on `channel`; return them."""
    newly = []
    for message_id in ids:
        changed = conn.execute(
            "UPDATE messages SET read_at = ?, read_on = ? WHERE id = ? AND read_at IS NULL",
            (now, channel, message_id),
        ).rowcount
        if changed:
            newly.append(message_id)
        # Where the message was seen is recorded even when another channel saw it first.
        conn.execute(
            "UPDATE message_deliveries SET state = 'read', read_at = coalesce(read_at, ?), "
            "updated_at = ? WHERE message_id = ? AND channel = ?",
            (now, now, message_id, channel),
        )
    return newly
