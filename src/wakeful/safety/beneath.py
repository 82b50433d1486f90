"""Opening paths beneath a root by descriptor, so the path that was checked is the file opened.

Checking a path and then opening it by name again is a race: between the two, a directory on the
way can be swapped for a symlink to the host (`renameat2(RENAME_EXCHANGE)` does it atomically),
and the open follows it. So nothing here opens by name after checking. :class:`Root` opens the
root once as a directory descriptor, and every path is resolved relative to it, in one step:

- with ``openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`` where the kernel has it (Linux 5.6):
  the kernel follows symlinks and ``..`` but fails (EXDEV) any step that would leave the root;
- otherwise, and for the symlinks ``openat2`` will not follow (absolute ones, even those that
  point back under the root), by a walk: one ``openat(O_PATH | O_NOFOLLOW)`` per component from
  the directory descriptor held for the one before, a symlink read with ``readlinkat`` and its
  target walked the same way from the root's descriptor, ``..`` popping a held descriptor. The
  walk never names a path outside the root to the kernel, so no swap can send it there.

Symlinks that stay under the root keep working (``current -> releases/v2``). What a path
resolved to is reported relative to the root (:attr:`Opened.relative`): the walk knows the names
it took; after ``openat2`` the kernel's name for the descriptor (``/proc/self/fd/N``) says it.
That resolved path is what :mod:`.protected` checks and what the tools show.

A write (:meth:`Root.place`) resolves the directory the file goes in and keeps it open; the file
is then created, replaced and renamed by name *in that descriptor* (see
:mod:`wakeful.toolkits.execution.file_targets`), and missing directories are made one at a time
with ``mkdirat`` and reopened with ``O_NOFOLLOW``.

Before any of this, :func:`wakeful.safety.paths.refuse_encoded_tricks` refuses NUL bytes and
percent-encoded traversal, and a lexical check refuses ``..`` and absolute paths that leave the
root, with the same messages as :func:`wakeful.safety.paths.confine`.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import stat
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from types import TracebackType
from typing import Final, Self

from ..errors import ToolError
from .paths import refuse_encoded_tricks

READ: Final = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
"""Flags to open a file or directory to read it. O_NONBLOCK: opening a FIFO does not hang (the
tools then refuse it as not a regular file); it changes nothing for regular files."""
LOCATE: Final = os.O_PATH | os.O_CLOEXEC
"""Flags to hold a place in the tree (stat it, use it as a directory descriptor), not read it."""
_DIRECTORY: Final = os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC

_RESOLVE_NO_MAGICLINKS: Final = 0x02
_RESOLVE_BENEATH: Final = 0x08
_SYS_OPENAT2: Final = 437  # the same number on x86_64 and aarch64
_MAX_SYMLINKS: Final = 40  # as the kernel's MAXSYMLINKS
_RETRIES: Final = 5

use_openat2: bool = True
"""Whether to use openat2 when the kernel has it. Tests turn it off to exercise the walk."""


class _OpenHow(ctypes.Structure):
    _fields_ = (
        ("flags", ctypes.c_uint64),
        ("mode", ctypes.c_uint64),
        ("resolve", ctypes.c_uint64),
    )


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _openat2(dir_fd: int, path: str, flags: int) -> int:
    how = _OpenHow(flags, 0, _RESOLVE_BENEATH | _RESOLVE_NO_MAGICLINKS)
    fd = int(
        _libc.syscall(
            _SYS_OPENAT2,
            ctypes.c_int(dir_fd),
            ctypes.c_char_p(os.fsencode(path)),
            ctypes.byref(how),
            ctypes.c_size_t(ctypes.sizeof(how)),
        )
    )
    if fd < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), path)
    return fd


def _probe_openat2() -> bool:
    # ENOSYS on kernels before 5.6; EPERM or ENOSYS where a seccomp filter forbids it.
    root = os.open("/", _DIRECTORY)
    try:
        fd = _openat2(root, ".", _DIRECTORY)
    except OSError:
        return False
    finally:
        os.close(root)
    os.close(fd)
    return True


_kernel_has_openat2: bool | None = None


def openat2_available() -> bool:
    """Whether openat2 is used: the kernel has it and :data:`use_openat2` is on."""
    global _kernel_has_openat2
    if not use_openat2:
        return False
    if _kernel_has_openat2 is None:
        _kernel_has_openat2 = _probe_openat2()
    return _kernel_has_openat2


class _Escape(Exception):
    """The walk was sent outside the root: by `..` above it or by a symlink."""


class _HoldsDescriptor:
    """Holds one descriptor, `fd`, until :meth:`close` (or the end of a `with` block)."""

    fd: int

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


@dataclass
class Opened(_HoldsDescriptor):
    """A file or directory opened beneath the root, and the path it resolved to."""

    fd: int
    relative: PurePosixPath
    """Where it is, relative to the root, after every symlink and '..' ('.' is the root)."""

    @property
    def shown(self) -> str:
        """The path as the tools show it: relative to the root, '.' for the root itself."""
        return self.relative.as_posix()

    def regular_file(self, *, limit: int, not_regular: str, too_big: str) -> os.stat_result:
        """The opened file's status, checked to be a regular file of at most `limit` bytes.

        Otherwise a ToolError with `not_regular` or `too_big`, each a format string that may
        name `{shown}` (the path), `{size}` and `{limit}`: every tool says it its own way.
        """
        info = os.fstat(self.fd)
        if not stat.S_ISREG(info.st_mode):
            raise ToolError(not_regular.format(shown=self.shown))
        if info.st_size > limit:
            raise ToolError(too_big.format(shown=self.shown, size=info.st_size, limit=limit))
        return info

    def read_bytes(self) -> bytes:
        """The rest of the opened file's bytes (all of them, on a descriptor just opened)."""
        with os.fdopen(self.fd, "rb", closefd=False) as file:
            return file.read()


