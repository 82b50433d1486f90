"""The settings of a webhook ingress: where it listens and the endpoints it serves.

In wakeful.toml, one `[[channels.webhook]]` table is one ingress (one port). For the common
case of a single endpoint, the endpoint is the table itself and takes the channel's name:

    [[channels.webhook]]
    name = "github"                   # the channel webhook:github, at POST /hooks/github
    scheme = "github"                 # standard | github | slack | none
    secret_env = "GITHUB_WEBHOOK_SECRET"
    session = "main"
    contacts = ["alice"]              # GitHub logins whose text counts as from a contact
    filter = { repositories = ["acme/app"], event_types = ["pull_request", "issues"] }
    port = 8787                       # 0: any free port (reported in health)

Several endpoints on one port are listed under `endpoints`, each with its own `name` and,
optionally, its own `filter` (applied by the ingress; the table's `filter` is applied by the
runtime to every endpoint's events):

    [[channels.webhook]]
    name = "hooks"
    port = 8787
    endpoints = [
        { name = "github", scheme = "github", secret_env = "GITHUB_WEBHOOK_SECRET" },
        { name = "billing", scheme = "standard", secret_env = "BILLING_WEBHOOK_SECRET" },
    ]

Secrets come from the table (`secret`) or, better, from an environment variable named by
`secret_env`; they are never logged nor echoed. An endpoint without verification needs
`scheme = "none"` together with `allow_unsigned = true`, so that it is never so by accident.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

from ...errors import ConfigError
from ..filters import ChannelFilter
from .signatures import (
    DEFAULT_REPLAY_WINDOW_SECONDS,
    VerificationScheme,
    decode_standard_secret,
)

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_PORT",
    "WebhookEndpoint",
    "WebhookSettings",
]

DEFAULT_PORT: Final = 8787
DEFAULT_MAX_BODY_BYTES: Final = 1024 * 1024
DEFAULT_MAX_IN_FLIGHT: Final = 256

_ENDPOINT_NAME: Final = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
_LISTEN_KEYS: Final = frozenset(
    {"host", "port", "max_body_bytes", "max_in_flight", "replay_window_seconds"}
)


class WebhookEndpoint(BaseModel):
    """One endpoint, `POST /hooks/<name>`: how its deliveries are verified, with which secret,
    and the session its events go to."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # "" only for the single endpoint given inline: it takes the channel's name.
    name: str = Field(default="", pattern=_ENDPOINT_NAME)
    scheme: VerificationScheme
    secret: SecretStr | None = None
    secret_env: str | None = None
    allow_unsigned: bool = False
    session: str = Field(default="main", min_length=1)
    # Sender ids (GitHub logins, Slack user ids) whose words count as from a contact; anyone
    # else's are from a stranger, whatever the signature says about the system that relayed them.
    contacts: tuple[str, ...] = ()
    # Which of this endpoint's events wake the agent; the others are stored as filtered. (The
    # channel's own filter, if any, is applied by the runtime's Inbox on top of this one.)
    filter: ChannelFilter | None = None

    @model_validator(mode="after")
    def _secret_fits_scheme(self) -> WebhookEndpoint:
        where = f"Webhook endpoint {self.name!r}"
        if self.scheme == "none":
            if not self.allow_unsigned:
                raise ValueError(
                    f"{where} has scheme 'none', which accepts deliveries from anyone who can "
                    "reach the port. Set allow_unsigned = true to mean it, or choose a scheme "
                    "(standard, github, slack) and a secret."
                )
            if self.secret is not None or self.secret_env is not None:
                raise ValueError(
                    f"{where} has scheme 'none' and a secret, which it would never check. "
                    "Choose a scheme (standard, github, slack), or drop the secret."
                )
            return self
        if (self.secret is None) == (self.secret_env is None):
            raise ValueError(
                f"{where} (scheme {self.scheme!r}) needs exactly one of `secret` or "
                "`secret_env` (the name of an environment variable holding the secret)."
            )
        if self.scheme == "standard" and self.secret is not None:
            decode_standard_secret(self.secret.get_secret_value())
        return self

    def secret_key(self, environ: Mapping[str, str] | None = None) -> bytes:
        """The key the endpoint's signatures are checked with (b"" for scheme "none");
        ConfigError naming the variable when `secret_env` is not set."""
        if self.scheme == "none":
            return b""
        if self.secret is not None:
            text = self.secret.get_secret_value()
        else:
            assert self.secret_env is not None  # the validator saw to it
            text = (os.environ if environ is None else environ).get(self.secret_env, "")
            if not text:
                raise ConfigError(
                    f"Webhook endpoint {self.name!r} takes its secret from the environment "
                    f"variable {self.secret_env}, which is not set. Export it before starting "
                    "wakeful."
                )
        if self.scheme == "standard":
            try:
                return decode_standard_secret(text)
            except ValueError as exc:
                raise ConfigError(f"Webhook endpoint {self.name!r}: {exc}") from exc
        return text.encode()


class WebhookSettings(BaseModel):
    """An HTTP ingress (one channel) and its endpoints."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    host: str = "127.0.0.1"
    port: int = Field(default=DEFAULT_PORT, ge=0, le=65535)
    max_body_bytes: int = Field(default=DEFAULT_MAX_BODY_BYTES, gt=0)
    max_in_flight: int = Field(default=DEFAULT_MAX_IN_FLIGHT, gt=0)
    replay_window_seconds: float = Field(default=DEFAULT_REPLAY_WINDOW_SECONDS, gt=0)
    endpoints: tuple[WebhookEndpoint, ...]

    @model_validator(mode="before")
    @classmethod
    def _single_endpoint_inline(cls, data: Any) -> Any:
        # `scheme`, `secret`… given in the table itself: one endpoint, the common case.
        if isinstance(data, Mapping) and "endpoints" not in data:
            listen = {k: v for k, v in data.items() if k in _LISTEN_KEYS}
            endpoint = {k: v for k, v in data.items() if k not in _LISTEN_KEYS}
            return {**listen, "endpoints": [endpoint]}
        return data

    @model_validator(mode="after")
    def _unique_names(self) -> WebhookSettings:
        names = [e.name for e in self.endpoints]
        if not names:
            raise ValueError("A webhook ingress needs at least one endpoint in `endpoints`.")
        if len(names) > 1 and "" in names:
            raise ValueError(
                "Each of several webhook endpoints needs a `name` (its URL is /hooks/<name>)."
            )
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(
                f"Webhook endpoint names must be unique in one ingress; {', '.join(twice)} "
                "appears more than once."
            )
        return self
