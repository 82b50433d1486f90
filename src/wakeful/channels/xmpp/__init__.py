"""XMPP (Jabber) as a channel: the agent's own account on an XMPP server; what the user writes
to it is the user's input, what others write (people on its roster or listed as contacts, or
strangers; rooms it joins) are `im.message` events tagged by who wrote them. It also carries the
agent's messages to the user, with delivery receipts and read markers (see `.outbound`).

`KIND` is what the channel registry builds `[[channels.xmpp]]` tables with.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from ...core.channel import ChannelContext
from .channel import XmppChannel, XmppUnavailable
from .outbound import XmppUnsendable
from .settings import RoomSettings, XmppChannelSettings

__all__ = [
    "KIND",
    "RoomSettings",
    "XmppChannel",
    "XmppChannelKind",
    "XmppChannelSettings",
    "XmppUnavailable",
    "XmppUnsendable",
]


class XmppChannelKind:
    """The "xmpp" channel kind: settings from `[[channels.xmpp]]`, one channel per account."""

    # It keeps the account logged in and receives over that connection: one worker of a
    # cluster at a time.
    pulls = True

    @property
    def kind(self) -> str:
        return "xmpp"

    @property
    def settings_model(self) -> type[BaseModel]:
        return XmppChannelSettings

    def build(self, settings: Any, context: ChannelContext) -> XmppChannel:
        if not isinstance(settings, XmppChannelSettings):
            settings = XmppChannelSettings.model_validate(settings)
        return XmppChannel(settings, context)


KIND = XmppChannelKind()
