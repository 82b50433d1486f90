"""Path confinement: a path a model gives is only ever opened inside one root directory.

`confine` resolves the path strictly (every symlink followed, the path must exist) and checks the
result is the root or under it, so `..`, absolute paths, and symlinks that point elsewhere all
fail the same way. Before that it refuses what no honest path contains: NUL bytes, and
percent-encoded traversal (`%2e%2e%2f`) that a caller might decode later. A literal `%` in a name
is fine; only encodings that decode to `..`, a separator or NUL are refused.

What it does not do: guard against a directory on the way being swapped for a symlink between the
check and a later open by name. So the file tools do not open what `confine` returns: they open
beneath a root descriptor (:mod:`.beneath`), which checks and opens in one step. `confine` is for
a path handed on to another program as a path (a working directory for a sandboxed command).
"""

from __future__ import annotations

import os
import re
from pathlib import Path, PurePosixPath
from urllib.parse import unquote

from ..errors import ToolError

_PERCENT_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")
# Decoding twice catches `%252e%252e%252f` (encoded twice); a third layer is not a path any more.
_DECODE_ROUNDS = 3


def confine(root: Path, user_path: str) -> Path:
    """The existing path `user_path` names inside `root`, fully resolved; ToolError otherwise.

    `user_path` may be relative to the root (the usual form) or absolute, if it lies inside it.
    An empty path or "." is the root itself.
    """
    real_root = root.resolve(strict=True)
    refuse_encoded_tricks(user_path, real_root)
    candidate = Path(user_path) if user_path else Path(".")
    joined = candidate if candidate.is_absolute() else real_root / candidate
    # Check before resolving too, so a missing file behind `..` is reported as an escape, not
    # as "not found" (which would confirm or deny files outside the root).
    lexical = Path(os.path.normpath(joined))
    if not _is_inside(lexical, real_root):
        raise ToolError(
            f"The path {user_path!r} leads outside the root {str(real_root)!r}, and only files "
            "under the root can be used. Give a path relative to the root, e.g. 'src/app.py', "
            "without '..' steps that climb above it."
        )
    try:
        resolved = joined.resolve(strict=True)
    except FileNotFoundError as exc:
        raise ToolError(
            f"There is no file or directory {user_path!r} under the root {str(real_root)!r}. "
            "Check the spelling, list the parent directory to see what is there, or search "
            "for the name."
        ) from exc
    except RuntimeError as exc:  # a symlink loop
        raise ToolError(
            f"The path {user_path!r} under the root {str(real_root)!r} is a symlink loop and "
            "names no file. Use another path."
        ) from exc
    except OSError as exc:
        raise ToolError(
            f"The path {user_path!r} under the root {str(real_root)!r} cannot be opened: "
            f"{exc.strerror or exc}. Use another path."
        ) from exc
    if not _is_inside(resolved, real_root):
        raise ToolError(
            f"The path {user_path!r} is a symlink (or goes through one) to a place outside the "
            f"root {str(real_root)!r}, and only files under the root can be used. Use a file "
            "that lives under the root."
        )
    return resolved


def leaves_root(root: Path, user_path: str) -> str | None:
    """Why `user_path` leads outside `root`, judged on its text alone (no file is touched); None
    when it stays inside. For a check before anyone is asked about a call: the tool itself
    still resolves the path beneath the root (symlinks included) when it runs."""
    real_root = Path(os.path.abspath(root))
    joined = Path(user_path) if Path(user_path).is_absolute() else real_root / user_path
    if _is_inside(Path(os.path.normpath(joined)), real_root):
        return None
    return (
        f"The path {user_path!r} leads outside the root {str(real_root)!r}, and only files "
        "under the root can be used. Give a path relative to the root, e.g. 'src/app.py', "
        "without '..' steps that climb above it."
    )


def display_path(path: Path, root: Path) -> str:
    """How a confined path is shown to the model: relative to the root, '.' for the root.

    Both paths must be in the same form (resolved, as :func:`confine` returns them).
    """
    relative = path.relative_to(root)
    text = relative.as_posix()
    return text if text else "."


def _is_inside(path: Path, root: Path) -> bool:
    return path == root or path.is_relative_to(root)


def refuse_encoded_tricks(user_path: str, root: Path) -> None:
    """ToolError for a NUL byte, or percent-encoding that decodes to '..', a separator or NUL."""
    if "\x00" in user_path:
        raise ToolError(
            f"The path {user_path!r} contains a NUL byte, which no file name can hold. Give the "
            f"path as plain text, relative to the root {str(root)!r}, e.g. 'src/app.py'."
        )
    decoded = user_path
    for _ in range(_DECODE_ROUNDS):
        if not _PERCENT_ESCAPE.search(decoded):
            return
        decoded = unquote(decoded)
        adds_separator = decoded.count("/") > user_path.count("/") or decoded.count(
            "\\"
        ) > user_path.count("\\")
        if "\x00" in decoded or _climbs(decoded) or adds_separator:
            raise ToolError(
                f"The path {user_path!r} contains percent-encoded characters that decode to "
                f"{decoded!r}; encoded separators, '..' and NUL are refused. Give the path as "
                f"plain text, relative to the root {str(root)!r}, e.g. 'src/app.py'."
            )


def _climbs(text: str) -> bool:
    parts = PurePosixPath(text.replace("\\", "/")).parts
    return ".." in parts
