"""Where a write lands and how: a place beneath the root, and an atomic replace inside it.

The file's directory is resolved beneath the root and held open (see
:meth:`wakeful.safety.beneath.Root.place`); everything after that happens by name *in that
directory's descriptor*: the current bytes are read with O_NOFOLLOW, a temporary file is created
there with O_CREAT | O_EXCL | O_NOFOLLOW, and renamed over the name (`renameat`), keeping the
file's mode. With `replace=False` a hard link (`linkat`) puts it in place instead, so a file that
appeared at the last moment is never overwritten. Missing directories are made one at a time
with `mkdirat` and reopened with O_NOFOLLOW. No step looks the path up from the root again, so a
directory swapped for a symlink meanwhile cannot send the write out of the root.

Paths the host later runs or trusts (:mod:`wakeful.safety.protected`) are refused here, on the
path relative to the root after resolution, before anything is created.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat

from ...errors import ToolError
from ...safety.beneath import READ, Opened, Placement, Root
from ...safety.protected import protected_reason, refusal

_LISTED_MATCHES = 20
MAX_FILE_BYTES = 10 * 1024 * 1024
"""The largest file write_file writes or edit_file edits."""


def writable_target(
    root: Root, user_path: str, create_dirs: bool, *, create_option: str = "create_dirs"
) -> Placement:
    """Where a write to `user_path` lands, its directory held open (close it with `with`).

    The file need not exist; its directory must, unless `create_dirs` (the tool's option named
    `create_option`, for the error message) allows creating it, which :func:`write_atomically`
    does. Paths that leave the root, also through symlinks, and protected paths (``.git``,
    ``.wakeful``, ``wakeful.toml`` …) are refused with a ToolError. Blocks: call it in a thread.
    """
    place = root.place(user_path)
    try:
        refuse_protected(place)
        if place.missing and not create_dirs:
            missing_dir = place.relative.parent.as_posix()
            raise ToolError(
                f"The directory {missing_dir!r} does not exist, so {user_path!r} cannot be "
                f"written. Pass {create_option}=true to create it, or check the path with list_dir."
            )
    except BaseException:
        place.close()
        raise
    return place


def refuse_protected(place: Placement) -> None:
    """ToolError when the resolved path is one the agent may not write (see `.protected`)."""
    reason = protected_reason(place.relative)
    if reason is not None:
        raise ToolError(refusal(place.shown, reason))


def open_existing(place: Placement) -> Opened | None:
    """The placed file as it is now, opened to read in its directory (O_NOFOLLOW); None if
    there is none. ToolError when it cannot be read or became a symlink since it was placed."""
    if place.missing:
        return None
    try:
        fd = os.open(place.name, READ | os.O_NOFOLLOW, dir_fd=place.directory)
    except FileNotFoundError:
        return None
    except PermissionError as exc:
        raise ToolError(
            f"{place.shown!r} cannot be read: permission denied, so it cannot be replaced "
            "safely. Write another file."
        ) from exc
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ToolError(
                f"{place.shown!r} was replaced by a symlink while it was being written, so "
                "nothing was written. Check it with list_dir and try again."
            ) from exc
        raise
    return Opened(fd, place.relative)


def existing_bytes(place: Placement, shown_path: str) -> bytes | None:
    """The file's current bytes, None if there is none; ToolError for what is not a file."""
    file = open_existing(place)
    if file is None:
        return None
    with file:
        fd = file.fd
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise ToolError(
                f"{shown_path!r} is a directory; write_file writes files. Give a file path "
                "inside it, e.g. its path plus '/name.txt'."
            )
        if not stat.S_ISREG(info.st_mode):
            raise ToolError(
                f"{shown_path!r} is not a regular file (a device, socket or pipe); write_file "
                "writes regular files only. Choose another path."
            )
        if info.st_size > MAX_FILE_BYTES:
            raise ToolError(
                f"{shown_path} is {info.st_size:,} bytes, over the {MAX_FILE_BYTES:,}-byte limit "
                "of these tools. Change it with a shell command or a program instead."
            )
        return file.read_bytes()


def write_atomically(place: Placement, data: bytes, *, replace: bool = True) -> None:
    """Put `data` in the placed file at once: a temporary file beside it, then a rename over it.

    Missing directories are created first. An existing file keeps its permission bits; a new
    one gets the umask's. With `replace=False` an existing file is never touched, even one that
    appears between a check and this call (ToolError). Raises ToolError when the directory
    cannot be written.
    """
    if place.missing:
        place.make_directories()
    directory = place.directory
    try:
        info = os.stat(place.name, dir_fd=directory, follow_symlinks=False)
        mode = stat.S_IMODE(info.st_mode) if stat.S_ISREG(info.st_mode) else None
    except FileNotFoundError:
        mode = None
    try:
        temporary, handle = _create_temporary(directory)
    except PermissionError as exc:
        raise ToolError(
            f"The directory {place.relative.parent.as_posix()!r} cannot be written: permission "
            "denied. Write somewhere else under the root."
        ) from exc
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
            if mode is not None:
                os.fchmod(file.fileno(), mode)
        if replace:
            os.replace(temporary, place.name, src_dir_fd=directory, dst_dir_fd=directory)
        else:
            try:
                # Fails, atomically, if the name exists (even as a symlink, which is not followed).
                os.link(
                    temporary,
                    place.name,
                    src_dir_fd=directory,
                    dst_dir_fd=directory,
                    follow_symlinks=False,
                )
            except FileExistsError as exc:
                raise ToolError(
                    f"{place.name!r} appeared while it was being written and overwrite is "
                    "false, so it was left alone. Pass overwrite=true to replace it."
                ) from exc
            finally:
                os.unlink(temporary, dir_fd=directory)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):  # the link branch removed it already
            os.unlink(temporary, dir_fd=directory)
        raise


def _create_temporary(directory: int) -> tuple[str, int]:
    # O_EXCL with mode 0o666 lets the umask decide a new file's permissions, as any editor would;
    # O_NOFOLLOW (implied by O_EXCL, stated anyway) never writes through a planted symlink.
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    while True:
        temporary = f".wakeful-{secrets.token_hex(6)}.tmp"
        try:
            handle = os.open(temporary, flags, 0o666, dir_fd=directory)
        except FileExistsError:
            continue
        return temporary, handle