@dataclass
class Placement:
    """Where a file is to be written: a directory held open beneath the root, and a name in it.

    `missing` are directories still to be made under `directory` (see
    :meth:`make_directories`); until then `directory` is the deepest one that exists.
    """

    directory: int
    name: str
    relative: PurePosixPath
    """Where the file lands, relative to the root, after every symlink and '..'."""
    missing: tuple[str, ...] = ()
    _closed: bool = field(default=False, repr=False)

    @property
    def shown(self) -> str:
        return self.relative.as_posix()

    def make_directories(self) -> None:
        """Create the missing directories, one `mkdirat` at a time, each reopened O_NOFOLLOW."""
        for name in self.missing:
            # Made meanwhile (FileExistsError) is fine: it is opened below without following a
            # symlink, so only a real directory is taken.
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, 0o777, dir_fd=self.directory)
            try:
                made = os.open(name, _DIRECTORY | os.O_NOFOLLOW, dir_fd=self.directory)
            except OSError as exc:
                raise ToolError(
                    f"The directory {name!r} on the way to {self.shown!r} was replaced by "
                    f"something that is not a directory ({exc.strerror or exc}) while it was "
                    "being created. Check the path with list_dir and try again."
                ) from exc
            os.close(self.directory)
            self.directory = made
        self.missing = ()

    def close(self) -> None:
        if not self._closed:
            os.close(self.directory)
            self._closed = True

    def __enter__(self) -> Placement:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


