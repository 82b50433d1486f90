"""The user's mail conversations with the agent, kept beside the email channel's cursors: per
session, the latest mail the user wrote into it (from one of their own addresses, authenticated).

A message to the user in that session is the answer in that conversation
(:class:`wakeful.core.channel.UserReach`): it goes to the address the user wrote from, threaded
under their mail (In-Reply-To, References) with its subject, as a person answering would. A
session the user never wrote to by mail has none, and its messages go to `notify_address`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from typing import Final

from ...core.repositories import ChannelCursorRepository

__all__ = ["Conversation", "Conversations"]

KEY_PREFIX: Final = "conversation:"
REPLY_PREFIX: Final = "re:"


@dataclass(frozen=True)
class Conversation:
    """The user's latest mail in a session: its Message-ID, its thread's first Message-ID, its
    subject and the address it came from."""

    message_id: str
    thread_id: str
    subject: str
    address: str

    @property
    def references(self) -> str:
        """The References header of an answer: the thread's first mail and this one."""
        ids = dict.fromkeys([self.thread_id, self.message_id])
        return " ".join(i for i in ids if i.startswith("<"))

    @property
    def reply_subject(self) -> str:
        subject = self.subject.strip()
        if subject.lower().startswith(REPLY_PREFIX):
            return subject
        return f"Re: {subject}" if subject else "Re: your mail"


class Conversations:
    """Where the channel records and finds the user's conversations (see the module docs)."""

    def __init__(self, cursors: ChannelCursorRepository, channel: str) -> None:
        self._cursors = cursors
        self._channel = channel

    async def record(self, session: str, conversation: Conversation) -> None:
        value = json.dumps(asdict(conversation), ensure_ascii=False)
        await self._cursors.put(self._channel, _key(session), value)

    async def latest(self, session: str) -> Conversation | None:
        stored = await self._cursors.get(self._channel, _key(session))
        if not stored:
            return None
        data = json.loads(stored)
        return Conversation(
            message_id=str(data["message_id"]),
            thread_id=str(data["thread_id"]),
            subject=str(data["subject"]),
            address=str(data["address"]),
        )


def _key(session: str) -> str:
    return KEY_PREFIX + hashlib.sha256(session.encode()).hexdigest()[:16]
