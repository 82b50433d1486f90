"""The channel tables on PostgreSQL: each channel's cursors (how far it has read its source), and
the channels the agent connected while running, reconnected on the next start; the same semantics
as :mod:`wakeful.store.channel_cursors`.

The cursors of a channel that pulls are written by the one worker holding its role, through the
view :meth:`PostgresChannelCursors.held_by` gives: each write checks that role lease in its own
transaction (:func:`.roles.check_role`), so a holder whose lease expired (it froze, or lost the
database) writes nothing, even when its own clock has not noticed yet."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from functools import partial
from typing import Any, Final

from ...core.channel import RoleLease
from ...core.records import ConnectedChannel
from ..events import utc_key
from ..rows import connected_channel_row, decode_connected_channel, decode_row
from .access import Connection, PostgresAccess
from .roles import check_role

__all__ = ["PostgresChannelCursors", "PostgresConnectedChannels"]

_UPSERT_CURSOR: Final = (
    "INSERT INTO channel_cursors (channel, key, value, updated_at) VALUES (%s, %s, %s, %s) "
    "ON CONFLICT (channel, key) DO UPDATE SET value = excluded.value, "
    "updated_at = excluded.updated_at"
)
_UPSERT_CHANNEL: Final = (
    "INSERT INTO connected_channels (name, kind, settings, filter, connected_at) "
    "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (name) DO UPDATE SET kind = excluded.kind, "
    "settings = excluded.settings, filter = excluded.filter, connected_at = excluded.connected_at"
)


class PostgresChannelCursors:
    """The :class:`~wakeful.core.repositories.ChannelCursorRepository` of a PostgreSQL store
    (or of a view whose writes are fenced by the role lease `role`: see the module docs); a
    :class:`~wakeful.core.channel.RoleFencedCursors`."""

    def __init__(self, access: PostgresAccess, role: RoleLease | None = None) -> None:
        self._access = access
        self._role = role

    def held_by(self, lease: RoleLease) -> PostgresChannelCursors:
        """The view whose writes are refused (:class:`~wakeful.core.channel.RoleLost`, nothing
        written) unless `lease` still holds its role when the write's transaction runs."""
        return PostgresChannelCursors(self._access, lease)

    async def get(self, channel: str, key: str) -> str | None:
        rows = await self._access.read(
            "SELECT value FROM channel_cursors WHERE channel = %s AND key = %s", (channel, key)
        )
        return str(rows[0][0]) if rows else None

    async def put(self, channel: str, key: str, value: str) -> None:
        await self.put_many(channel, {key: value})

    async def put_many(self, channel: str, values: Mapping[str, str]) -> None:
        """Store several cursors of one channel in one transaction (e.g. an IMAP mailbox's
        UIDVALIDITY with its last UID, which only make sense together)."""
        now = datetime.now(UTC)
        rows = [(channel, key, value, now) for key, value in values.items()]

        what = f"{len(rows)} cursor(s) of channel {channel}"
        role = self._role

        async def apply(conn: Connection) -> None:
            if role is not None:
                await check_role(conn, role, what)
            async with conn.cursor() as cursor:
                await cursor.executemany(_UPSERT_CURSOR, rows)

        await self._access.write(apply, what)

    async def forget(self, channel: str) -> None:
        """Drop every cursor of `channel` (it was disconnected for good)."""

        async def apply(conn: Connection) -> None:
            await conn.execute("DELETE FROM channel_cursors WHERE channel = %s", (channel,))

        await self._access.write(apply, f"the cursors of channel {channel}")


class PostgresConnectedChannels:
    """The channels the agent connected while running (`connect_channel`), by unique name."""

    def __init__(self, access: PostgresAccess) -> None:
        self._access = access

    async def save(
        self, name: str, kind: str, settings: Mapping[str, Any], filter: Mapping[str, Any]
    ) -> None:
        """Store (or replace) the channel `name`, so the next start reconnects it."""
        row = connected_channel_row(name, kind, settings, filter, datetime.now(UTC))

        async def apply(conn: Connection) -> None:
            await conn.execute(_UPSERT_CHANNEL, row)

        await self._access.write(apply, f"connected channel {name}")

    async def remove(self, name: str) -> bool:
        """Forget the channel `name`; say whether it was stored."""

        async def apply(conn: Connection) -> bool:
            cursor = await conn.execute("DELETE FROM connected_channels WHERE name = %s", (name,))
            return cursor.rowcount > 0

        return await self._access.write(apply, f"connected channel {name}")

    async def all(self) -> list[ConnectedChannel]:
        """The channels in the order they were connected."""
        rows = await self._access.read(
            "SELECT name, kind, settings, filter, connected_at FROM connected_channels "
            "ORDER BY connected_at, name"
        )
        where = self._access.where
        return [
            decode_row(
                where,
                f"connected channel {name}",
                partial(decode_connected_channel, name, kind, settings, filter_, utc_key(at)),
            )
            for name, kind, settings, filter_, at in rows
        ]
