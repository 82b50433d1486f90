"""Where a write lands and how: a confined target under the root, and an atomic replace.

A write goes to a temporary file in the same directory, then `os.replace`, keeping the file's
mode; with `replace=False` a hard link puts it in place, so a file that appeared at the last
moment is never overwritten.
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path, PurePath

import anyio

from ...errors import ToolError
from ...safety.paths import confine, display_path
from ...tools.spec import ToolContext
from ..perception.workspace import workspace_root

_LISTED_MATCHES = 20
MAX_FILE_BYTES = 10 * 1024 * 1024
"""The largest file write_file writes or edit_file edits."""


async def writable_target(
    ctx: ToolContext, user_path: str, create_dirs: bool, *, create_option: str = "create_dirs"
) -> tuple[Path, Path, bool]:
    """The resolved root, the file to write, and whether its directory has to be created.

    The file need not exist; its directory must, unless `create_dirs` (the tool's option named
    `create_option`, for the error message) allows creating it. Paths that leave the root,
    also through symlinks, are refused as :func:`wakeful.safety.paths.confine` refuses them.
    """
    root = workspace_root(ctx)

    def locate() -> tuple[Path, Path, bool]:
        real_root = root.resolve(strict=True)
        joined = Path(user_path) if Path(user_path).is_absolute() else real_root / user_path
        lexical = Path(os.path.normpath(joined))
        if lexical != real_root and not lexical.is_relative_to(real_root):
            raise ToolError(
                f"The path {user_path!r} leads outside the root {str(real_root)!r}, and only "
                "files under the root can be written. Give a path relative to the root, e.g. "
                "'src/app.py', without '..' steps that climb above it."
            )
        if os.path.lexists(lexical):
            target = confine(root, user_path)  # follows symlinks, refuses ones that leave
            return real_root, target, False
        # A new file: its directory (or the nearest existing one above) must be under the root.
        name = PurePath(user_path).name
        if name in ("", ".", ".."):
            raise ToolError(
                f"The path {user_path!r} names no file. Give a file path, e.g. 'src/app.py'."
            )
        parent_text = str(PurePath(user_path).parent)
        existing = lexical.parent
        while not os.path.lexists(existing):
            existing = existing.parent
        # Checked through `confine` with the user's own spelling of the directory part, so
        # encoded traversal and symlinks out of the root are refused the same way as for reads.
        confine(root, parent_text if existing == lexical.parent else str(existing))
        resolved_existing = existing.resolve(strict=True)
        if not resolved_existing.is_dir():
            raise ToolError(
                f"{display_path(resolved_existing, real_root)!r} is a file, so {user_path!r} "
                "cannot be created under it. Choose a path whose parent is a directory."
            )
        missing = existing != lexical.parent
        if missing and not create_dirs:
            missing_dir = joined_display(str(PurePath(user_path).parent), real_root)
            raise ToolError(
                f"The directory {missing_dir!r} does not exist, so {user_path!r} cannot be "
                f"written. Pass {create_option}=true to create it, or check the path with list_dir."
            )
        target = resolved_existing / lexical.relative_to(existing)
        return real_root, target, missing

    try:
        return await anyio.to_thread.run_sync(locate)
    except FileNotFoundError as exc:
        raise ToolError(
            f"The root directory {str(root)!r} no longer exists, so {ctx.tool_name} cannot "
            "work. Restart the server with an existing --root."
        ) from exc


def joined_display(user_path: str, root: Path) -> str:
    joined = Path(user_path) if Path(user_path).is_absolute() else root / user_path
    return display_path(Path(os.path.normpath(joined)), root)


def existing_bytes(target: Path, shown_path: str) -> bytes | None:
    """The file's current bytes, None if there is none; ToolError for what is not a file."""
    try:
        info = os.stat(target)
    except FileNotFoundError:
        return None
    if stat.S_ISDIR(info.st_mode):
        raise ToolError(
            f"{shown_path!r} is a directory; write_file writes files. Give a file path inside "
            "it, e.g. its path plus '/name.txt'."
        )
    if not stat.S_ISREG(info.st_mode):
        raise ToolError(
            f"{shown_path!r} is not a regular file (a device, socket or pipe); write_file writes "
            "regular files only. Choose another path."
        )
    if info.st_size > MAX_FILE_BYTES:
        raise ToolError(
            f"{shown_path} is {info.st_size:,} bytes, over the {MAX_FILE_BYTES:,}-byte limit of "
            "these tools. Change it with a shell command or a program instead."
        )
    try:
        return target.read_bytes()
    except PermissionError as exc:
        raise ToolError(
            f"{shown_path!r} cannot be read: permission denied, so it cannot be replaced "
            "safely. Write another file."
        ) from exc


def write_atomically(target: Path, data: bytes, *, replace: bool = True) -> None:
    """Put `data` in `target` at once: a temporary file beside it, then a rename over it.

    An existing file keeps its permission bits; a new one gets the umask's. With
    `replace=False` an existing file is never touched (FileExistsError), even one that appears
    between a check and this call. Raises ToolError when the directory cannot be written.
    """
    directory = target.parent
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        mode = None
    try:
        temporary, handle = _create_temporary(directory)
    except PermissionError as exc:
        raise ToolError(
            f"The directory {str(directory)!r} cannot be written: permission denied. Write "
            "somewhere else under the root."
        ) from exc
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
            if mode is not None:
                os.fchmod(file.fileno(), mode)
        if replace:
            os.replace(temporary, target)
        else:
            try:
                os.link(temporary, target)  # fails, atomically, if the target exists
            except FileExistsError as exc:
                raise ToolError(
                    f"{target.name!r} appeared while it was being written and overwrite is "
                    "false, so it was left alone. Pass overwrite=true to replace it."
                ) from exc
            finally:
                os.unlink(temporary)
    except BaseException:
        if os.path.lexists(temporary):
            os.unlink(temporary)
        raise


def _create_temporary(directory: Path) -> tuple[Path, int]:
    # O_EXCL with mode 0o666 lets the umask decide a new file's permissions, as any editor would.
    while True:
        temporary = directory / f".wakeful-{secrets.token_hex(6)}.tmp"
        try:
            handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue
        return temporary, handle


# --- edit_file ---------------------------------------------------------------------------------
