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
from fnmatch import fnmatchcase
from pathlib import PurePosixPath
from typing import Final

from .words import HOME_MARK, PWD_MARK, Word

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
    ".password-store", ".vault-token", ".bash_history", ".zsh_history", ".python_history",
    ".psql_history", ".mysql_history", ".node_repl_history", ".config/hub", ".cargo/credentials",
    ".cargo/credentials.toml", ".gem/credentials", ".terraform.d/credentials.tfrc.json",
    ".config/op", ".local/share/keyrings", ".mozilla", ".config/google-chrome",
)  # fmt: skip
_SYSTEM_CREDENTIALS: Final = frozenset(
    {"/etc/shadow", "/etc/gshadow", "/etc/sudoers", "/etc/shadow-", "/etc/gshadow-"}
)
_SYSTEM_SECRET_DIRS: Final = (
    "/run/secrets",
    "/var/run/secrets",
    "/etc/sudoers.d",
    "/etc/ssl/private",
)
# Per-process files that hold the environment (tokens), memory or the command line.
_PROC_SECRETS: Final = frozenset({"environ", "mem", "cmdline", "auxv", "maps", "pagemap"})
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
        text = value.replace(HOME_MARK, self.home)
        if PWD_MARK in text:
            if self.cwd is None:
                return None
            text = text.replace(PWD_MARK, self.cwd)
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
            base, rest = _glob_split(value, word.glob_at)
            if ".." in rest.split("/"):
                return Location(None, None)  # `build/*/../..`: the pattern climbs past its base
            path = self.path_of(base)
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

    def may_match_secret(self, word: Word) -> bool:
        """Whether a glob word's pattern matches a store of secrets (`~/.ssh/id_*`,
        `/proc/*/environ`)."""
        if not word.glob or word.value is None:
            return False
        pattern = self.path_of(word.value.replace(HOME_MARK, self.home))
        if pattern is None:
            return False
        examples = [
            os.path.join(self.home, c)
            for c in (*_HOME_CREDENTIALS, ".ssh/id_rsa", ".ssh/id_ed25519")
        ]
        examples += [*_SYSTEM_CREDENTIALS, "/proc/1/environ", "/proc/self/environ", "/proc/1/mem"]
        return any(fnmatchcase(example, pattern) for example in examples)

    def holds_secrets(self, path: str) -> bool:
        """Whether the directory `path` holds a store of secrets somewhere below it (the root,
        the home directory, `/etc`, `~/.ssh`, …): reading it all reads them."""
        inside = [os.path.join(self.home, c) for c in (*_HOME_CREDENTIALS, ".ssh")]
        inside += ["/etc/shadow", "/root", "/proc", *_SYSTEM_SECRET_DIRS]
        return any(p == path or _is_under(p, path) for p in inside)

    def holds_secrets_directly(self, path: str) -> bool:
        """Whether `path` is a directory of credentials itself (`~/.aws`, `~/.ssh`)."""
        stores = [os.path.join(self.home, c) for c in (*_HOME_CREDENTIALS, ".ssh/id_rsa")]
        return any(
            os.path.dirname(p) == path and path != self.home for p in stores
        ) or self._is_secret(path)

    def _is_secret(self, path: str) -> bool:
        if path in _SYSTEM_CREDENTIALS or path.startswith("/etc/ssh/ssh_host_"):
            return not path.endswith(".pub")
        if any(path == d or _is_under(path, d) for d in _SYSTEM_SECRET_DIRS):
            return True
        if path.startswith("/proc/"):
            pieces = path.split("/")
            if len(pieces) >= 4 and pieces[-1] in _PROC_SECRETS:
                return True
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


def _glob_split(value: str, glob_at: int) -> tuple[str, str]:
    """The directory part before the pattern (`/etc/pa*` → `/etc`) and the rest, cut where the
    first unquoted glob character is (or, not knowing it, the first glob character)."""
    cut = glob_at
    if cut < 0:
        cut = min((value.index(c) for c in "*?[" if c in value), default=len(value))
    head = value[:cut]
    rest = value[cut:]
    if cut == len(value) or head.endswith("/"):
        return head.rstrip("/") or ("/" if head.startswith("/") else "."), rest
    directory = os.path.dirname(head)
    return directory or ".", value[len(directory) :]
