"""The Telegram channel: a bot's updates, fetched by long polling (getUpdates), become events in
about a second, through python-telegram-bot's `Bot` (no Bot API client of our own).

The cursor is the offset of the next update (the last update id delivered, plus one), kept in
the store and advanced only after the Inbox has stored the events up to it; Telegram forgets an
update once a later call asks from beyond it. A crash at any point therefore re-reads a little
and never skips, and what is re-read has the same event id (from the update id) and is dropped
by the Inbox as a duplicate.

Failures are waited out, never hammered: a token the server refuses (401/404) waits
`auth_failure_backoff_seconds` (15 minutes) and :meth:`TelegramChannel.health` says the token
is wrong; a flood-control answer (429) waits exactly the `retry_after` it gives; a network or
server failure waits exponentially longer, up to `max_backoff_seconds`. The token never appears
in health, logs or errors.
"""

from __future__ import annotations

import logging
import os
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from functools import partial
from typing import Final, TypeVar

import anyio
import anyio.to_thread
from anyio.abc import TaskStatus
from telegram import Bot, Update
from telegram.error import Conflict, InvalidToken, RetryAfter, TelegramError
from telegram.request import HTTPXRequest

from ...core.channel import ChannelContext, ChannelHealth, ChannelState
from ...core.records import OutboundMessage
from ...errors import ConfigError, StoreError
from ...events import Event, InvalidEvent, Source, utc_now
from .outbound import (
    MAX_MESSAGE_CHARS,
    FilePiece,
    SentCopies,
    TelegramSendFailed,
    TextPiece,
    outbound_plan,
    parse_copy_id,
    react_read,
    read_copies,
    retry_after_seconds,
    send_pieces,
    text_parts,
)
from .outbound import duration_text as _duration
from .settings import TelegramChannelSettings
from .updates import TelegramPeople, update_event

__all__ = ["CURSOR_KEY", "MAX_MESSAGE_CHARS", "TelegramChannel", "TelegramSendFailed"]

log = logging.getLogger(__name__)

# python-telegram-bot is moving time periods from int seconds to timedelta and warns on every
# int it hands out, even from inside its own RetryAfter constructor; opting in to timedelta
# (its documented switch, read when a value is handed out) keeps flood control from warning.
os.environ.setdefault("PTB_TIMEDELTA", "true")

CURSOR_KEY: Final = "offset"
ALLOWED_UPDATES: Final = ("message", "edited_message", "callback_query")
# The loggers whose records can hold a request's URL, and so the token.
LOGGERS_WITH_URLS: Final = ("httpx", "telegram.Bot")

T = TypeVar("T")


