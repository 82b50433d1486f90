"""Paths inside a workspace that the host later executes or trusts: not the agent's to write.

The workspace is where the agent works, but a few files in it are read by programs the *user*
runs on the host, outside any sandbox, and some of those programs run commands named there. An
agent that could write them would run code on the host the next time the user types `git status`,
or turn its own sandbox off at the next start. So these paths are read-only inside the sandbox
(see :mod:`wakeful.safety.sandbox.bwrap`) and refused by the file tools, checked on the
normalised path relative to the root, never on text fragments of what the model typed.

The list, and why each entry is on it:

- ``.git`` (a directory or a ``gitdir:`` file), at any depth: git runs what ``.git/config``
  names (``core.fsmonitor``, ``core.pager``, ``core.sshCommand``, aliases, filter and diff
  drivers), the scripts in ``.git/hooks`` on commit, checkout and merge, and follows
  ``.git/commondir`` and ``.git/info/attributes``. A ``.git`` planted in a subfolder makes every
  git command run there obey it.
- ``.wakeful``: the runtime's and the execution server's state: the store with the audit log,
  idempotency keys and confirmation tokens (an agent that could edit it could erase the record of
  a refused call or replay a confirmed one), and the project's skills, which reach the prompt.
- ``wakeful.toml``: the configuration; it names the sandbox settings, the command policy and the
  MCP servers the runtime starts on the host.
- ``wakeful.lock.json``: the pins of third-party MCP tool definitions; rewriting it would approve
  a changed (possibly poisoned) tool.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Final

ANY_DEPTH: Final[dict[str, str]] = {
    ".git": "git on the host runs the commands its config and hooks name",
}
"""Names protected wherever they appear in a path, with the reason."""

AT_ROOT: Final[dict[str, str]] = {
    ".wakeful": "it holds the store and audit log of the runtime",
    "wakeful.toml": "it is the runtime's configuration, which sets the sandbox and policy",
    "wakeful.lock.json": "it pins the MCP tool definitions the runtime trusts",
}
"""Names protected as the first component of a path relative to the root, with the reason."""

SANDBOX_SCRATCH: Final[tuple[str, ...]] = (
    ".wakeful/plots",
    ".wakeful/output",
    ".wakeful/matplotlib",
)
"""Folders under ``.wakeful`` that sandboxed code writes (the interpreter's plots and saved
output, matplotlib's cache); they stay writable inside the sandbox, and hold nothing the host
executes."""


def protected_reason(relative: PurePosixPath | str) -> str | None:
    """Why the path (relative to the root, already normalised and resolved) may not be written.

    None when it may. Names are compared case-insensitively, so a case-insensitive file system
    cannot be used to reach `.GIT/config`.
    """
    parts = PurePosixPath(relative).parts
    if not parts:
        return None
    first = parts[0].casefold()
    for name, reason in AT_ROOT.items():
        if first == name:
            return f"{name!r} is protected: {reason}"
    for part in parts:
        folded = part.casefold()
        for name, reason in ANY_DEPTH.items():
            if folded == name:
                return f"{name!r} is protected: {reason}"
    return None


def refusal(shown: str, reason: str) -> str:
    """The error text a tool returns for a protected path, with the way out."""
    return (
        f"{shown!r} cannot be written by the agent: {reason}, and a change there would run "
        "or trust code on the host. Ask the user to make this change themselves."
    )
