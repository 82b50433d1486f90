"""The channel tables: each channel's cursors (how far it has read its source), and the channels
the agent connected while running, reconnected on the next start."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from datetime import UTC, datetime
from functools import partial
from typing import Any, Final

from ..core.records import ConnectedChannel
from .access import StoreAccess
from .events import utc_key
from .rows import connected_channel_row

__all__ = ["SqliteChannelCursors", "SqliteConnectedChannels"]

_UPSERT_CURSOR: Final = (
    "INSERT INTO channel_cursors (channel, key, value, updated_at) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (channel, key) DO UPDATE SET value = excluded.value, "
    "updated_at = excluded.updated_at"
)
_UPSERT_CHANNEL: Final = (
    "INSERT INTO connected_channels (name, kind, settings, filter, connected_at) "
    "VALUES (?, ?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET kind = excluded.kind, "
    "settings = excluded.settings, filter = excluded.filter, connected_at = excluded.connected_at"
)


def _now() -> str:
    return utc_key(datetime.now(UTC)) or ""


class SqliteChannelCursors:
    """The :class:`~wakeful.core.repositories.ChannelCursorRepository` of a SQLite store."""

    def __init__(self, access: StoreAccess) -> None:
        self._access = access

    async def get(self, channel: str, key: str) -> str | None:
        reader = self._access.reader
        return await self._access.read(partial(reader.channel_cursor, channel, key))

    async def put(self, channel: str, key: str, value: str) -> None:
        await self.put_many(channel, {key: value})

    async def put_many(self, channel: str, values: Mapping[str, str]) -> None:
        """Store several cursors of one channel in one transaction (e.g. an IMAP mailbox's
        UIDVALIDITY with its last UID, which only make sense together)."""
        now = _now()
        rows = [(channel, key, value, now) for key, value in values.items()]

        def apply(conn: sqlite3.Connection) -> None:
            conn.executemany(_UPSERT_CURSOR, rows)

        # A plain write, not a kept one: on a full disk the cursor stays where it was, and the
        # channel re-reads a little after a restart, which the Inbox drops as duplicates.
        await self._access.write(apply, f"{len(rows)} cursor(s) of channel {channel}")

    async def forget(self, channel: str) -> None:
        """Drop every cursor of `channel` (it was disconnected for good)."""

        def apply(conn: sqlite3.Connection) -> None:
            conn.execute("DELETE FROM channel_cursors WHERE channel = ?", (channel,))

        await self._access.write(apply, f"the cursors of channel {channel}")


class SqliteConnectedChannels:
    """The channels the agent connected while running (`connect_channel`), by unique name."""

    def __init__(self, access: StoreAccess) -> None:
        self._access = access

    async def save(
        self, name: str, kind: str, settings: Mapping[str, Any], filter: Mapping[str, Any]
    ) -> None:
        """Store (or replace) the channel `name`, so the next start reconnects it."""
        row = connected_channel_row(name, kind, settings, filter, _now())

        def apply(conn: sqlite3.Connection) -> None:
            conn.execute(_UPSERT_CHANNEL, row)

        await self._access.write(apply, f"connected channel {name}")

    async def remove(self, name: str) -> bool:
        """Forget the channel `name`; say whether it was stored."""

        def apply(conn: sqlite3.Connection) -> bool:
            return (
                conn.execute("DELETE FROM connected_channels WHERE name = ?", (name,)).rowcount > 0
            )

        return await self._access.write(apply, f"connected channel {name}")

    async def all(self) -> list[ConnectedChannel]:
        return await self._access.read(self._access.reader.connected_channels)
