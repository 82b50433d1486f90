"""What the XMPP channel sends the user, and what comes back about it.

A stored message (:class:`~wakeful.core.records.OutboundMessage`) becomes one chat message: its
text byte for byte (a notification's title on the first line), a card as text with its buttons
numbered, attachments named with their size. Files are not uploaded (HTTP upload, XEP-0363, is
not used): each is named and the user finds it in the web console. Every copy asks for a
delivery receipt (XEP-0184) and is markable (XEP-0333), and its stanza id is the copy's id.

What comes back: a receipt or a `received` marker from the user's own account says the copy
reached their device; a `displayed` or `acknowledged` marker, or any message the user writes
after it, says they read it. The user's reply with a button's number answers the last card sent
to them (see :class:`UserConversation`). Receipts and markers from anyone else mark nothing, and
none of them becomes an event for the agent.
"""

from __future__ import annotations

import json
import logging
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final, Literal

from pydantic import ValidationError

from ...core.records import MessageAttachment, OutboundMessage
from ...errors import UserError
from ...toolkits.comms.cards import Card, card_text
from .inbound import CardAnswer, ReceivedMessage
from .settings import XmppChannelSettings, bare_jid

__all__ = [
    "MAX_BODY_BYTES",
    "ChatKind",
    "CopyReceipt",
    "UserConversation",
    "XmppUnsendable",
    "check_sendable",
    "human_size",
    "message_body",
    "receipts_in",
    "recipient",
]

log = logging.getLogger(__name__)

RECEIPTS_NS: Final = "urn:xmpp:receipts"
MARKERS_NS: Final = "urn:xmpp:chat-markers:0"
# Servers close the connection of a client whose stanza is over their limit (Prosody's default
# is 256 KiB), which would drop every message queued behind it: a longer text is refused.
MAX_BODY_BYTES: Final = 200_000
MAX_COPY_ID_CHARS: Final = 128
# The sessions whose last copy the user conversation remembers (the oldest are forgotten).
MAX_SESSIONS_KEPT: Final = 50
# Characters XML 1.0 cannot carry (control characters other than tab and newlines, lone
# surrogates, U+FFFE and U+FFFF): a stanza holding one is malformed, and the server closes the
# stream.
_NOT_XML: Final = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_CHOICE: Final = re.compile(r"\s*#?(\d{1,2})\.?\s*")

ChatKind = Literal["chat", "groupchat"]


class XmppUnsendable(UserError):
    """Raised by :meth:`XmppChannel.send_to_user` for a message XMPP cannot carry (a control
    character, a text over :data:`MAX_BODY_BYTES`); nothing was sent."""


@dataclass(frozen=True)
class CopyReceipt:
    """The user's client said a copy reached their device ("delivered") or was read."""

    copy_id: str
    state: Literal["delivered", "read"]


def recipient(
    settings: XmppChannelSettings, session: str, user_jid: str | None = None
) -> tuple[str, ChatKind]:
    """Where a message of `session` for the user goes: the session's room when it is one of the
    channel's rooms with `reply_in_room`, else the user's own account (`user_jid`, the address
    they last wrote from, when it is still one of theirs; else their first). A contact's
    conversation never gets it: a message for the user must not reach other people."""
    if settings.sessions == "per_conversation":
        conversation = session.removeprefix(settings.session + ":")
        for room in settings.rooms:
            if conversation != session and room.jid == conversation and room.reply_in_room:
                return room.jid, "groupchat"
    if user_jid is not None and user_jid in settings.user_jids:
        return user_jid, "chat"
    return settings.user_jids[0], "chat"


def message_body(message: OutboundMessage, *, answerable: bool) -> str:
    """The message as one chat message's text. `answerable`: the user can choose a card's
    button by replying with its number (in their own conversation; not in a room)."""
    if message.kind == "card" and message.card is not None:
        main = _card_body(message, answerable=answerable)
    elif message.kind == "notification" and message.title:
        main = f"{message.title}\n{message.text}"
    else:
        main = message.text
    if not message.attachments:
        return main
    files = "\n".join(attachment_line(attachment) for attachment in message.attachments)
    return f"{main}\n\n{files}"


def _card_body(message: OutboundMessage, *, answerable: bool) -> str:
    try:
        card = Card.model_validate(message.card)
    except ValidationError:
        return message.text  # a card stored under an older schema: its text as the tool made it
    # Its buttons are listed below with how to answer; its images travel as the attachments.
    shown = card.model_copy(
        update={"actions": [], "images": [] if message.attachments else card.images}
    )
    lines = [card_text(shown)]
    if card.actions and answerable:
        lines.append("Reply with a number to choose:")
        lines += [f"{number}. {action.label}" for number, action in enumerate(card.actions, 1)]
    elif card.actions:
        labels = " ".join(f"[{action.label}]" for action in card.actions)
        lines.append(f"Buttons (press them in the web console): {labels}")
    return "\n".join(lines)


def attachment_line(attachment: MessageAttachment) -> str:
    """A file named, not uploaded: "📎 report.pdf (1.2 MB) — in the web console"."""
    return f"📎 {attachment.name} ({human_size(attachment.size)}) — in the web console"


def human_size(size: int) -> str:
    """A size in bytes as people read it: "812 B", "14 KB", "1.2 MB"."""
    for unit, scale in (("GB", 10**9), ("MB", 10**6), ("KB", 10**3)):
        if size >= scale:
            value = size / scale
            return f"{value:.1f} {unit}" if value < 10 else f"{value:.0f} {unit}"
    return f"{size} B"


