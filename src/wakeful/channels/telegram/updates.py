"""Telegram updates as events: who wrote (the user, a contact or a stranger, by user id alone),
in which chat, what, in reply to what, with which attachments.

A message from one of the user's ids is `user.input` with the text as content (so a "yes"
answers an open approval, as at the console) and the chat in `context`; anyone else's is
`im.message` whose content carries the documented keys `from` and `text` for the channel
filters, the chat, the reply and the attachments. A press on an inline keyboard button is
`user.action` when the user pressed it, `im.action` otherwise; a press on a button of one of
our cards also carries the payload a press in the web console gives (card id, action id, message
id), and `context` names the message pressed on. Names and usernames are shown but never
trusted: anyone can call themselves anything.

Attachments are listed (file id, name, size, type), not downloaded: the agent decides whether a
file is worth fetching, and nothing from a stranger is written to disk unasked. A text longer
than `max_text_chars` is cut in the event and saved whole to the workspace.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

from telegram import CallbackQuery, Chat, Message, Update, User

from ...core.channel import source_event_id
from ...events import IM_ACTION, IM_MESSAGE, USER_ACTION, USER_INPUT, Event, Source, SourceType
from ...toolkits.comms.cards import action_payload, parse_action_data

__all__ = [
    "IM_ACTION",
    "USER_ACTION",
    "TelegramPeople",
    "saved_texts_folder",
    "update_event",
]

REPLY_CHARS: Final = 500


class TelegramPeople:
    """Who is who on Telegram, by user id: the user's ids and their contacts' ids."""

    def __init__(self, user_ids: Sequence[int], contacts: Sequence[int]) -> None:
        self._user = frozenset(user_ids)
        self._contacts = frozenset(contacts)

    def relation(self, person: User | None) -> SourceType:
        if person is None:
            return "stranger"
        if person.id in self._user:
            return "user"
        if person.id in self._contacts:
            return "contact"
        return "stranger"


def saved_texts_folder(workspace: Path) -> Path:
    """Where texts too long for an event are saved."""
    return workspace / ".wakeful" / "telegram"


def update_event(
    update: Update,
    *,
    channel: str,
    people: TelegramPeople,
    session_for: Callable[[int], str],
    workspace: Path,
    max_text_chars: int,
) -> Event | None:
    """The event for one update, or None for a kind of update the channel does not follow.
    `session_for(chat_id)` names the session. Writes a long text to the workspace (call it off
    the event loop)."""
    event_id = source_event_id(channel, f"{update.update_id}")
    if update.callback_query is not None:
        return _action_event(
            update.callback_query, event_id=event_id, channel=channel, people=people,
            session_for=session_for,
        )  # fmt: skip
    message = update.message or update.edited_message
    if message is None:
        return None
    relation = people.relation(message.from_user)
    text = message.text or message.caption or ""
    text_path: str | None = None
    if len(text) > max_text_chars:
        text_path = str(_save_text(workspace, event_id, text))
        text = (
            f"[The message is {len(text):,} characters long; the first {max_text_chars:,} "
            f"follow, the whole text is in {text_path}.]\n" + text[:max_text_chars]
        )
    chat = _chat(message.chat)
    attachments = _attachments(message)
    reply = _reply(message.reply_to_message)
    edited = update.message is None
    session = session_for(message.chat.id)
    if relation == "user":
        content = text
        if attachments:
            content += "".join(f"\n[Attached: {_attachment_line(a)}]" for a in attachments)
        context: dict[str, Any] = {
            "chat": chat,
            "message_id": message.message_id,
            "from": _person(message.from_user),
            "update_id": update.update_id,
        }
        context.update(_optional(reply=reply, attachments=attachments, text_path=text_path))
        if edited:
            context["edited"] = True
        return Event(
            id=event_id,
            kind=USER_INPUT,
            source=Source(type="user", id=_source_id(message.from_user)),
            channel=channel,
            content=content,
            context=context,
            session=session,
        )
    payload: dict[str, Any] = {
        "from": _display(message.from_user, message.chat),
        "sender": _person(message.from_user),
        "relation": relation,
        "chat": chat,
        "message_id": message.message_id,
        "date": message.date.isoformat(),
        "text": text,
        "reply_to": reply,
        "attachments": attachments,
        "edited": edited,
    }
    payload.update(_optional(text_path=text_path))
    return Event(
        id=event_id,
        kind=IM_MESSAGE,
        source=Source(type=relation, id=_source_id(message.from_user, message.chat)),
        channel=channel,
        content=payload,
        context={"chat": chat["id"], "update_id": update.update_id},
        session=session,
    )


def _action_event(
    query: CallbackQuery,
    *,
    event_id: str,
    channel: str,
    people: TelegramPeople,
    session_for: Callable[[int], str],
) -> Event:
    relation = people.relation(query.from_user)
    pressed_on: dict[str, Any] | None = None
    chat_id: int | None = None
    message = query.message
    if message is not None:
        chat_id = message.chat.id
        pressed_on = {"chat": _chat(message.chat), "message_id": message.message_id}
        if isinstance(message, Message):
            pressed_on["text"] = _cut(message.text or message.caption or "", REPLY_CHARS)
    data = query.data or ""
    content: dict[str, Any] = {
        "action": data,
        "text": data,
        "from": _display(query.from_user, None),
        "sender": _person(query.from_user),
        "relation": relation,
        "message": pressed_on,
    }
    # A button of one of our cards carries "<card id>:<action id>" (the card id is the id of
    # the message that sent it): the event then carries the card payload every channel uses.
    card = parse_action_data(data)
    if card is not None:
        content |= action_payload(card[0], card[1], message_id=card[0])
    return Event(
        id=event_id,
        kind=USER_ACTION if relation == "user" else IM_ACTION,
        source=Source(type=relation, id=_source_id(query.from_user)),
        channel=channel,
        content=content,
        context={"callback_query_id": query.id, "chat": chat_id, "message": pressed_on},
        session=session_for(chat_id if chat_id is not None else query.from_user.id),
    )


def _save_text(workspace: Path, event_id: str, text: str) -> Path:
    folder = saved_texts_folder(workspace)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{event_id}.txt"
    path.write_text(text, encoding="utf-8")
    return path


def _chat(chat: Chat) -> dict[str, Any]:
    return {
        "id": chat.id,
        "type": chat.type,
        "title": chat.title or chat.effective_name or "",
    }


def _person(person: User | None) -> dict[str, Any] | None:
    if person is None:
        return None
    return {
        "id": person.id,
        "username": person.username or "",
        "name": person.full_name,
        "is_bot": person.is_bot,
    }


def _display(person: User | None, chat: Chat | None) -> str:
    """How the sender is shown: "Name (@username, id N)"; the id is what counts."""
    if person is None:
        title = (chat.title or chat.effective_name or "") if chat is not None else ""
        return f"{title} (chat {chat.id})" if chat is not None else "unknown"
    handle = f"@{person.username}, " if person.username else ""
    return f"{person.full_name} ({handle}id {person.id})"


def _source_id(person: User | None, chat: Chat | None = None) -> str:
    if person is not None:
        return f"telegram:{person.id}"
    return f"telegram-chat:{chat.id}" if chat is not None else "telegram"


def _reply(message: Message | None) -> dict[str, Any] | None:
    if message is None:
        return None
    return {
        "message_id": message.message_id,
        "from": _display(message.from_user, message.chat),
        "text": _cut(message.text or message.caption or "", REPLY_CHARS),
    }


def _attachments(message: Message) -> list[dict[str, Any]]:
    """What the message carries besides text, listed (never downloaded)."""
    found: list[dict[str, Any]] = []
    if message.photo:
        largest = max(message.photo, key=lambda size: size.width * size.height)
        found.append(
            {
                "type": "photo",
                "file_id": largest.file_id,
                "name": "",
                "size": largest.file_size,
                "mime": "image/jpeg",
                "width": largest.width,
                "height": largest.height,
            }
        )
    for kind in ("document", "audio", "video", "voice", "animation", "video_note", "sticker"):
        item = getattr(message, kind, None)
        if item is None:
            continue
        found.append(
            {
                "type": kind,
                "file_id": item.file_id,
                "name": getattr(item, "file_name", None) or "",
                "size": item.file_size,
                "mime": getattr(item, "mime_type", None) or "",
            }
        )
    return found


def _attachment_line(attachment: dict[str, Any]) -> str:
    size = attachment["size"]
    shown = f", {size:,} bytes" if isinstance(size, int) else ""
    name = f" {attachment['name']}" if attachment["name"] else ""
    mime = f", {attachment['mime']}" if attachment["mime"] else ""
    return f"{attachment['type']}{name}{mime}{shown}, file_id {attachment['file_id']}"


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _optional(**values: Any) -> dict[str, Any]:
    return {key: value for key, value in values.items() if value}
