"""Email as a channel: an IMAP mailbox followed with IDLE (or polling), each new mail an
`email.received` event with its sender's relation, its thread, its attachments (saved to the
workspace) and its authentication results. It also carries messages to the user over SMTP
(:class:`wakeful.core.channel.UserReach`), and their read state through the `\\Seen` flag.

`KIND` is what the channel registry builds `[[channels.email]]` tables with.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from ...core.channel import ChannelContext
from .imap import EmailChannel
from .outbound import EmailSendFailed
from .settings import EmailChannelSettings

__all__ = ["KIND", "EmailChannel", "EmailChannelKind", "EmailChannelSettings", "EmailSendFailed"]


class EmailChannelKind:
    """The "email" channel kind: settings from `[[channels.email]]`, one channel per mailbox."""

    # It follows its mailbox over an IMAP connection of its own: one worker of a cluster at a time.
    pulls = True

    @property
    def kind(self) -> str:
        return "email"

    @property
    def settings_model(self) -> type[BaseModel]:
        return EmailChannelSettings

    def build(self, settings: Any, context: ChannelContext) -> EmailChannel:
        if not isinstance(settings, EmailChannelSettings):
            settings = EmailChannelSettings.model_validate(settings)
        return EmailChannel(settings, context)


KIND = EmailChannelKind()
