"""Configuration of the MCP servers whose tools an agent may call.

One :class:`MCPServerConfig` per server: a local server is a `command` run as a stdio
subprocess, a remote one a Streamable HTTP `url`. In `wakeful.toml`::

    [[mcp.servers]]
    name = "files"
    command = ["npx", "-y", "@modelcontextprotocol/server-filesystem", "/srv/data"]

    [[mcp.servers]]
    name = "search"
    url = "https://search.example.com/mcp"
    headers = { Authorization = "Bearer …" }
    trusted = true

Credentials are scoped per server: a command server's environment holds only what its config
names (`env` values, and `inherit_env` names copied from the runtime's own environment) plus
the few variables the MCP SDK always passes (HOME, LOGNAME, PATH, SHELL, TERM, USER; see
`mcp.client.stdio.get_default_environment`). Secrets in the runtime's environment, such as
OPENAI_API_KEY, never reach a server that does not name them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Literal, Self
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

_SERVER_NAME = re.compile(r"^[A-Za-z0-9_-]{1,32}$")


class MCPServerConfig(BaseModel):
    """One MCP server: how to reach it, how long its calls may take, whether to trust it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    """Names the server in alerts and prefixes its tools when names collide (`name.tool`)."""
    command: list[str] | None = None
    """A local server: the program and its arguments, run as a stdio subprocess."""
    url: str | None = None
    """A remote server: its Streamable HTTP endpoint (http:// or https://)."""
    env: dict[str, str] = Field(default_factory=dict)
    """Environment variables for a command, with their values. Nothing else of the runtime's
    environment reaches the server except `inherit_env` and the SDK's HOME, LOGNAME, PATH,
    SHELL, TERM and USER."""
    inherit_env: list[str] = Field(default_factory=list)
    """Names of the runtime's environment variables a command server gets, e.g.
    ["GITHUB_TOKEN"]: credentials stay out of wakeful.toml and go only where they are named."""
    cwd: Path | None = None
    """Working directory for a command; the runtime's own by default."""
    headers: dict[str, str] = Field(default_factory=dict)
    """HTTP headers sent to a url (for example Authorization)."""
    call_timeout_seconds: float = Field(default=60.0, gt=0)
    """A call fails when the server sends neither a result nor progress for this long."""
    max_call_seconds: float = Field(default=600.0, gt=0)
    """A call fails after this long even while the server keeps reporting progress."""
    connect_timeout_seconds: float = Field(default=30.0, gt=0)
    """How long starting the server and listing its tools may take."""
    health_check_interval_seconds: float = Field(default=30.0, gt=0)
    """How often an idle connection is checked (a tools/list request) for a hung server."""
    health_check_timeout_seconds: float = Field(default=10.0, gt=0)
    """A server that does not answer a health check within this long is restarted."""
    restart_initial_delay_seconds: float = Field(default=1.0, ge=0)
    """The wait before the first restart of a crashed server; it doubles on each failure."""
    restart_max_delay_seconds: float = Field(default=60.0, gt=0)
    """The longest wait between two restarts."""
    trusted: bool = False
    """Believe the server's tool annotations (readOnlyHint lets calls run in parallel, …).
    An untrusted server's tools are all treated as possibly destructive and not read-only."""
    enabled: bool = True
    pin_mode: Literal["first_use", "require"] | None = None
    """How the server's tool definitions are pinned (see wakeful.mcp.pins): "first_use"
    pins what it offers the first time it is seen; "require" offers nothing until
    `wakeful mcp approve NAME`. None: the toolset's default (first use)."""
    roots: list[Path] = Field(default_factory=list)
    """The directories the server is told it may work in (MCP roots), each an existing
    directory. Empty: the runtime's workdir for a command server (a url server is not told
    this machine's paths), or no roots at all when the runtime has no workdir."""
    allow_sampling: bool = False
    """Let the server run the runtime's model for its own requests (MCP sampling). Off by
    default: a server must not spend the user's model budget without the operator's consent."""
    sampling_max_tokens_total: int = Field(default=20_000, gt=0)
    """The most tokens (prompt and answer) the server's sampling requests may use per run."""
    allow_elicitation: bool = True
    """Let the server ask the user for input during a call (MCP elicitation): a form, or a page
    to open. On by default, unlike sampling: it costs nothing, a person sees every question
    with the server's name and the warning that the server (not the agent) asks, nothing is
    sent without their explicit answer, and silence declines. Turn it off for a server whose
    questions you do not want to see (a server that phishes for secrets); its calls that need
    input then end with advice instead. Needs a runtime with approvals (a safety gate)."""

    @field_validator("name")
    @classmethod
    def _check_name(cls, name: str) -> str:
        if not _SERVER_NAME.match(name):
            raise ValueError(
                f"MCP server name {name!r} is invalid: use 1-32 letters, digits, '_' or '-' "
                "(it prefixes tool names when they collide, as in 'name.tool')"
            )
        return name

    @field_validator("command")
    @classmethod
    def _check_command(cls, command: list[str] | None) -> list[str] | None:
        if command is not None and (not command or not command[0].strip()):
            raise ValueError(
                "command is empty: give the program and its arguments as a list, "
                'e.g. command = ["uvx", "mcp-server-fetch"]'
            )
        return command

    @field_validator("roots")
    @classmethod
    def _check_roots(cls, roots: list[Path]) -> list[Path]:
        for root in roots:
            if not root.is_dir():
                raise ValueError(
                    f"root {str(root)!r} is not an existing directory: list only directories "
                    "the server may work in, or leave roots out to offer the runtime's workdir"
                )
        return [root.resolve() for root in roots]

    @field_validator("url")
    @classmethod
    def _check_url(cls, url: str | None) -> str | None:
        if url is None:
            return None
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(
                f"url {url!r} is not an HTTP endpoint: write the full Streamable HTTP address, "
                "e.g. 'https://example.com/mcp' (for a local program, use command instead)"
            )
        return url

    @model_validator(mode="after")
    def _check_transport(self) -> Self:
        name = self.name
        if (self.command is None) == (self.url is None):
            given = "both" if self.command is not None else "neither"
            raise ValueError(
                f"MCP server {name!r} has {given} of command and url: give exactly one, command "
                "for a local program run over stdio, url for a Streamable HTTP server"
            )
        if self.url is not None and (self.env or self.inherit_env or self.cwd is not None):
            raise ValueError(
                f"MCP server {name!r} sets env or cwd, which apply only to a command it runs; "
                "remove them, or use command instead of url"
            )
        if self.command is not None and self.headers:
            raise ValueError(
                f"MCP server {name!r} sets headers, which apply only to a url; remove them"
            )
        if self.max_call_seconds < self.call_timeout_seconds:
            raise ValueError(
                f"MCP server {name!r}: max_call_seconds ({self.max_call_seconds:g}) is shorter "
                f"than call_timeout_seconds ({self.call_timeout_seconds:g}); raise it"
            )
        return self

    def environment(self, runtime_env: Mapping[str, str] | None = None) -> dict[str, str]:
        """The variables a command server is given on top of the SDK's defaults: the named
        `inherit_env` ones present in the runtime's environment, then `env`."""
        source = os.environ if runtime_env is None else runtime_env
        inherited = {name: source[name] for name in self.inherit_env if name in source}
        return inherited | self.env

    @property
    def target(self) -> str:
        """The command line or URL, for messages."""
        if self.command is not None:
            return " ".join(self.command)
        return self.url or "(in process)"


def in_process_config(name: str) -> MCPServerConfig:
    """Settings for a server object served in this process: validated, trusted, no transport."""
    return MCPServerConfig(name=name, url="http://in-process.invalid/", trusted=True).model_copy(
        update={"url": None}
    )
