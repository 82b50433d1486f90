"""Telegram as a channel: a bot's updates, followed by long polling, become events; what the
user writes (recognised by Telegram user id) is user input, anyone else's message is an
`im.message` from a contact or a stranger, and a press on an inline keyboard button is a
`user.action`. :meth:`TelegramChannel.send` sends a message back, and the channel carries the
runtime's messages to the user (:meth:`TelegramChannel.send_to_user`, cards as inline keyboards,
attachments as files; see :mod:`.outbound`), reporting as read what the user replied to,
pressed a button on, or wrote after.

`KIND` is what the channel registry builds `[[channels.telegram]]` tables with.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from ...core.channel import ChannelContext
from .polling import TelegramChannel, TelegramSendFailed
from .settings import TelegramChannelSettings

__all__ = [
    "KIND",
    "TelegramChannel",
    "TelegramChannelKind",
    "TelegramChannelSettings",
    "TelegramSendFailed",
]


class TelegramChannelKind:
    """The "telegram" channel kind: settings from `[[channels.telegram]]`, one channel per bot."""

    # It long-polls getUpdates, which Telegram answers for one caller per bot (409 Conflict for
    # the others): one worker of a cluster at a time.
    pulls = True

    @property
    def kind(self) -> str:
        return "telegram"

    @property
    def settings_model(self) -> type[BaseModel]:
        return TelegramChannelSettings

    def build(self, settings: Any, context: ChannelContext) -> TelegramChannel:
        if not isinstance(settings, TelegramChannelSettings):
            settings = TelegramChannelSettings.model_validate(settings)
        return TelegramChannel(settings, context)


KIND = TelegramChannelKind()
