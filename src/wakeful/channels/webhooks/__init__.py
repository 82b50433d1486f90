"""Webhooks: an HTTP ingress where outside systems (GitHub, Slack, anything that speaks Standard
Webhooks) deliver events, verified by their signatures and acknowledged only once stored.

`KIND` is the channel kind the runtime's channel registry builds `[[channels.webhook]]` tables
and `connect_channel(kind="webhook", …)` with; see :mod:`.settings` for the options and
:mod:`.ingress` for what each delivery is answered.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from ...core.channel import ChannelContext
from .ingress import WebhookIngress, WebhookListenError
from .settings import WebhookEndpoint, WebhookSettings
from .signatures import SignatureRejected, VerificationScheme

__all__ = [
    "KIND",
    "SignatureRejected",
    "VerificationScheme",
    "WebhookEndpoint",
    "WebhookIngress",
    "WebhookKind",
    "WebhookListenError",
    "WebhookSettings",
]


class WebhookKind:
    """The "webhook" :class:`~wakeful.core.channel.ChannelKind`."""

    @property
    def kind(self) -> str:
        return "webhook"

    @property
    def settings_model(self) -> type[BaseModel]:
        return WebhookSettings

    def build(self, settings: Any, context: ChannelContext) -> WebhookIngress:
        """An ingress for `settings` delivering to the context's Inbox (which applies the
        channel's filter). Raises ConfigError when a `secret_env` variable is not set."""
        if not isinstance(settings, WebhookSettings):
            settings = WebhookSettings.model_validate(settings)
        return WebhookIngress(settings, name=context.name, inbox=context.inbox)


KIND = WebhookKind()