def check_sendable(body: str, *, message_id: str, channel: str) -> None:
    """Raise XmppUnsendable when XMPP cannot carry `body` as it is: the text goes byte for byte
    or not at all."""
    bad = _NOT_XML.search(body)
    if bad is not None:
        code = f"U+{ord(bad.group()):04X}"
        raise XmppUnsendable(
            f"The message {message_id} holds the character {code} (at character "
            f"{bad.start():,}), which XMPP (XML 1.0) cannot carry, so it was not sent on "
            f"{channel}. Texts go byte for byte: remove the control characters (terminal "
            "colour codes, for instance) and send it again."
        )
    size = len(body.encode("utf-8"))
    if size > MAX_BODY_BYTES:
        raise XmppUnsendable(
            f"The message {message_id} is {size:,} bytes, over the {MAX_BODY_BYTES:,} that "
            f"{channel} sends in one XMPP message (servers close the connection of a client "
            "whose message is over their limit), so it was not sent. Send a shorter text, or "
            "the long one as an attachment."
        )


def receipts_in(stanza: ET.Element, settings: XmppChannelSettings) -> list[CopyReceipt]:
    """The receipts and chat markers in a message stanza, when it is from the user's own
    account (as the server stamped it); none from anyone else, nor in a room or an error."""
    kind = stanza.get("type") or "normal"
    if kind not in ("chat", "normal") or bare_jid(stanza.get("from", "")) not in settings.user_jids:
        return []
    found: list[CopyReceipt] = []
    for tag, state in (
        (f"{{{RECEIPTS_NS}}}received", "delivered"),
        (f"{{{MARKERS_NS}}}received", "delivered"),
        (f"{{{MARKERS_NS}}}displayed", "read"),
        (f"{{{MARKERS_NS}}}acknowledged", "read"),
    ):
        element = stanza.find(tag)
        copy_id = element.get("id", "") if element is not None else ""
        if copy_id and len(copy_id) <= MAX_COPY_ID_CHARS:
            found.append(CopyReceipt(copy_id, "read" if state == "read" else "delivered"))
    return found


@dataclass(frozen=True)
class SentCopy:
    copy_id: str
    at: datetime


@dataclass(frozen=True)
class SentCard:
    """The last card with buttons sent to the user: its message id, session and buttons."""

    card_id: str
    session: str
    action_ids: tuple[str, ...]
    at: datetime


@dataclass
class UserConversation:
    """What the channel sent to the user's own account, to read what they write back: the last
    copy per session (a message from the user written after it says they read it), the last
    card with buttons (a reply with a button's number presses it, once), and the address they
    last wrote from (where the next message goes). Kept in the channel's cursors as JSON, so a
    restart forgets none of it."""

    jid: str | None = None
    copies: dict[str, SentCopy] = field(default_factory=dict)
    card: SentCard | None = None

    def sent(self, message: OutboundMessage, copy_id: str, at: datetime) -> None:
        """Note a copy of `message` sent to the user's account."""
        self.copies.pop(message.session, None)
        self.copies[message.session] = SentCopy(copy_id, at)
        while len(self.copies) > MAX_SESSIONS_KEPT:
            del self.copies[next(iter(self.copies))]
        actions = _action_ids(message)
        if actions:
            self.card = SentCard(message.id, message.session, actions, at)

    def user_wrote(self, message: ReceivedMessage) -> tuple[CardAnswer | None, list[str]]:
        """What a message from the user says: the card button it chooses (when it is a number
        of the last card's buttons, written after the card), and the copies it shows read (the
        last of each session sent before it was written)."""
        written = message.sent_at or message.received_at
        self.jid = bare_jid(message.sender)
        read = [session for session, copy in self.copies.items() if copy.at <= written]
        copies = [self.copies.pop(session).copy_id for session in read]
        answer = None
        choice = _CHOICE.fullmatch(message.body)
        card = self.card
        if choice is not None and card is not None and card.at <= written:
            number = int(choice.group(1))
            if 1 <= number <= len(card.action_ids):
                answer = CardAnswer(card.card_id, card.action_ids[number - 1], card.session)
                self.card = None
        return answer, copies

    def to_json(self) -> str:
        card = self.card
        return json.dumps(
            {
                "jid": self.jid,
                "copies": {s: [c.copy_id, c.at.isoformat()] for s, c in self.copies.items()},
                "card": None
                if card is None
                else [card.card_id, card.session, list(card.action_ids), card.at.isoformat()],
            }
        )

    @classmethod
    def from_json(cls, text: str | None) -> UserConversation:
        """The conversation kept as `text`; an empty one for None or what cannot be read."""
        if not text:
            return cls()
        try:
            data = json.loads(text)
            copies = {
                str(session): SentCopy(str(copy_id), datetime.fromisoformat(at))
                for session, (copy_id, at) in data["copies"].items()
            }
            card = None
            if data["card"] is not None:
                card_id, session, actions, at = data["card"]
                card = SentCard(
                    str(card_id), str(session), tuple(map(str, actions)), datetime.fromisoformat(at)
                )
            jid = data["jid"]
            return cls(jid=str(jid) if jid else None, copies=copies, card=card)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            log.warning("forgetting an unreadable record of the user's conversation: %r", exc)
            return cls()


def _action_ids(message: OutboundMessage) -> tuple[str, ...]:
    if message.kind != "card" or message.card is None:
        return ()
    try:
        return tuple(action.id for action in Card.model_validate(message.card).actions)
    except ValidationError:
        return ()
