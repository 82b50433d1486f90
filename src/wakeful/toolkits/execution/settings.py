"""The settings of the execution tools, apart from the tools themselves.

`wakeful.config` validates these sections of `wakeful.toml`; keeping them here lets it do so
without importing the tools (their HTTP, SMTP, calendar and sandbox dependencies). Each tool
reads its own with :func:`wakeful.services.settings_of`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ...env_secrets import secret_for_tool

__all__ = [
    "CalendarWriteSettings",
    "DiagnosticsSettings",
    "EmailSettings",
    "GitHubSettings",
    "InterpreterSettings",
    "WebhookSettings",
]


class CalendarWriteSettings(BaseModel):
    """The CalDAV calendar create_calendar_event writes to when calendar='caldav'."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    caldav_url: str | None = None
    """The calendar collection's URL, e.g. "https://dav.example.com/calendars/ana/work/"."""

    username: str | None = None
    """The HTTP basic login; None sends no credentials."""

    password_env: str | None = None
    """The NAME of the environment variable that holds the password (never the password)."""

    timeout_seconds: float = Field(default=30.0, gt=0, le=600)
    """How long the PUT may take."""


class DiagnosticsSettings(BaseModel):
    """Which programs check a file after it is written, and how long they may take."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    ruff_command: tuple[str, ...] | None = None
    """The ruff program and its leading arguments; None uses `python -m ruff` when ruff is
    installed in this Python, else `ruff` on PATH."""

    node_command: str = "node"
    """The node program for `node --check`, a name on PATH or a path."""

    eslint_command: tuple[str, ...] | None = None
    """eslint and its leading arguments, e.g. ("npx", "--no-install", "eslint"); None runs no
    eslint. It is given `--format json --stdin --stdin-filename PATH` and the content on stdin."""

    default_python_rules: tuple[str, ...] = ("E9", "F")
    """The ruff rules checked when the workspace has no ruff configuration of its own."""

    timeout_seconds: float = Field(default=20.0, gt=0, le=600)
    """How long one checker may run before it is stopped and the check reported as skipped."""


class EmailSettings(BaseModel):
    """Where send_email hands messages over, and as whom."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    host: str = "127.0.0.1"
    """The SMTP server's host name."""

    port: int = Field(default=587, ge=1, le=65535)
    """The SMTP server's port: usually 587 (STARTTLS), 465 (SSL) or 25 (plain)."""

    security: Literal["starttls", "ssl", "none"] = "starttls"
    """"starttls" upgrades a plain connection, "ssl" connects with TLS from the start, "none"
    sends in clear text (for a relay on the same machine only)."""

    username: str | None = None
    """The SMTP login; None sends without logging in."""

    password_env: str | None = None
    """The NAME of the environment variable that holds the SMTP password (never the password)."""

    from_address: str | None = None
    """The sender, e.g. "Agent <agent@example.com>"; send_email refuses to run without it."""

    timeout_seconds: float = Field(default=30.0, gt=0, le=600)
    """How long connecting and each SMTP command may take."""

    max_attachment_bytes: int = Field(default=10 * 1024 * 1024, ge=1)
    """The largest attachment file, in bytes."""

    max_total_attachment_bytes: int = Field(default=20 * 1024 * 1024, ge=1)
    """The most bytes of all attachments of one message together."""

    confirmation_ttl_seconds: float = Field(default=600.0, gt=0, le=86_400)
    """How long a precheck's confirmation token stays valid."""

    def smtp_password(self, tool: str) -> str | None:
        """The SMTP password from the variable `password_env` names (None: no login); inside
        the call of `tool`, a ToolError naming the variable when it is unset."""
        if self.password_env is None:
            return None
        return secret_for_tool(
            self.password_env,
            what="The SMTP password",
            setting="password_env in the email settings",
            tool=tool,
        )


class GitHubSettings(BaseModel):
    """Where github_create_pull_request sends requests and how it signs in."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str = "https://api.github.com"
    """The REST API's base URL; a GitHub Enterprise server's is "https://HOST/api/v3"."""

    token_env: str = "GITHUB_TOKEN"
    """The NAME of the environment variable that holds the token (never the token itself)."""

    timeout_seconds: float = Field(default=30.0, gt=0, le=600)
    """How long one request may take."""


class InterpreterSettings(BaseModel):
    """Settings of the interpreter tools (see :func:`wakeful.services.settings_of`)."""

    model_config = ConfigDict(extra="forbid")

    idle_seconds: float = Field(default=1800.0, gt=0)
    """An interpreter with no call for this long exits, and its variables are lost."""
    lifetime_cpu_seconds: int = Field(default=3600, ge=1)
    """CPU seconds one interpreter may use over its whole life (RLIMIT_CPU is cumulative), in
    place of the sandbox's per-command `cpu_seconds`; each call is bounded by its wall-clock
    timeout instead. When it is used up the kernel kills the interpreter."""
    max_output_bytes: int = Field(default=4 * 1024 * 1024, ge=1024)
    """The most bytes of stdout (and again of stderr) one call keeps, head and tail."""
    python: Path | None = None
    """The Python that runs the code (with numpy, pandas, …); default: the one running wakeful."""


class WebhookSettings(BaseModel):
    """Where call_webhook may send requests, and the secret headers it adds."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    allowed_hosts: tuple[str, ...] | None = None
    """Host names requests may go to (exact, case-insensitive), e.g. ("hooks.slack.com",);
    None allows any host."""

    header_env: dict[str, str] = Field(default_factory=dict)
    """Headers added to every request, by header name, each read from the environment variable
    named here, e.g. {"Authorization": "HOOK_AUTH"}. Requires `allowed_hosts`."""

    timeout_seconds: float = Field(default=30.0, gt=0, le=600)
    """How long one request may take, connecting and reading together."""

    confirmation_ttl_seconds: float = Field(default=600.0, gt=0, le=86_400)
    """How long a precheck's confirmation token stays valid."""

    @model_validator(mode="after")
    def _secrets_need_hosts(self) -> WebhookSettings:
        if self.header_env and self.allowed_hosts is None:
            raise ValueError(
                "header_env adds secret headers to every request, so allowed_hosts must list "
                "the hosts that may receive them; set allowed_hosts too."
            )
        return self
