"""Messages to the user on Telegram: how a stored message becomes Telegram messages, how they
are sent, and which copies went where.

A message goes to the chat of its session when the bot keeps one session per chat (the chat the
user wrote from), else to the user's private chat (whose id is the user's id). Its text goes
byte for byte, in parts of at most 4,096 characters; a notification's title is its first line;
a card is its text rendering with its buttons as an inline keyboard under the last part (a press
comes back as "<card id>:<action id>", which :mod:`.updates` turns into the `user.action` every
channel produces). Attachments follow as files: a JPEG, PNG or WebP image of at most 10 MB as a
photo, anything else of at most 50 MB (the Bot API's limit for bots) as a document; a larger
file is not sent, and a line in the text names it.

The copy's id is "<chat id>:<message id>" of its first Telegram message. :class:`SentCopies`
remembers, in memory, every message of each copy and the newest copy of each session in each
chat, so that a reply to any part, a press on the keyboard, or a new message in the chat is
traced back to the copies the user has seen (see :func:`read_copies`; Telegram tells a bot of
no reads). A copy read elsewhere gets a 👀 reaction (:func:`react_read`).
"""

from __future__ import annotations

import logging
import os
import warnings
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, Final

import anyio
import anyio.to_thread
from pydantic import ValidationError
from telegram import Bot, InlineKeyboardButton, InlineKeyboardMarkup
from telegram.error import BadRequest, InvalidToken, RetryAfter, TelegramError
from telegram.warnings import PTBDeprecationWarning

from ...core.records import MessageAttachment, OutboundMessage
from ...errors import WakefulError
from ...events import USER_ACTION, USER_INPUT, Event
from ...toolkits.comms.cards import Card, card_text, telegram_keyboard
from .settings import TelegramChannelSettings

__all__ = [
    "MAX_DOCUMENT_BYTES",
    "MAX_MESSAGE_CHARS",
    "MAX_PHOTO_BYTES",
    "READ_REACTION",
    "FilePiece",
    "OutboundPlan",
    "SentCopies",
    "TelegramSendFailed",
    "TextPiece",
    "copy_id",
    "duration_text",
    "outbound_plan",
    "parse_copy_id",
    "react_read",
    "read_copies",
    "retry_after_seconds",
    "send_pieces",
    "text_parts",
]

log = logging.getLogger(__name__)

# Telegram's limit on one message's text; a longer one is sent in parts.
MAX_MESSAGE_CHARS: Final = 4096
# The Bot API's limits on what a bot uploads: a photo, and any other file.
MAX_PHOTO_BYTES: Final = 10 * 1024 * 1024
MAX_DOCUMENT_BYTES: Final = 50 * 1024 * 1024
# The image types Telegram shows as photos; any other image goes as a document.
PHOTO_TYPES: Final = frozenset({"image/jpeg", "image/png", "image/webp"})
# The longest flood-control wait a send sits through before giving up.
MAX_SEND_RETRY_AFTER: Final = 60.0
# How long an upload may take to write and be answered: a 50 MB file needs more than a message.
UPLOAD_SECONDS: Final = 120.0
# The reaction that shows, on a copy, that the user read the message elsewhere.
READ_REACTION: Final = "👀"
# How many sent Telegram messages are remembered for tracing replies back to their copy.
REMEMBERED_MESSAGES: Final = 10_000


class TelegramSendFailed(WakefulError):
    """Raised by :meth:`TelegramChannel.send` and :meth:`TelegramChannel.send_to_user` when
    Telegram did not take the message; the message says why, how much of it went, and whether
    trying again can help."""


@dataclass(frozen=True)
class TextPiece:
    """One Telegram text message of a copy, with the inline keyboard under it, if any."""

    text: str
    keyboard: dict[str, Any] | None = None


@dataclass(frozen=True)
class FilePiece:
    """One attachment of a copy, sent as a photo or as a document."""

    attachment: MessageAttachment
    as_photo: bool


@dataclass(frozen=True)
class OutboundPlan:
    """What one message becomes on Telegram: the chat, then the messages in the order sent."""

    chat_id: int
    pieces: tuple[TextPiece | FilePiece, ...]


