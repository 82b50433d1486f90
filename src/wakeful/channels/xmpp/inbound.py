"""What an incoming XMPP message becomes: an event for the user's session when the user wrote
it, an `im.message` from a contact or a stranger otherwise. The user's reply with a number to
the last card the channel sent them (see :mod:`.outbound`) is the press of that button, a
`user.action` event like the web console's.

Who wrote a message is decided by the sender's bare JID as the server stamped it, compared
exactly with the user's accounts: a resource ("mallory@example.org/alice@example.org"), a nick
in a room, a nickname element or a forwarded copy inside the message never make anyone the
user, and a room's messages are never the user's input, whoever the room says spoke.

Each event's id comes from the message (see :func:`message_source_id`), so a redelivery (offline
storage, an archive replayed after a reconnect, a room's history on join) is the same event and
the Inbox drops it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from ...core.channel import source_event_id
from ...events import IM_MESSAGE, USER_ACTION, USER_INPUT, Event, Source, utc_now
from .settings import XmppChannelSettings, bare_jid

__all__ = [
    "CardAnswer",
    "MessageType",
    "ReceivedMessage",
    "Relation",
    "contact_matcher",
    "full_text_path",
    "message_event",
    "message_source_id",
]

MessageType = Literal["chat", "normal", "groupchat", "headline"]
Relation = Literal["user", "contact", "stranger"]


@dataclass(frozen=True)
class CardAnswer:
    """A button of a card the user chose by replying with its number: the card (the id of the
    message that carried it), the button, and the session that sent the card."""

    card_id: str
    action_id: str
    session: str


@dataclass(frozen=True)
class ReceivedMessage:
    """The parts of a received message stanza the channel reads."""

    sender: str
    """The full JID the server stamped in `from` (for a room: "room@service/nick")."""

    type: MessageType
    body: str
    message_id: str = ""
    """The sender's `id` attribute ("" when it gave none)."""

    stanza_id: str | None = None
    """The XEP-0359 stanza-id the archiving entity (our server, or the room) stamped, only when
    it is by the entity we trust for this message."""

    origin_id: str | None = None
    """The sender's XEP-0359 origin-id."""

    sent_at: datetime | None = None
    """When it was sent, from a XEP-0203 delay (an offline or history message)."""

    thread: str | None = None
    occupant_jid: str | None = None
    """A room occupant's real JID, as the room told us (non-anonymous rooms)."""

    on_roster: bool = False
    """Whether the sender (a room occupant's real JID) was on the account's roster on receipt."""

    received_at: datetime = field(default_factory=utc_now)
    """When the channel received it (not when it was sent)."""

    answer: CardAnswer | None = None
    """The card button the user's message chose, when it answers the last card sent to them."""

    receipt_requested: bool = False
    """Whether the sender asked for a delivery receipt (XEP-0184)."""


def message_source_id(message: ReceivedMessage) -> str:
    """The message's identity for :func:`source_event_id`: the sender's XEP-0359 origin-id
    (the same when the sender's client resends it and when the server redelivers it), else the
    stanza-id our server or the room stamped (the same on every redelivery from the archive or
    offline storage), else a hash of its sender, id and body. Always scoped by the sender's bare
    JID (a room occupant's full one), so that one sender can never make another's message look
    like a redelivery."""
    sender = bare_jid(message.sender) if message.type != "groupchat" else message.sender.lower()
    if message.origin_id:
        return f"{sender}\0origin-id\0{message.origin_id}"
    if message.stanza_id:
        return f"{sender}\0stanza-id\0{message.stanza_id}"
    digest = hashlib.sha256(
        f"{message.sender}\0{message.message_id}\0{message.body}".encode()
    ).hexdigest()
    return f"{sender}\0hash\0{digest}"


def full_text_path(workspace: Path, event_id: str) -> Path:
    """Where the whole text of a message too long for its event is saved."""
    return workspace / ".wakeful" / "im" / f"{event_id}.txt"


def message_event(
    message: ReceivedMessage,
    *,
    channel: str,
    settings: XmppChannelSettings,
    is_contact: Callable[[str], bool],
    workspace: Path,
) -> tuple[Event, str | None]:
    """The event for `message`, and the whole text to save at the event's
    :func:`full_text_path` when it was cut (else None). `is_contact(bare_jid)` says whether
    someone is on the account's roster or in the settings' contacts."""
    event_id = source_event_id(channel, message_source_id(message))
    body = message.body
    text, full = body, None
    if len(body) > settings.max_text_chars:
        path = full_text_path(workspace, event_id)
        text = (
            f"[Cut: the message has {len(body):,} characters; the first "
            f"{settings.max_text_chars:,} follow. The whole text is in {path}.]\n"
            + body[: settings.max_text_chars]
        )
        full = body
    context: dict[str, Any] = {"im": "xmpp", "type": message.type}
    if message.sent_at is not None:
        context["sent_at"] = message.sent_at.isoformat()
    if full is not None:
        context["cut"] = True
        context["full_text_path"] = str(full_text_path(workspace, event_id))
    if message.thread:
        context["thread"] = message.thread

    if message.type == "groupchat":
        room, _, nick = message.sender.partition("/")
        room = room.lower()
        real = bare_jid(message.occupant_jid) if message.occupant_jid else None
        relation: Relation = "contact" if real and is_contact(real) else "stranger"
        content: dict[str, Any] = {"from": real or "", "nick": nick, "room": room, "text": text}
        context["room"] = room
        event = Event(
            id=event_id,
            kind=IM_MESSAGE,
            source=Source(type=relation, id=f"{room}/{nick}"),
            channel=channel,
            content=content,
            context=context,
            session=_session(settings, room),
        )
        return event, full

    sender = bare_jid(message.sender)
    if sender in settings.user_jids and message.answer is not None:
        answer = message.answer
        # The payload the web console's buttons give (card id = the id of the card's message).
        content = {
            "card_id": answer.card_id,
            "action_id": answer.action_id,
            "message_id": answer.card_id,
        }
        event = Event(
            id=event_id,
            kind=USER_ACTION,
            source=Source(type="user", id=sender),
            channel=channel,
            content=content,
            context={**context, "reply": text},
            session=answer.session,
        )
        return event, full
    if sender in settings.user_jids:
        event = Event(
            id=event_id,
            kind=USER_INPUT,
            source=Source(type="user", id=sender),
            channel=channel,
            content=text,
            context=context,
            session=settings.user_session,
        )
        return event, full
    relation = "contact" if is_contact(sender) else "stranger"
    resource = message.sender.partition("/")[2]
    content = {"from": sender, "text": text}
    if resource:
        content["resource"] = resource
    event = Event(
        id=event_id,
        kind=IM_MESSAGE,
        source=Source(type=relation, id=sender),
        channel=channel,
        content=content,
        context=context,
        session=_session(settings, sender),
    )
    return event, full


def _session(settings: XmppChannelSettings, conversation: str) -> str:
    if settings.sessions == "one":
        return settings.session
    return f"{settings.session}:{conversation}"


def contact_matcher(settings: XmppChannelSettings, *, on_roster: bool) -> Callable[[str], bool]:
    """Whether a bare JID is a contact: listed in `contacts` or in a listed "@domain", or
    `on_roster` (the sender was on the account's roster when the message came)."""
    listed = frozenset(settings.contacts)

    def is_contact(jid: str) -> bool:
        jid = bare_jid(jid)
        return on_roster or jid in listed or "@" + jid.partition("@")[2] in listed

    return is_contact
