"""Which network hosts a command reaches, and whether the policy allows them.

`allowed_hosts` entries are exact host names or addresses (`github.com`, `127.0.0.1`),
`*.example.com` for every subdomain of example.com, or `*` for every host. Names compare without
case and without a trailing dot.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final
from urllib.parse import urlsplit

from .analysis import Analysis
from .parse import SimpleCommand

__all__ = ["host_allowed", "host_of_remote", "host_of_url", "judge_hosts"]

_SCP_REMOTE: Final = re.compile(r"^(?:[^@/:]+@)?(\[[^\]]+\]|[^/:\s]+):(?!//)")
_BARE_HOST: Final = re.compile(
    r"^(?:[^@/:\s]+@)?([A-Za-z0-9.-]+\.[A-Za-z]{2,}|localhost|\d+\.\d+\.\d+\.\d+)"
    r"(?::\d+)?(?:[/?#].*)?$"
)


def host_allowed(host: str, allowed: Sequence[str]) -> bool:
    """Whether `host` matches an entry of `allowed` (see the module docstring)."""
    name = host.lower().rstrip(".").strip("[]")
    for entry in allowed:
        pattern = entry.lower().rstrip(".")
        if pattern == "*" or pattern == name:
            return True
        if pattern.startswith("*.") and name.endswith(pattern[1:]):
            return True
    return False


def host_of_url(text: str) -> str | None:
    """The host of `https://host/…`, `host/path` or `user@host`; None if the text names none."""
    if "://" in text:
        try:
            return urlsplit(text).hostname or None
        except ValueError:
            return None
    match = _BARE_HOST.match(text)
    return match.group(1) if match else None


def host_of_remote(text: str) -> str | None:
    """The host of an scp/rsync/git remote (`user@host:path`, `host::module`, `ssh://…`);
    None when the text is a local path."""
    if "://" in text:
        if text.startswith("file://"):
            return None
        return host_of_url(text)
    if text.startswith(("/", ".", "~")):
        return None
    match = _SCP_REMOTE.match(text)
    return match.group(1).strip("[]") if match else None


def judge_hosts(
    command: SimpleCommand, hosts: Sequence[str | None], analysis: Analysis, verb: str
) -> None:
    """Ask about every host not allowed by the policy; None stands for a host that only the
    running shell knows."""
    allowed = analysis.allowed_hosts
    for host in hosts:
        if host is None:
            if "*" not in allowed:
                analysis.flag(
                    command,
                    "ask",
                    f"{verb} a network host that cannot be checked statically",
                )
        elif not host_allowed(host, allowed):
            analysis.flag(
                command,
                "ask",
                f"{verb} the network host {host}, which is not in allowed_hosts",
            )