def copy_id(chat_id: int, message_id: int) -> str:
    """The id of a copy (or of one Telegram message): "<chat id>:<message id>"."""
    return f"{chat_id}:{message_id}"


def parse_copy_id(value: str) -> tuple[int, int] | None:
    """The (chat id, message id) of a copy id, or None when `value` is not one."""
    chat, colon, message = value.rpartition(":")
    try:
        return (int(chat), int(message)) if colon else None
    except ValueError:
        return None


def target_chat(message: OutboundMessage, settings: TelegramChannelSettings) -> int:
    """The chat `message` goes to: its session's chat, else the user's private chat."""
    prefix = f"{settings.session}:chat-"
    if settings.sessions == "per_chat" and message.session.startswith(prefix):
        try:
            return int(message.session.removeprefix(prefix))
        except ValueError:
            pass  # a session named like a chat's without being one: the private chat, below
    if not settings.user_ids:
        raise TelegramSendFailed(
            f"The Telegram channel has no chat for message {message.id} (session "
            f"{message.session!r}): set `user_ids` in its [[channels.telegram]] table to your "
            "Telegram user id, so messages can reach your private chat with the bot."
        )
    # A private chat's id is the user's id.
    return settings.user_ids[0]


def text_parts(text: str) -> list[str]:
    """`text` in parts of at most Telegram's 4,096 characters."""
    return [text[i : i + MAX_MESSAGE_CHARS] for i in range(0, len(text), MAX_MESSAGE_CHARS)]


def outbound_plan(message: OutboundMessage, settings: TelegramChannelSettings) -> OutboundPlan:
    """How `message` is sent: its chat, its text parts (a card's keyboard under the last), its
    files. Reads the attachments' sizes from disk (call it off the event loop)."""
    chat_id = target_chat(message, settings)
    text, keyboard = _body(message)
    files: list[FilePiece] = []
    left_out: list[str] = []
    for attachment in message.attachments:
        try:
            size = os.stat(attachment.path).st_size
        except OSError:
            left_out.append(f"[Not attached: {attachment.name} is no longer in the workspace.]")
            continue
        if size > MAX_DOCUMENT_BYTES:
            left_out.append(
                f"[Not attached: {attachment.name} is {_megabytes(size)}, too large for Telegram "
                f"(bots send files of at most {_megabytes(MAX_DOCUMENT_BYTES)}); it is in the "
                f"workspace at {attachment.path}.]"
            )
            continue
        as_photo = attachment.type in PHOTO_TYPES and size <= MAX_PHOTO_BYTES
        files.append(FilePiece(attachment, as_photo))
    if left_out:
        text = "\n".join([text, *left_out]) if text else "\n".join(left_out)
    parts = text_parts(text)
    pieces: list[TextPiece | FilePiece] = [TextPiece(part) for part in parts]
    if keyboard is not None and pieces:  # a card's text always holds its title
        pieces[-1] = TextPiece(parts[-1], keyboard)
    if not pieces and not files:
        raise TelegramSendFailed(
            f"Message {message.id} has no text and no attachment, so there is nothing to send "
            "to Telegram."
        )
    return OutboundPlan(chat_id, (*pieces, *files))


def _body(message: OutboundMessage) -> tuple[str, dict[str, Any] | None]:
    """The message's text on Telegram, and a card's keyboard."""
    if message.kind == "notification" and message.title:
        return (f"{message.title}\n{message.text}" if message.text else message.title), None
    if message.kind != "card" or message.card is None:
        return message.text, None
    try:
        card = Card.model_validate(message.card)
    except ValidationError:
        # Not a card this version can read (stored by another sender): its stored text.
        return message.text, None
    # The buttons are the keyboard, and the images follow as photos: neither is repeated as
    # text. The card id a press reports is the message's id, as on every channel.
    shown = card.model_copy(
        update={"actions": [], "images": [] if message.attachments else card.images}
    )
    return card_text(shown), telegram_keyboard(card, message.id)


