"""A root's files served as read-only MCP resources, confined like the file tools.

Each regular file under the root is a resource named by its `file://` URI (the absolute path,
percent-encoded), as the reference filesystem server and clients such as MCP Inspector expect.
Reading one opens it through :class:`~wakeful.safety.beneath.Root`, the same descriptor-based
confinement the file tools use: `..`, absolute paths elsewhere, percent-encoded traversal and
symlinks out of the root are refused, and so are the protected paths (`.git` at any depth,
`.wakeful`, `wakeful.toml`, `wakeful.lock.json`: see :mod:`wakeful.safety.protected`), which a
client has no business reading. Files over `MAX_RESOURCE_BYTES` are refused with the way to
read them in pages (read_file). Text (UTF-8 without NUL bytes) comes as text, anything else as
a base64 blob.

The listing walks the root in the file tools' fixed order (:mod:`..toolkits.perception.walk`,
skipping `.git`, `node_modules` and the like, not following symlinked directories), a page of
`PAGE_SIZE` at a time; the cursor is the position of the next entry. One resource template,
`file://<root>/{+path}`, names any file under the root, and its `path` argument is completed
by :mod:`.completions`.

Not declared: `resources/subscribe` and `list_changed`. Either needs the server to notice
changes under the root, which means a watcher (inotify is Linux-only, polling is costly on big
trees); a client re-lists when it wants a fresh view.
"""

from __future__ import annotations

import base64
import mimetypes
import os
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Final
from urllib.parse import quote, unquote, urlsplit

import anyio
import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from ..errors import ToolError
from ..safety.beneath import READ, Root
from ..safety.protected import protected_reason

PAGE_SIZE: Final = 100
"""Resources in one page of resources/list."""

MAX_RESOURCE_BYTES: Final = 2 * 1024 * 1024
"""The largest file resources/read returns whole; read_file pages through bigger ones."""

RESOURCE_NOT_FOUND: Final = -32002
"""The error code the MCP specification gives a resource that does not exist."""

TEMPLATE_ARGUMENT: Final = "path"
"""The one argument of the resource template: a path relative to the root."""


@dataclass(frozen=True, slots=True)
class FileResources:
    """The files under `root` as MCP resources: listing, reading, the template."""

    root: Path

    @property
    def prefix(self) -> str:
        """Every resource URI starts with this: `file://` and the root's absolute path, '/'."""
        return "file://" + quote(self.root.as_posix().rstrip("/")) + "/"

    def uri(self, relative: PurePosixPath | str) -> str:
        """The resource URI of a path relative to the root."""
        return self.prefix + quote(PurePosixPath(relative).as_posix())

    def template(self) -> types.ResourceTemplate:
        return types.ResourceTemplate(
            name="file",
            title="A file under the root",
            uri_template=self.prefix + "{+" + TEMPLATE_ARGUMENT + "}",
            description=f"Any file under {self.root}, by its path relative to it.",
        )

    async def list_page(self, cursor: str | None) -> types.ListResourcesResult:
        """One page of the root's files, from `cursor` (a position the previous page gave)."""
        start = _position(cursor)
        files, more = await anyio.to_thread.run_sync(self._files, start)
        return types.ListResourcesResult(
            resources=[self._resource(relative, size) for relative, size in files],
            next_cursor=str(start + len(files)) if more else None,
        )

    async def read(self, uri: str) -> types.ReadResourceResult:
        """The file a URI names, as text or a blob; MCPError for anything not served."""
        path = self.path_of(uri)
        data, shown = await anyio.to_thread.run_sync(self._read, path, uri)
        mime = _mime_type(shown)
        text = _as_text(data)
        contents: types.TextResourceContents | types.BlobResourceContents
        if text is not None:
            contents = types.TextResourceContents(
                uri=uri, mime_type=mime or "text/plain", text=text
            )
        else:
            blob = base64.b64encode(data).decode("ascii")
            contents = types.BlobResourceContents(
                uri=uri, mime_type=mime or "application/octet-stream", blob=blob
            )
        return types.ReadResourceResult(contents=[contents])

    def path_of(self, uri: str) -> str:
        """The absolute path a file URI names, percent-decoded once and not yet checked (the
        root refuses it if it leads elsewhere, or is still percent-encoded traversal)."""
        parts = urlsplit(uri)
        if parts.scheme != "file" or parts.netloc not in ("", "localhost"):
            raise MCPError(
                RESOURCE_NOT_FOUND,
                f"Unknown resource {uri!r}: this server serves only file:// URIs under "
                f"{self.prefix!r}. List them with resources/list.",
            )
        return unquote(parts.path)

    def _read(self, user_path: str, uri: str) -> tuple[bytes, str]:
        try:
            with Root(self.root) as root, root.open(user_path, READ) as found:
                reason = protected_reason(found.relative)
                if reason is not None:
                    raise MCPError(
                        INVALID_PARAMS,
                        f"The resource {uri!r} is not served: {reason}. Read another file.",
                    )
                found.regular_file(
                    limit=MAX_RESOURCE_BYTES,
                    not_regular="{shown!r} is not a regular file (a directory or a device), so "
                    "it is no resource. List the resources to see the files.",
                    too_big="{shown!r} has {size} bytes, more than the {limit} bytes a resource "
                    "may have. Read it a page at a time with the read_file tool.",
                )
                return found.read_bytes(), found.shown
        except ToolError as exc:
            # Root.open raises its refusal from the OSError it met; a missing file is ENOENT.
            missing = isinstance(exc.__cause__, FileNotFoundError)
            raise MCPError(RESOURCE_NOT_FOUND if missing else INVALID_PARAMS, str(exc)) from exc
        except (FileNotFoundError, NotADirectoryError) as exc:
            raise MCPError(
                RESOURCE_NOT_FOUND,
                f"The root {str(self.root)!r} no longer exists; restart the server with one.",
            ) from exc

    def _files(self, start: int) -> tuple[list[tuple[PurePosixPath, int]], bool]:
        from ..toolkits.perception.walk import WalkStats, walk

        found: list[tuple[PurePosixPath, int]] = []
        index = 0
        with Root(self.root) as root, root.open("", READ) as top:
            for entry in walk(top, WalkStats()):
                if entry.is_dir or entry.is_symlink or protected_reason(entry.relative):
                    continue
                try:
                    info = os.stat(entry.name, dir_fd=entry.directory, follow_symlinks=False)
                except OSError:
                    continue
                if not _is_regular(info.st_mode):
                    continue
                if index >= start:
                    if len(found) == PAGE_SIZE:
                        return found, True
                    found.append((entry.relative, info.st_size))
                index += 1
        return found, False

    def _resource(self, relative: PurePosixPath, size: int) -> types.Resource:
        return types.Resource(
            name=relative.as_posix(),
            uri=self.uri(relative),
            mime_type=_mime_type(relative.as_posix()),
            size=size,
        )


def _position(cursor: str | None) -> int:
    if cursor is None:
        return 0
    if not cursor.isdigit():
        raise MCPError(
            INVALID_PARAMS,
            f"The cursor {cursor!r} is not one this server gave; pass a page's nextCursor as is.",
        )
    return int(cursor)


def _is_regular(mode: int) -> bool:
    return stat.S_ISREG(mode)


def _mime_type(name: str) -> str | None:
    guessed, _ = mimetypes.guess_type(name, strict=False)
    return guessed


def _as_text(data: bytes) -> str | None:
    """The bytes as text when they are UTF-8 without NUL bytes (what a text file is), else None."""
    if b"\x00" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None
