"""The messages to the user on PostgreSQL: one row per message, a delivery row per channel it went
to, one read state per message whichever channel saw it read; the same semantics as
:class:`wakeful.store.messages.SqliteMessages`.

Several workers may record deliveries and reads of one message at once: the read state is set by
an update that re-checks `read_at IS NULL` (so one of two readers sees the message newly read),
and a delivery is advanced under its row lock (so a late "sent" never moves a "read" back).

In a view fenced by a session's lease (``PostgresStore.fenced(lease)``), adding a message is a
write of that session: its agent tells the user something, so a worker that lost the lease must
not (the new owner may tell it again, or otherwise). Delivery reports and reads are not: they are
facts about the outside world that arrive through a channel on whichever worker runs it (a
Telegram webhook, the worker polling the mailbox), and a message sent must be recorded as sent
even by a worker that lost the lease meanwhile, or the new owner would send it a second time.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from functools import partial
from typing import Any, Final

from ...core.records import DeliveryState, MessageDelivery, OutboundMessage
from ...errors import UserError
from ..events import utc_key
from ..rows import (
    DELIVERY_COLUMNS,
    MESSAGE_COLUMNS,
    check_delivery_state,
    decode_message,
    decode_row,
    delivery_rows,
    delivery_update,
    message_page_filter,
    message_row,
)
from .access import Connection, PostgresAccess, insert_new
from .events import check_fenced_session
from .leases import Lease

__all__ = ["PostgresMessages"]

_INSERT_MESSAGE: Final = (
    "INSERT INTO messages (id, session, created_at, urgency, kind, body, read_at, read_on) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
)
_INSERT_DELIVERY: Final = (
    f"INSERT INTO message_deliveries ({DELIVERY_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
)
_ID_CONSTRAINT: Final = "messages_id_unique"
# The columns of a message and of its deliveries in one row (a message without deliveries has
# NULLs in the second part), for reading a page of messages in one query and one snapshot.
_JOINED_COLUMNS: Final = (
    MESSAGE_COLUMNS
    + ", "
    + ", ".join(f"d.{column.strip()}" for column in DELIVERY_COLUMNS.split(","))
)
_MESSAGE_WIDTH: Final = len(MESSAGE_COLUMNS.split(","))


def _now() -> str:
    return utc_key(datetime.now(UTC)) or ""


class PostgresMessages:
    """The :class:`~wakeful.core.repositories.MessageRepository` of a PostgreSQL store (or of a
    view of it fenced by `fence`: messages are added for the lease's session only, each addition
    checked against the lease)."""

    def __init__(self, access: PostgresAccess, fence: Lease | None = None) -> None:
        self._access = access
        self._fence = fence

    async def add(self, message: OutboundMessage) -> None:
        check_fenced_session(self._fence, [message.session], "messages")
        row, deliveries = message_row(message), delivery_rows(message)

        async def apply(conn: Connection) -> None:
            await insert_new(
                conn,
                _INSERT_MESSAGE,
                row,
                constraint=_ID_CONSTRAINT,
                taken=f"A message with the id {message.id} is stored already; give each message "
                "a new id (Outbox.send does).",
            )
            if deliveries:
                async with conn.cursor() as cursor:
                    await cursor.executemany(_INSERT_DELIVERY, deliveries)

        await self._access.write(apply, f"message {message.id}", fence=self._fence)

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

        async def apply(conn: Connection) -> None:
            # The message's row is locked first, as marking it read does: the reports of two
            # workers on one message are applied one after the other (each advancing the state
            # the other left), and a report of "read" cannot deadlock with a reader.
            cursor = await conn.execute(
                "SELECT id FROM messages WHERE id = %s FOR NO KEY UPDATE", (message_id,)
            )
            if await cursor.fetchone() is None:
                raise UserError(
                    f"No message {message_id} is stored, so its delivery on {channel} "
                    "cannot be recorded; store the message first (Outbox.send)."
                )
            await conn.execute(
                _INSERT_DELIVERY + " ON CONFLICT (message_id, channel) DO NOTHING",
                (message_id, channel, "queued", now, None, None, None, None),
            )
            cursor = await conn.execute(
                "SELECT state FROM message_deliveries WHERE message_id = %s AND channel = %s",
                (message_id, channel),
            )
            found = await cursor.fetchone()
            assert found is not None  # inserted above, and deliveries are never deleted
            await conn.execute(
                "UPDATE message_deliveries SET state = %s, updated_at = %s, "
                "sent_at = coalesce(sent_at, %s), read_at = coalesce(read_at, %s), "
                "channel_message_id = coalesce(%s, channel_message_id), "
                "error = coalesce(%s, error) WHERE message_id = %s AND channel = %s",
                (
                    *delivery_update(found[0], state, now, channel_message_id, error),
                    message_id,
                    channel,
                ),
            )
            if state == "read":
                await _mark_read(conn, [message_id], channel, now)

        await self._access.write(apply, f"the delivery of message {message_id} on {channel}")

    async def mark_read(self, ids: Iterable[str], *, channel: str) -> list[str]:
        wanted, now = list(dict.fromkeys(ids)), _now()

        async def apply(conn: Connection) -> list[str]:
            return await _mark_read(conn, wanted, channel, now)

        return await self._access.write(apply, f"{len(wanted)} message(s) read")

    async def mark_read_through(self, session: str, message_id: str, *, channel: str) -> list[str]:
        now = _now()

        async def apply(conn: Connection) -> list[str]:
            cursor = await conn.execute(
                "SELECT id FROM messages WHERE session = %s AND read_at IS NULL AND seq <= "
                "coalesce((SELECT seq FROM messages WHERE id = %s AND session = %s), -1) "
                "ORDER BY seq",
                (session, message_id, session),
            )
            ids = [found for (found,) in await cursor.fetchall()]
            # Another worker may mark some of them read meanwhile: only those still unread
            # when the update reaches them are returned, and deliveries only for those.
            return await _mark_read(conn, ids, channel, now, all_deliveries=False)

        return await self._access.write(apply, f"the messages of {session} read")

    async def get(self, message_id: str) -> OutboundMessage | None:
        found = await _read_messages(self._access, "m.id = %s", [message_id], 1)
        return found[0] if found else None

    async def all_by_channel_id(
        self, channel: str, channel_message_id: str
    ) -> list[OutboundMessage]:
        rows = await self._access.read(
            "SELECT d.message_id FROM message_deliveries d "
            "WHERE d.channel = %s AND d.channel_message_id = %s",
            (channel, channel_message_id),
        )
        if not rows:
            return []
        ids = [found for (found,) in rows]
        messages = await _read_messages(self._access, "m.id = ANY(%s)", [ids], len(ids))
        return messages[::-1]  # oldest first

    async def list(
        self,
        session: str | None = None,
        *,
        unread_only: bool = False,
        limit: int = 50,
        before: str | None = None,
    ) -> list[OutboundMessage]:
        where, params = message_page_filter(
            "%s", session=session, unread_only=unread_only, before=before
        )
        return await _read_messages(self._access, where, params, limit)

    async def unread_count(self, session: str | None = None) -> int:
        sql, params = "SELECT count(*) FROM messages WHERE read_at IS NULL", list[Any]()
        if session is not None:
            sql, params = sql + " AND session = %s", [session]
        rows = await self._access.read(sql, params)
        return int(rows[0][0])


async def _read_messages(
    access: PostgresAccess, where: str, params: Sequence[Any], limit: int
) -> list[OutboundMessage]:
    """The messages matching `where`, newest first, with their deliveries (one query)."""
    rows = await access.read(
        f"SELECT {_JOINED_COLUMNS} FROM "
        f"(SELECT * FROM messages m WHERE {where} ORDER BY m.seq DESC LIMIT %s) m "
        "LEFT JOIN message_deliveries d ON d.message_id = m.id ORDER BY m.seq DESC, d.seq",
        [*params, limit],
    )
    messages: dict[str, tuple[Any, ...]] = {}
    deliveries: dict[str, list[MessageDelivery]] = {}
    for row in rows:
        message, delivery = tuple(row[:_MESSAGE_WIDTH]), row[_MESSAGE_WIDTH:]
        messages.setdefault(message[0], message)
        if delivery[0] is not None:
            deliveries.setdefault(message[0], []).append(MessageDelivery(*delivery))
    return [
        decode_row(
            access.where,
            f"message {message_id}",
            partial(decode_message, row, tuple(deliveries.get(message_id, ()))),
        )
        for message_id, row in messages.items()
    ]


async def _mark_read(
    conn: Connection, ids: list[str], channel: str, now: str, *, all_deliveries: bool = True
) -> list[str]:
    """Mark the unread ones of `ids` read on `channel`; return them, in the order of `ids`.
    Where a message was seen is recorded on its delivery even when another channel saw it first
    (for every one of `ids`, or only the newly read ones without `all_deliveries`)."""
    if not ids:
        return []
    cursor = await conn.execute(
        "UPDATE messages SET read_at = %s, read_on = %s WHERE id = ANY(%s) AND read_at IS NULL "
        "RETURNING id",
        (now, channel, ids),
    )
    changed = {found for (found,) in await cursor.fetchall()}
    newly = [message_id for message_id in ids if message_id in changed]
    await conn.execute(
        "UPDATE message_deliveries SET state = 'read', read_at = coalesce(read_at, %s), "
        "updated_at = %s WHERE message_id = ANY(%s) AND channel = %s",
        (now, now, ids if all_deliveries else newly, channel),
    )
    return newly