def _megabytes(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MB".replace(".0 MB", " MB")


async def send_pieces(
    bot: Bot,
    chat_id: int,
    pieces: Sequence[TextPiece | FilePiece],
    *,
    seconds: float,
    token_env: str,
    scrub: Callable[[str], str],
) -> list[int]:
    """Send `pieces` to `chat_id` in order and return the sent messages' ids. Waits out one
    short flood-control pause per piece; raises TelegramSendFailed saying how many pieces went
    otherwise. `seconds` bounds each request; `scrub` keeps the token out of Telegram's error
    texts."""
    sent: list[int] = []
    for piece in pieces:
        for attempt in range(2):
            try:
                sent.append(await _send_piece(bot, chat_id, piece, seconds))
            except RetryAfter as exc:
                wait = retry_after_seconds(exc)
                if attempt or wait > MAX_SEND_RETRY_AFTER:
                    raise TelegramSendFailed(
                        f"Telegram's flood control refuses messages to chat {chat_id} for "
                        f"{duration_text(wait)}. {_how_much(sent, pieces)} Send it again later."
                    ) from exc
                await anyio.sleep(wait)
                continue
            except InvalidToken as exc:
                raise TelegramSendFailed(
                    f"The Telegram Bot API refused the bot token in {token_env}. "
                    f"{_how_much(sent, pieces)} Check the token with @BotFather."
                ) from exc
            except TelegramError as exc:
                raise TelegramSendFailed(
                    f"Telegram did not take {_what(piece)} to chat {chat_id}: "
                    f"{scrub(str(exc))} {_how_much(sent, pieces)}"
                ) from exc
            except OSError as exc:
                raise TelegramSendFailed(
                    f"Telegram was not sent {_what(piece)}: it could not be read "
                    f"({exc.strerror or exc}). {_how_much(sent, pieces)}"
                ) from exc
            break
    return sent


async def _send_piece(bot: Bot, chat_id: int, piece: TextPiece | FilePiece, seconds: float) -> int:
    """Send one piece and return its message id; `seconds` bounds connecting and each step of
    a text message (an upload gets UPLOAD_SECONDS to write and be answered)."""
    if isinstance(piece, TextPiece):
        markup = _markup(piece.keyboard) if piece.keyboard is not None else None
        message = await bot.send_message(
            chat_id,
            piece.text,
            reply_markup=markup,
            read_timeout=seconds,
            write_timeout=seconds,
            connect_timeout=seconds,
            pool_timeout=seconds,
        )
        return message.message_id
    attachment = piece.attachment
    data = await anyio.to_thread.run_sync(Path(attachment.path).read_bytes)
    if piece.as_photo:
        try:
            photo = await bot.send_photo(
                chat_id,
                data,
                filename=attachment.name,
                read_timeout=UPLOAD_SECONDS,
                write_timeout=UPLOAD_SECONDS,
                connect_timeout=seconds,
                pool_timeout=seconds,
            )
        except BadRequest as exc:
            # Telegram refuses some images as photos (e.g. too long and narrow); the same
            # file as a document always shows.
            log.info("Telegram refused %s as a photo (%s); sending it as a file", attachment, exc)
        else:
            return photo.message_id
    document = await bot.send_document(
        chat_id,
        data,
        filename=attachment.name,
        read_timeout=UPLOAD_SECONDS,
        write_timeout=UPLOAD_SECONDS,
        connect_timeout=seconds,
        pool_timeout=seconds,
    )
    return document.message_id


def _markup(keyboard: dict[str, Any]) -> InlineKeyboardMarkup:
    return InlineKeyboardMarkup(
        [
            [
                InlineKeyboardButton(button["text"], callback_data=button["callback_data"])
                for button in row
            ]
            for row in keyboard["inline_keyboard"]
        ]
    )


def _what(piece: TextPiece | FilePiece) -> str:
    if isinstance(piece, TextPiece):
        return "the message"
    return f"the {'photo' if piece.as_photo else 'file'} {piece.attachment.name}"


def _how_much(sent: Sequence[int], pieces: Sequence[TextPiece | FilePiece]) -> str:
    if not sent:
        return "Nothing was sent."
    return f"{len(sent)} of {len(pieces)} part(s) were sent."


async def react_read(bot: Bot, *, chat_id: int, message_id: int, seconds: float) -> bool:
    """Put the read reaction on a copy (each request bounded by `seconds`); False (logged)
    when Telegram refuses."""
    try:
        return await bot.set_message_reaction(
            chat_id,
            message_id,
            READ_REACTION,
            read_timeout=seconds,
            write_timeout=seconds,
            connect_timeout=seconds,
            pool_timeout=seconds,
        )
    except TelegramError as exc:
        log.info("Could not mark message %s in chat %s as read: %s", message_id, chat_id, exc)
        return False


class SentCopies:
    """Which copies this channel sent, in memory: every Telegram message of each (its parts
    and files) by chat and message id, and the newest copy of each session in each chat. The
    oldest are forgotten past `limit` messages; a forgotten or earlier message is still traced
    by its own id, which is its copy's id when it was the first part."""

    def __init__(self, limit: int = REMEMBERED_MESSAGES) -> None:
        self._limit = limit
        self._copy_of: OrderedDict[tuple[int, int], str] = OrderedDict()
        self._newest: dict[int, dict[str, str]] = {}

    def remember(self, chat_id: int, session: str, message_ids: Sequence[int]) -> str | None:
        """Remember a copy sent as `message_ids` (the first names it); return its id."""
        if not message_ids:
            return None
        copy = copy_id(chat_id, message_ids[0])
        for message_id in message_ids:
            self._copy_of[(chat_id, message_id)] = copy
        while len(self._copy_of) > self._limit:
            self._copy_of.popitem(last=False)
        newest = self._newest.setdefault(chat_id, {})
        newest.pop(session, None)
        newest[session] = copy
        return copy

    def copy_of(self, chat_id: int, message_id: int) -> str:
        """The id of the copy this Telegram message belongs to."""
        return self._copy_of.get((chat_id, message_id), copy_id(chat_id, message_id))

    def newest_in(self, chat_id: int) -> list[str]:
        """The newest copy of each session sent to this chat."""
        return list(self._newest.get(chat_id, {}).values())


def read_copies(events: Iterable[Event], copies: SentCopies) -> list[str]:
    """The copies the user has seen, judging by what they did in `events` (Telegram tells a
    bot of no reads): the copy they replied to and the newest copies in the chat they wrote in,
    the copy whose button they pressed. Only the user's own events count, never a contact's or
    a stranger's. Each id once, in the order found."""
    found: dict[str, None] = {}
    for event in events:
        if event.source.type != "user":
            continue
        if event.kind == USER_INPUT:
            chat = event.context.get("chat")
            chat_id = chat.get("id") if isinstance(chat, dict) else None
            if not isinstance(chat_id, int):
                continue
            reply = event.context.get("reply")
            replied_to = reply.get("message_id") if isinstance(reply, dict) else None
            if isinstance(replied_to, int):
                found[copies.copy_of(chat_id, replied_to)] = None
            found |= dict.fromkeys(copies.newest_in(chat_id))
        elif event.kind == USER_ACTION:
            # The message the pressed button is under (Telegram names it), never the card id
            # in the button's data, which a forged press could set to anything.
            pressed_on = event.context.get("message")
            if not isinstance(pressed_on, dict):
                continue
            chat = pressed_on.get("chat")
            chat_id = chat.get("id") if isinstance(chat, dict) else None
            message_id = pressed_on.get("message_id")
            if isinstance(chat_id, int) and isinstance(message_id, int):
                found[copies.copy_of(chat_id, message_id)] = None
    return list(found)


def retry_after_seconds(exc: RetryAfter) -> float:
    """How long flood control asked to wait, in seconds (PTB gives an int or, from v22.2 on
    request, a timedelta; reading it as an int warns, so the warning is silenced here)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PTBDeprecationWarning)
        value = exc.retry_after
    if isinstance(value, timedelta):
        return value.total_seconds()
    return float(value)


def duration_text(seconds: float) -> str:
    """A wait as a person reads it: "0.5 s", "42 s", "15 minutes"."""
    if seconds >= 120:
        return f"{seconds / 60:.0f} minutes"
    return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.1f} s"