class TelegramChannel:
    """One Telegram bot as a channel, which also carries messages to the user (it is a
    :class:`wakeful.core.channel.UserReach`; see :mod:`.outbound`); see the module docs."""

    def __init__(self, settings: TelegramChannelSettings, context: ChannelContext) -> None:
        self._settings = settings
        self._context = context
        self._people = TelegramPeople(settings.user_ids, settings.contacts)
        self._health = ChannelHealth("starting", "connecting to the Telegram Bot API")
        self._last_event_at: datetime | None = None
        self._failures = 0  # failures in a row, for the backoff
        self._bot: Bot | None = None  # the polling bot while it is connected
        self._token = ""
        self._copies = SentCopies()

    @property
    def name(self) -> str:
        return self._context.name

    @property
    def settings(self) -> TelegramChannelSettings:
        return self._settings

    def health(self) -> ChannelHealth:
        return ChannelHealth(self._health.state, self._health.detail, self._last_event_at)

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Follow the bot's updates until cancelled, waiting out failures."""
        settings = self._settings
        self._token = settings.token()
        task_status.started()
        self._failures = 0
        try:
            while True:
                try:
                    async with self._connected() as bot:
                        self._bot = bot
                        self._set("running", f"polling the Telegram Bot API at {settings.api_url}")
                        await self._follow(bot)
                except InvalidToken:
                    wait = settings.auth_failure_backoff_seconds
                    self._set(
                        "degraded",
                        f"The Telegram Bot API refused the bot token in {settings.token_env}: it "
                        "is wrong or was revoked. Check it with @BotFather and set it again; "
                        f"retrying in {_duration(wait)}.",
                    )
                    await anyio.sleep(wait)
                except RetryAfter as exc:
                    wait = retry_after_seconds(exc)
                    self._set(
                        "degraded",
                        f"Telegram's flood control asked to wait; retrying in {_duration(wait)}.",
                    )
                    await anyio.sleep(wait)
                except (TelegramError, StoreError) as exc:
                    self._failures += 1
                    wait = min(settings.max_backoff_seconds, 2.0 ** (self._failures - 1))
                    wait *= random.uniform(0.5, 1.0)
                    why = self._scrubbed(str(exc))
                    if isinstance(exc, Conflict):
                        why = (
                            "Another program is reading this bot's updates, or a webhook is set "
                            "for it (Telegram answers 409 Conflict); stop the other program, or "
                            "remove the webhook with deleteWebhook."
                        )
                    self._set(
                        "degraded", f"{why} Retrying in {wait:.1f} s (attempt {self._failures})."
                    )
                    await anyio.sleep(wait)
                finally:
                    self._bot = None
        finally:
            self._set("stopped", "")

    async def send(self, chat_id: int, text: str) -> list[int]:
        """Send `text` to the chat `chat_id` (in parts of at most 4,096 characters, Telegram's
        limit) and return the sent messages' ids. Waits out a short flood-control pause;
        raises TelegramSendFailed saying why otherwise."""
        if not text:
            raise TelegramSendFailed("A Telegram message needs some text; this one is empty.")
        pieces = [TextPiece(part) for part in text_parts(text)]
        return await self._using_bot(partial(self._send_pieces, chat_id, pieces))

    async def send_to_user(self, message: OutboundMessage) -> str | None:
        """Deliver a stored message to the user, to the chat of its session or their private
        chat, and return the copy's id ("<chat id>:<message id>" of its first Telegram
        message). Raises TelegramSendFailed saying why, and how much went, when Telegram did
        not take it all."""
        plan = await anyio.to_thread.run_sync(partial(outbound_plan, message, self._settings))
        sent = await self._using_bot(partial(self._send_pieces, plan.chat_id, plan.pieces))
        return self._copies.remember(plan.chat_id, message.session, sent)

    async def show_read(self, message: OutboundMessage, channel_message_id: str) -> bool:
        """Mark the copy `channel_message_id` with a 👀 reaction (the user read the message
        elsewhere); False, and nothing raised, when that is not a copy id or Telegram
        refuses."""
        target = parse_copy_id(channel_message_id)
        if target is None:
            return False
        chat_id, message_id = target
        react = partial(
            react_read,
            chat_id=chat_id,
            message_id=message_id,
            seconds=self._settings.request_timeout_seconds,
        )
        try:
            return await self._using_bot(react)
        except (TelegramSendFailed, ConfigError) as exc:
            log.info("%s: could not show message %s as read: %s", self.name, message.id, exc)
            return False

    async def _send_pieces(
        self, chat_id: int, pieces: Sequence[TextPiece | FilePiece], bot: Bot
    ) -> list[int]:
        return await send_pieces(
            bot,
            chat_id,
            pieces,
            seconds=self._settings.request_timeout_seconds,
            token_env=self._settings.token_env,
            scrub=self._scrubbed,
        )

    async def _using_bot(self, use: Callable[[Bot], Awaitable[T]]) -> T:
        """`use` the polling bot, or a bot connected for the call while the channel is not
        polling; TelegramSendFailed when the API refuses the token or cannot be reached."""
        if self._bot is not None:
            return await use(self._bot)
        self._token = self._token or self._settings.token()
        try:
            async with self._connected() as bot:
                return await use(bot)
        except InvalidToken as exc:
            raise TelegramSendFailed(
                f"The Telegram Bot API refused the bot token in {self._settings.token_env}, so "
                "nothing was sent. Check the token with @BotFather."
            ) from exc
        except TelegramError as exc:
            raise TelegramSendFailed(
                f"The Telegram Bot API at {self._settings.api_url} could not be reached, so "
                f"nothing was sent: {self._scrubbed(str(exc))} Try again later."
            ) from exc

    @asynccontextmanager
    async def _connected(self) -> AsyncIterator[Bot]:
        """A bot for the API whose token was checked (getMe); InvalidToken when refused."""
        api = self._settings.api_url
        timeout = self._settings.request_timeout_seconds
        redaction = TokenRedaction(self._token)
        for name in LOGGERS_WITH_URLS:
            logging.getLogger(name).addFilter(redaction)
        try:
            bot = Bot(
                self._token,
                base_url=f"{api}/bot",
                base_file_url=f"{api}/file/bot",
                request=HTTPXRequest(),
                get_updates_request=HTTPXRequest(connection_pool_size=1),
            )
        except BaseException:
            redaction.remove()
            raise
        try:
            await bot.initialize()
        except InvalidToken as exc:
            await _shut_down(bot, timeout, redaction)
            # PTB's message quotes the token: keep it out of every trace.
            raise InvalidToken("The server refused the bot token.") from exc.__cause__
        except BaseException:
            await _shut_down(bot, timeout, redaction)
            raise
        try:
            yield bot
        finally:
            await _shut_down(bot, timeout, redaction)

    async def _follow(self, bot: Bot) -> None:
        """Fetch updates and deliver them, advancing the cursor after each batch, until a call
        fails."""
        settings = self._settings
        stored = await self._context.cursors.get(self.name, CURSOR_KEY)
        offset = int(stored) if stored is not None else None
        timeout = settings.request_timeout_seconds
        while True:
            updates = await bot.get_updates(
                offset=offset,
                timeout=settings.poll_timeout_seconds,
                allowed_updates=list(ALLOWED_UPDATES),
                read_timeout=timeout,
                write_timeout=timeout,
                connect_timeout=timeout,
                pool_timeout=timeout,
            )
            self._failures = 0
            # Telegram answers in order; anything below the offset is a server's mistake.
            fresh = [u for u in updates if offset is None or u.update_id >= offset]
            if not fresh:
                continue
            events = await anyio.to_thread.run_sync(partial(self._events, fresh))
            # Before the agent wakes, so that it sees as read what the user has seen.
            await self._report_reads([event for event, _ in events])
            await self._deliver(events)
            offset = max(u.update_id for u in fresh) + 1
            await self._context.cursors.put(self.name, CURSOR_KEY, str(offset))
            await self._answer_buttons(bot, [event for event, _ in events])

    def _events(self, updates: Sequence[Update]) -> list[tuple[Event, str | None]]:
        """Each followed update as an event, with why a filter keeps it from the agent (a chat
        not in `chats`), or None. Runs on a worker thread: a long text is written to disk."""
        settings = self._settings
        events: list[tuple[Event, str | None]] = []
        for update in updates:
            event = update_event(
                update,
                channel=self.name,
                people=self._people,
                session_for=settings.session_for,
                workspace=self._context.workspace,
                max_text_chars=settings.max_text_chars,
            )
            if event is None:
                continue
            events.append((event, self._chat_rejects(event)))
        return events

    def _chat_rejects(self, event: Event) -> str | None:
        allowed = self._settings.chats
        chat = event.context.get("chat")
        chat_id = chat.get("id") if isinstance(chat, dict) else chat
        if not allowed or chat_id in allowed:
            return None
        return f"chat {chat_id} is not in the channel's chats"

    async def _deliver(self, events: Sequence[tuple[Event, str | None]]) -> None:
        """Deliver a batch in one write; when the Inbox refuses an event (too large to store),
        deliver the others one by one and, in its place, a note saying what was refused, so
        one odd update can never stop the bot."""
        if not events:
            return
        try:
            await self._context.inbox.deliver_many(events)
        except InvalidEvent:
            for event, reason in events:
                try:
                    await self._context.inbox.deliver(event, filtered=reason)
                except InvalidEvent as exc:
                    log.warning("%s: update refused by the store: %s", self.name, exc)
                    await self._context.inbox.deliver(_refused(event, exc), filtered=reason)
        self._last_event_at = utc_now()

    async def _report_reads(self, events: Sequence[Event]) -> None:
        """Tell the runtime which copies the user has seen, by what they did (see
        :func:`.outbound.read_copies`); a failure to record it is logged, never in the way of
        the events."""
        reads = self._context.reads
        if reads is None:
            return
        for copy in read_copies(events, self._copies):
            try:
                await reads.copy_read(self.name, copy, through=True)
            except StoreError as exc:
                log.warning("%s: could not record copy %s as read: %s", self.name, copy, exc)

    async def _answer_buttons(self, bot: Bot, events: Sequence[Event]) -> None:
        """Tell Telegram each button press was received (the user's client stops its spinner);
        a failure here loses nothing, so it is logged, not retried."""
        for event in events:
            query_id = event.context.get("callback_query_id")
            if not isinstance(query_id, str):
                continue
            try:
                await bot.answer_callback_query(query_id)
            except TelegramError as exc:
                log.info("%s: could not answer a button press: %s", self.name, exc)

    def _set(self, state: ChannelState, detail: str) -> None:
        self._health = ChannelHealth(state, detail, self._last_event_at)
        if state == "degraded":
            log.warning("%s: %s", self.name, detail)

    def _scrubbed(self, text: str) -> str:
        text = text.strip()
        if self._token:
            text = text.replace(self._token, "<token>")
        return text if text.endswith(".") else text + "."


