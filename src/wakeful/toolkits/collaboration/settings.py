"""Settings of the collaboration tools: the `[tools.collaboration]` table of wakeful.toml.

```toml
[tools.collaboration]
im_addresses = ["ops-lead@example.org"]          # who send_im_notification may write to
email_addresses = ["approvals@example.com"]      # who send_email_notification may write to

[tools.collaboration.slack.deploys]              # send_slack_message(channel="deploys", …)
webhook_url_env = "SLACK_DEPLOYS_WEBHOOK"        # the NAME of the variable holding the URL
```

The addresses are an allow-list of approvers and collaborators: the notification tools refuse
any other address, so text from the outside cannot make the agent write to a stranger. Email
goes over the SMTP server of `email` (by default the `[tools.email]` settings of send_email).
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..execution.settings import EmailSettings

__all__ = ["CollaborationSettings", "SlackWebhook"]

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class SlackWebhook(BaseModel):
    """One Slack channel the agent may post to, through an incoming webhook."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    webhook_url_env: str
    """The NAME of the environment variable that holds the webhook URL (never the URL: it is
    a secret that lets anyone post)."""

    timeout_seconds: float = Field(default=10.0, gt=0, le=120)

    @field_validator("webhook_url_env")
    @classmethod
    def _an_env_name(cls, value: str) -> str:
        if not _ENV_NAME.match(value):
            raise ValueError(
                f"{value!r} is not an environment variable name; give the NAME of the variable "
                'that holds the webhook URL, e.g. "SLACK_DEPLOYS_WEBHOOK"'
            )
        return value


class CollaborationSettings(BaseModel):
    """Who the collaboration tools may reach; see the module docs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    im_addresses: tuple[str, ...] = ()
    """The IM addresses (XMPP JIDs) of approvers and collaborators."""

    email_addresses: tuple[str, ...] = ()
    """The email addresses of approvers and collaborators."""

    slack: dict[str, SlackWebhook] = Field(default_factory=dict)
    """The Slack channels the agent may post to, by the name the agent uses."""

    email: EmailSettings | None = None
    """The SMTP server and sender of email notifications; None: those of send_email."""

    max_timeout_seconds: float = Field(default=7 * 24 * 3600, gt=0, le=7 * 24 * 3600)
    """The longest a request to a person may wait for its answer (a week by default)."""

    @field_validator("im_addresses", "email_addresses")
    @classmethod
    def _addresses(cls, values: tuple[str, ...]) -> tuple[str, ...]:
        for value in values:
            if "@" not in value or value != value.strip() or not value:
                raise ValueError(
                    f"{value!r} is not an address; write each as name@domain, e.g. "
                    '"approvals@example.com"'
                )
        return tuple(value.lower() for value in values)