class Root(_HoldsDescriptor):
    """A root directory held open by descriptor; paths given to it never lead out of it.

    Open it for one call (it is cheap: one `open`) and close it after, with `with`. The root
    path itself is trusted: it may be a symlink (it is resolved once, here).
    """

    def __init__(self, path: Path) -> None:
        self.path = path.resolve(strict=True)  # FileNotFoundError: the root is gone
        self.fd = os.open(self.path, _DIRECTORY)
        self._text = str(self.path)

    # --- opening --------------------------------------------------------------------------------

    def open(self, user_path: str, flags: int = READ) -> Opened:
        """The existing file or directory `user_path` names beneath the root, opened with `flags`.

        `user_path` is relative to the root or absolute inside it; '' and '.' are the root.
        ToolError, naming the path and the way out, for a path that leaves the root (by '..',
        as an absolute path, or through a symlink), that does not exist, or cannot be opened.
        """
        parts = self.relative_parts(user_path)
        try:
            return self._resolve(parts, flags)
        except OSError as exc:
            raise self._refusal(user_path, exc) from exc

    def open_found(self, relative: str, flags: int = READ) -> Opened:
        """Like :meth:`open`, for a path the tool found under the root (a listed symlink).

        OSError instead of ToolError: EXDEV when it leads out of the root.
        """
        return self._resolve(self._split(relative), flags)

    def resolved(self, relative: str) -> PurePosixPath | None:
        """Where a path under the root leads (a symlink, say), or None if it leaves or is broken."""
        try:
            opened = self.open_found(relative, LOCATE)
        except OSError:
            return None
        opened.close()
        return opened.relative

    def relative_parts(self, user_path: str) -> list[str]:
        """The components of `user_path` relative to the root, refused if they leave it lexically.

        The components are not normalised: '..' is resolved by the kernel or the walk, after
        the symlink before it (so `link/..` is the link target's parent, as for any program).
        """
        refuse_encoded_tricks(user_path, self.path)
        candidate = Path(user_path) if user_path else Path(".")
        joined = candidate if candidate.is_absolute() else self.path / candidate
        # Checked lexically first, so a missing file behind `..` is reported as an escape, not as
        # "not found" (which would confirm or deny files outside the root).
        lexical = Path(os.path.normpath(joined))
        if lexical != self.path and not lexical.is_relative_to(self.path):
            raise self._outside(user_path)
        if candidate.is_absolute():
            prefix = self._text.rstrip("/") + "/"
            if not user_path.startswith(prefix):
                # Spelt another way ('/root/../root/x'): the part after the root, as checked.
                return list(lexical.relative_to(self.path).parts)
            parts = self._split(user_path[len(prefix) :])
        else:
            parts = self._split(user_path)
        # A '..' that climbs above the root on the way ('../root/x') leaves it even when the
        # path comes back: refused as an escape here, not later as a symlink that leads out.
        depth = 0
        for part in parts:
            depth += -1 if part == ".." else 1
            if depth < 0:
                raise self._outside(user_path)
        return parts

    def _outside(self, user_path: str) -> ToolError:
        return ToolError(
            f"The path {user_path!r} leads outside the root {self._text!r}, and only files "
            "under the root can be used. Give a path relative to the root, e.g. "
            "'src/app.py', without '..' steps that climb above it."
        )

    # --- writing --------------------------------------------------------------------------------

    def place(self, user_path: str) -> Placement:
        """Where a file written to `user_path` lands: its directory held open, and its name.

        The file need not exist. Its directory need not either: then the placement's
        `directory` is the deepest existing one and `missing` lists the rest. A final symlink is
        followed (the write replaces what it points to, under the root), as an editor does.
        ToolError for paths that leave the root, a directory in the way that is a file, and
        a path that names a directory (the root, '.', '..').
        """
        parts = self.relative_parts(user_path)
        try:
            return self._place(user_path, parts)
        except OSError as exc:
            raise self._refusal(user_path, exc) from exc

    def _place(self, user_path: str, parts: list[str]) -> Placement:
        for _ in range(_MAX_SYMLINKS):
            parts = [p for p in parts if p not in ("", ".")]
            if not parts or parts[-1] == "..":
                # The path names a directory; resolve it, and let the caller find it is one.
                with self._resolve(parts, LOCATE) as found:
                    parts = list(found.relative.parts)
                if not parts:
                    raise ToolError(
                        f"{user_path!r} is a directory (the root itself), not a file. Give a "
                        "file path under the root, e.g. 'notes.txt'."
                    )
            *above, name = parts
            directory, missing = self._deepest_directory(user_path, above)
            relative = directory.relative.joinpath(*missing, name)
            if missing:
                return Placement(directory.fd, name, relative, tuple(missing))
            try:
                target = os.readlink(name, dir_fd=directory.fd)
            except OSError as exc:
                if exc.errno in (errno.EINVAL, errno.ENOENT):  # not a symlink, or not there
                    return Placement(directory.fd, name, relative)
                directory.close()
                raise
            directory.close()
            parts = self._link_parts(directory.relative, target)
        raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), user_path)

    def _deepest_directory(self, user_path: str, parts: list[str]) -> tuple[Opened, list[str]]:
        """The deepest existing directory on `parts`, opened, and the names below it."""
        for end in range(len(parts), -1, -1):
            try:
                found = self._resolve(parts[:end], LOCATE)
            except (FileNotFoundError, NotADirectoryError):
                continue  # a shorter prefix exists, or is the file in the way
            missing = parts[end:]
            if ".." in missing:
                found.close()
                raise ToolError(
                    f"The path {user_path!r} climbs with '..' out of a directory that does not "
                    "exist. Give the path without '..', e.g. 'src/app.py'."
                )
            if not stat.S_ISDIR(os.fstat(found.fd).st_mode):
                found.close()
                raise ToolError(
                    f"{found.shown!r} is a file, so {user_path!r} cannot be created under it. "
                    "Choose a path whose parent is a directory."
                )
            return found, missing
        raise FileNotFoundError(errno.ENOENT, "the root is gone", self._text)

    # --- resolution -----------------------------------------------------------------------------

    def _resolve(self, parts: list[str], flags: int) -> Opened:
        if openat2_available():
            relative = "/".join(parts) or "."
            for _ in range(_RETRIES):
                try:
                    fd = _openat2(self.fd, relative, flags)
                except OSError as exc:
                    if exc.errno == errno.EAGAIN:  # a rename elsewhere raced a '..'; try again
                        continue
                    if exc.errno in (errno.EXDEV, errno.ELOOP):
                        # An absolute symlink (openat2 refuses them even when they point back
                        # under the root), a step out of it, or a loop: the walk tells which.
                        break
                    raise
                where = self._where(fd)
                if where is not None:
                    return Opened(fd, where)
                os.close(fd)  # no name from the kernel: the walk knows the names it takes
                break
        return self._walk(parts, flags)

    def _where(self, fd: int) -> PurePosixPath | None:
        """The kernel's name for an open descriptor, relative to the root; None if it has none."""
        try:
            text = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            return None
        if text == self._text:
            return PurePosixPath(".")
        prefix = self._text.rstrip("/") + "/"
        if not text.startswith(prefix) or text.endswith(" (deleted)"):
            return None
        return PurePosixPath(text[len(prefix) :])

    def _walk(self, parts: Iterable[str], flags: int) -> Opened:
        """Resolve `parts` one component at a time from the root's descriptor, never following
        a symlink in the kernel; OSError (EXDEV for a way out of the root) otherwise."""
        held: list[int] = []  # descriptors of the directories taken below the root
        names: list[str] = []
        pending = deque(parts)
        links = 0
        try:
            while True:
                while pending and pending[0] in ("", "."):
                    pending.popleft()
                here = held[-1] if held else self.fd
                if not pending:
                    fd = os.open(".", flags, dir_fd=here)
                    return Opened(fd, PurePosixPath(*names) if names else PurePosixPath("."))
                part = pending.popleft()
                if part == "..":
                    if not held:
                        raise _Escape
                    os.close(held.pop())
                    names.pop()
                    continue
                last = all(p in ("", ".") for p in pending)
                fd = os.open(part, LOCATE | os.O_NOFOLLOW, dir_fd=here)
                mode = os.fstat(fd).st_mode
                if stat.S_ISLNK(mode):
                    target = os.readlink("", dir_fd=fd)
                    os.close(fd)
                    links += 1
                    if links > _MAX_SYMLINKS:
                        raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), part)
                    if target.startswith("/"):
                        for held_fd in held:
                            os.close(held_fd)
                        held.clear()
                        names.clear()
                    pending.extendleft(reversed(self._link_parts(PurePosixPath(), target)))
                    continue
                if last:
                    if flags & os.O_PATH == 0 or flags & os.O_DIRECTORY:
                        # Reopened by name in the same directory, O_NOFOLLOW: if it was swapped
                        # for a symlink meanwhile, this fails instead of following it.
                        os.close(fd)
                        fd = os.open(part, flags | os.O_NOFOLLOW, dir_fd=here)
                    return Opened(fd, PurePosixPath(*names, part))
                if not stat.S_ISDIR(mode):
                    os.close(fd)
                    raise OSError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), part)
                held.append(fd)
                names.append(part)
        except _Escape:
            raise OSError(errno.EXDEV, "leads outside the root", "/".join(parts)) from None
        finally:
            for held_fd in held:
                os.close(held_fd)

    def _link_parts(self, directory: PurePosixPath, target: str) -> list[str]:
        """A symlink's target as components from the root: relative ones from the directory
        the link is in, absolute ones only when they point under the root (else EXDEV)."""
        if target.startswith("/"):
            if target == self._text or target.startswith(self._text.rstrip("/") + "/"):
                return self._split(target[len(self._text) :])
            raise OSError(errno.EXDEV, "a symlink leads outside the root", target)
        return [*directory.parts, *self._split(target)]

    @staticmethod
    def _split(text: str) -> list[str]:
        return [p for p in text.split("/") if p not in ("", ".")]

    # --- errors ---------------------------------------------------------------------------------

    def _refusal(self, user_path: str, exc: OSError) -> ToolError:
        root = self._text
        if exc.errno == errno.EXDEV:
            return ToolError(
                f"The path {user_path!r} is a symlink (or goes through one) to a place outside "
                f"the root {root!r}, and only files under the root can be used. Use a file "
                "that lives under the root."
            )
        if exc.errno == errno.ENOENT:
            return ToolError(
                f"There is no file or directory {user_path!r} under the root {root!r}. Check "
                "the spelling, list the parent directory to see what is there, or search for "
                "the name."
            )
        if exc.errno == errno.ELOOP:
            return ToolError(
                f"The path {user_path!r} under the root {root!r} is a symlink loop (or was "
                "swapped for a symlink while it was opened) and names no file. Use another path."
            )
        return ToolError(
            f"The path {user_path!r} under the root {root!r} cannot be opened: "
            f"{exc.strerror or exc}. Use another path."
        )