class TokenRedaction(logging.Filter):
    """Writes "<token>" for the bot token in the records of the loggers that show request URLs
    (httpx logs every request's URL, which holds the token, at INFO)."""

    def __init__(self, token: str) -> None:
        super().__init__()
        self._token = token

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if self._token and self._token in message:
            record.msg = message.replace(self._token, "<token>")
            record.args = None
        return True

    def remove(self) -> None:
        """Stop redacting (the bot is closed)."""
        for name in LOGGERS_WITH_URLS:
            logging.getLogger(name).removeFilter(self)


async def _shut_down(bot: Bot, seconds: float, redaction: TokenRedaction) -> None:
    """Close the bot's connections, even while cancelled, then stop redacting its token."""
    with anyio.CancelScope(shield=True), anyio.move_on_after(seconds):
        await bot.shutdown()
    redaction.remove()


def _refused(event: Event, exc: InvalidEvent) -> Event:
    """A small stand-in for an event the store refused, keeping its id and who sent it."""
    return Event(
        id=event.id,
        kind=event.kind,
        source=Source(type=event.source.type, id=event.source.id),
        channel=event.channel,
        content=f"[A Telegram update could not be stored: {exc}]",
        context={"update_id": event.context.get("update_id"), "refused": True},
        session=event.session,
    )
