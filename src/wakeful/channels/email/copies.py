"""The copies the email channel sent to the user, kept beside its cursors in the store.

They tell the channel's own copy, arriving in the mailbox it watches when the user's address is
that mailbox, from everything else: a mail is the channel's copy only when its Message-ID is one
the channel made and recorded *before* sending (and its `X-Wakeful-Message` header, unless a mail
system stripped it, names the same message), so a stranger writing that header is still an
ordinary mail. A copy seen in the mailbox keeps its
UID, so the channel can notice when the user reads it there (the `\\Seen` flag); a card's copy
keeps its session and buttons, so the user's reply naming a button is that button's press.

Only the latest `TRACKED_COPIES` copies of the last `TRACKED_DAYS` days are kept: enough for the
loop guard (a copy arrives in seconds) and for read state, cheap to check on every sync.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Final

import anyio

from ...core.repositories import ChannelCursorRepository

__all__ = ["TRACKED_COPIES", "TRACKED_DAYS", "SentCopies", "SentCopy"]

TRACKED_COPIES: Final = 200
TRACKED_DAYS: Final = 14
COPIES_KEY: Final = "sent_copies"


@dataclass(frozen=True)
class SentCopy:
    """One mail sent to the user: its Message-ID (the copy id the outbox keeps), the message it
    carries (`msg_…`), when it was sent, where it landed in the watched mailbox (None until the
    channel sees it there), whether the user's reading of it has been reported, and for a card
    its session and its buttons as (action id, label)."""

    copy_id: str
    message_id: str
    sent_at: str
    uid: int | None = None
    uidvalidity: int | None = None
    read: bool = False
    session: str = ""
    actions: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SentCopy:
        return cls(
            copy_id=str(data["copy_id"]),
            message_id=str(data["message_id"]),
            sent_at=str(data["sent_at"]),
            uid=None if data.get("uid") is None else int(data["uid"]),
            uidvalidity=None if data.get("uidvalidity") is None else int(data["uidvalidity"]),
            read=bool(data.get("read", False)),
            session=str(data.get("session", "")),
            actions=tuple((str(i), str(label)) for i, label in data.get("actions", ())),
        )

    def choice(self, reply: str) -> str | None:
        """The id of the button a reply to this card names on its first line of its own (not
        quoted): a button's label or id, or its number, in any case, a final period or
        exclamation mark aside; None when the reply names none (it is an ordinary answer)."""
        said = _first_own_line(reply).rstrip(".!").strip().casefold()
        if not said:
            return None
        for number, (action_id, label) in enumerate(self.actions, start=1):
            if said in (action_id.casefold(), label.casefold(), str(number)):
                return action_id
        return None


class SentCopies:
    """The channel's record of its copies (see the module docs); one per channel, the only
    writer of its key, so it keeps the list in memory and writes it through."""

    def __init__(self, cursors: ChannelCursorRepository, channel: str) -> None:
        self._cursors = cursors
        self._channel = channel
        self._copies: list[SentCopy] | None = None
        self._lock = anyio.Lock()

    async def add(
        self,
        copy_id: str,
        message_id: str,
        *,
        session: str = "",
        actions: tuple[tuple[str, str], ...] = (),
    ) -> None:
        """Record a copy about to be sent (before it is, so that it cannot arrive unrecognised)."""
        now = datetime.now(UTC).isoformat()
        copy = SentCopy(copy_id, message_id, now, session=session, actions=actions)
        async with self._lock:
            copies = [c for c in await self._load() if c.copy_id != copy_id]
            await self._save([*copies, copy])

    async def own_copy(self, copy_id: str | None, claimed: str | None) -> SentCopy | None:
        """The copy whose Message-ID is `copy_id`, unless its X-Wakeful-Message header
        (`claimed`, None when a mail system stripped it) names another message; None for any
        other mail."""
        if not copy_id:
            return None
        found = await self.find(copy_id)
        if found is None or (claimed is not None and claimed.strip() != found.message_id):
            return None
        return found

    async def find(self, copy_id: str) -> SentCopy | None:
        for copy in await self._load():
            if copy.copy_id == copy_id:
                return copy
        return None

    async def placed(self, copy_id: str, uid: int, uidvalidity: int) -> None:
        """The copy was seen in the watched mailbox at `uid`."""
        await self._update({copy_id}, uid=uid, uidvalidity=uidvalidity)

    async def mark_read(self, copy_ids: set[str]) -> None:
        """The user's reading of these copies is reported (or was shown on them)."""
        await self._update(copy_ids, read=True)

    async def lost(self, copy_ids: set[str]) -> None:
        """These copies left the mailbox (deleted, moved): their flags are no longer watched."""
        await self._update(copy_ids, uid=None, uidvalidity=None)

    async def watched(self, uidvalidity: int) -> list[SentCopy]:
        """The unread copies in the mailbox (as it is now, by its UIDVALIDITY): those whose
        `\\Seen` flag the channel checks."""
        oldest = _oldest_kept()
        return [
            copy
            for copy in await self._load()
            if not copy.read
            and copy.uid is not None
            and copy.uidvalidity == uidvalidity
            and copy.sent_at >= oldest
        ]

    async def _update(self, copy_ids: set[str], **changes: Any) -> None:
        async with self._lock:
            copies = await self._load()
            updated = [replace(c, **changes) if c.copy_id in copy_ids else c for c in copies]
            if updated != copies:
                await self._save(updated)

    async def _load(self) -> list[SentCopy]:
        if self._copies is None:
            stored = await self._cursors.get(self._channel, COPIES_KEY)
            self._copies = [SentCopy.from_json(item) for item in json.loads(stored or "[]")]
        return list(self._copies)

    async def _save(self, copies: list[SentCopy]) -> None:
        oldest = _oldest_kept()
        kept = [c for c in copies if c.sent_at >= oldest][-TRACKED_COPIES:]
        value = json.dumps([asdict(c) for c in kept])
        await self._cursors.put(self._channel, COPIES_KEY, value)
        self._copies = kept


def _oldest_kept() -> str:
    """The send time (ISO, UTC) before which copies are no longer tracked."""
    return (datetime.now(UTC) - timedelta(days=TRACKED_DAYS)).isoformat()


def _first_own_line(text: str) -> str:
    """The first non-empty line of a reply that does not quote the mail answered."""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith(">"):
            return stripped
    return ""
