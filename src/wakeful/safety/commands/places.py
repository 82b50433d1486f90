"""Where a path a command names lies: the workspace, a writable scratch place, the home
directory, a system directory, a device, or a store of secrets.

Paths are resolved the way the command would see them: relative to the command's directory,
`~` and `$HOME` as the home directory, and symlinks followed (`os.path.realpath`, no subprocess),
so `ln -s / root; rm -rf root/` is judged by where `root/` really leads. A glob (`/etc/*`) is
judged by the directory its matches live in.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from enum import Enum
from pathlib import PurePosixPath
from typing import Final

from .words import Word

__all__ = ["Location", "Place", "Places"]

_SYSTEM_DIRS: Final = frozenset(
    {
        "/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/opt",
        "/proc", "/root", "/run", "/sbin", "/srv", "/sys", "/usr", "/var", "/home", "/mnt",
        "/media", "/snap", "/nix", "/System", "/Library", "/Applications", "/private",
        "/Users", "/Volumes", "/cores",
    }
)  # fmt: skip
_HARMLESS_DEVICES: Final = frozenset(
    {
        "/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty",
        "/dev/stdin", "/dev/stdout", "/dev/stderr",
    }
)  # fmt: skip
_HARMLESS_DEVICE_DIRS: Final = ("/dev/fd/", "/dev/pts/")
# Under the home directory: reading these hands over credentials.
_HOME_CREDENTIALS: Final = (
    ".aws/credentials", ".gnupg", ".netrc", ".git-credentials", ".docker/config.json",
    ".kube/config", ".config/gcloud", ".azure", ".pypirc", ".npmrc", ".config/gh/hosts.yml",
    ".password-store", ".vault-token",
)  # fmt: skip
_SYSTEM_CREDENTIALS: Final = frozenset({"/etc/shadow", "/etc/gshadow", "/etc/sudoers"})
_SSH_PUBLIC_NAMES: Final = frozenset({"known_hosts", "config", "authorized_keys"})
_PRIVATE_KEY_NAMES: Final = frozenset({"id_rsa", "id_dsa", "id_ecdsa", "id_ed25519"})


class Place(Enum):
    """Kinds of places, from the most to the least protected."""

    ROOT = "the filesystem root"
    HOME = "the home directory"
    DEVICE = "a device"
    SECRET = "a store of secrets"
    SYSTEM = "a system path"
    OUTSIDE = "outside the workspace"
    WORKSPACE_ROOT = "the workspace itself"
    WORKSPACE = "inside the workspace"
    SCRATCH = "a writable scratch directory"
    HARMLESS_DEVICE = "a harmless device"


@dataclass(frozen=True, slots=True)
class Location:
    """The resolved `path` (None when it cannot be known statically) and its `place`."""

    path: str | None
    place: Place | None

    @property
    def known(self) -> bool:
        return self.path is not None


class Places:
    """Classifies paths for one check: the workspace, the current directory (None once a `cd`
    went somewhere only the running shell knows), the home directory and scratch directories."""

    def __init__(
        self, workspace: str, cwd: str | None, home: str, scratch: tuple[str, ...]
    ) -> None:
        self.workspace = os.path.realpath(workspace)
        self.cwd = os.path.realpath(cwd) if cwd is not None else None
        self.home = os.path.realpath(home)
        self.scratch = tuple(os.path.realpath(s) for s in scratch)

    def path_of(self, value: str) -> str | None:
        """`value` as an absolute, normalised, symlink-resolved path; None if it is relative and
        the current directory is unknown."""
        text = value.replace("${HOME}", self.home)
        if "${PWD}" in text:
            if self.cwd is None:
                return None
            text = text.replace("${PWD}", self.cwd)
        if not text.startswith("/"):
            if self.cwd is None:
                return None
            text = os.path.join(self.cwd, text)
        return os.path.realpath(text)

    def locate(self, word: Word) -> Location:
        """Where the word's path lies; for a glob, where the directory its matches share lies."""
        if word.value is None or word.value == "":
            return Location(None, None)
        value = word.value
        if word.glob:
            value = _glob_base(value)
            path = self.path_of(value)
            if path is None:
                return Location(None, None)
            # Matching everything under the root or home is as bad as naming them.
            if path == "/" or path == self.home:
                return Location(path, self.classify(path))
            if path == self.workspace:
                return Location(path, Place.WORKSPACE)
            return Location(path, self.classify(os.path.join(path, "*")))
        path = self.path_of(value)
        return Location(path, self.classify(path) if path is not None else None)

    def classify(self, path: str) -> Place:
        if path == "/":
            return Place.ROOT
        if path == self.home:
            return Place.HOME
        if path in _HARMLESS_DEVICES or path.startswith(_HARMLESS_DEVICE_DIRS):
            return Place.HARMLESS_DEVICE
        if path.startswith("/dev/"):
            return Place.DEVICE
        if self._is_secret(path):
            return Place.SECRET
        if path == self.workspace:
            return Place.WORKSPACE_ROOT
        if _is_under(path, self.workspace):
            return Place.WORKSPACE
        if any(path == s or _is_under(path, s) for s in self.scratch):
            return Place.SCRATCH
        if _is_under(path, self.home):
            return Place.OUTSIDE
        if path in _SYSTEM_DIRS or any(_is_under(path, d) for d in _SYSTEM_DIRS):
            return Place.SYSTEM
        return Place.OUTSIDE

    def _is_secret(self, path: str) -> bool:
        if path in _SYSTEM_CREDENTIALS or path.startswith("/etc/ssh/ssh_host_"):
            return not path.endswith(".pub")
        name = PurePosixPath(path).name
        inside = path == self.workspace or _is_under(path, self.workspace)
        if not inside and (name == ".env" or name.startswith(".env.")):
            return True
        if not inside and name in _PRIVATE_KEY_NAMES:
            return True
        ssh = os.path.join(self.home, ".ssh")
        if _is_under(path, ssh):
            return name not in _SSH_PUBLIC_NAMES and not name.endswith(".pub")
        return any(
            path == (p := os.path.join(self.home, c)) or _is_under(path, p)
            for c in _HOME_CREDENTIALS
        )


def _is_under(path: str, directory: str) -> bool:
    return path.startswith(directory.rstrip("/") + "/")


def _glob_base(value: str) -> str:
    """The directory part before the first glob or brace character (`/etc/pa*` → `/etc`)."""
    cut = min((value.index(c) for c in "*?[{" if c in value), default=len(value))
    head = value[:cut]
    if cut == len(value) or head.endswith("/"):
        return head.rstrip("/") or ("/" if head.startswith("/") else ".")
    return os.path.dirname(head) or "."
