"""A stored message's attachment files, served to the console: only files a stored message
lists, and only while they are still what was sent.

A message names each file by its resolved path in the workspace (checked when it was sent).
The file may have changed since: deleted, or replaced by a symlink to `~/.ssh/id_ed25519`. So at
serve time the path is opened again beneath the workspace's held-open root (see
:mod:`wakeful.safety.beneath`: no `..`, absolute path or symlink leads out) and refused unless it
resolves to the very same path (a symlink swapped in, even one pointing inside, is refused) and
is a regular file. The bytes are then read from that descriptor, never by name again.

Images that are what their name says (PNG, JPEG, GIF, WebP, checked by their first bytes) are
shown inline under their own type; everything else, SVG and HTML included, is a download of type
`application/octet-stream`. The console's `X-Content-Type-Options: nosniff` keeps the browser
from guessing otherwise.
"""

from __future__ import annotations

import errno
import mimetypes
import os
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Final
from urllib.parse import quote

import anyio.to_thread
from starlette.responses import Response

from ..core.records import MessageAttachment
from ..safety.beneath import Root

__all__ = ["AttachmentRefused", "AttachmentResponse", "OpenAttachment", "open_attachment"]

_CHUNK: Final = 256 * 1024

INLINE_IMAGES: Final[dict[str, tuple[bytes, ...]]] = {
    "image/png": (b"\x89PNG\r\n\x1a\n",),
    "image/jpeg": (b"\xff\xd8\xff",),
    "image/gif": (b"GIF87a", b"GIF89a"),
    "image/webp": (b"RIFF",),  # and "WEBP" at offset 8, checked below
}
"""The types shown inline, with the bytes such a file starts with. Never SVG: it can hold
script."""


class AttachmentRefused(Exception):
    """Raised by :func:`open_attachment`: the file may not be served (`status`: 403 or 404)."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(text)
        self.status = status
        self.text = text


@dataclass
class OpenAttachment:
    """An attachment's file, opened and checked: its descriptor (closed by the response), size,
    download name, the type it is served as, and whether it is shown inline."""

    fd: int
    size: int
    name: str
    media_type: str
    inline: bool

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def open_attachment(workspace: Path, attachment: MessageAttachment, *, what: str) -> OpenAttachment:
    """Open `attachment`'s file beneath `workspace` if it is still the regular file that was
    sent; AttachmentRefused otherwise (`what` names the attachment in the error). Blocks: run
    it in a worker thread."""
    stored = Path(attachment.path)
    try:
        root = Root(workspace)
    except OSError as exc:
        raise AttachmentRefused(
            404, f"The workspace {str(workspace)!r} of {what} no longer exists."
        ) from exc
    with root:
        moved = AttachmentRefused(
            403,
            f"The file of {what} ({attachment.name}) is no longer inside the workspace, or was "
            "replaced by a link since it was sent, so the console does not serve it. Ask the "
            "agent to send the file again.",
        )
        if not stored.is_absolute() or not stored.is_relative_to(root.path):
            raise moved
        relative = PurePosixPath(stored.relative_to(root.path).as_posix())
        try:
            opened = root.open_found(relative.as_posix())
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR):
                raise AttachmentRefused(
                    404, f"The file of {what} ({attachment.name}) no longer exists."
                ) from exc
            raise moved from exc
    if opened.relative != relative:  # a symlink on the way, even one that stays inside
        opened.close()
        raise moved
    info = os.fstat(opened.fd)
    if not stat.S_ISREG(info.st_mode):
        opened.close()
        raise AttachmentRefused(
            403, f"The file of {what} ({attachment.name}) is no longer a regular file."
        )
    media_type = _inline_type(opened.fd, attachment.name)
    fd, opened.fd = opened.fd, -1  # the response owns it now
    return OpenAttachment(
        fd=fd,
        size=info.st_size,
        name=attachment.name,
        media_type=media_type or "application/octet-stream",
        inline=media_type is not None,
    )


def _inline_type(fd: int, name: str) -> str | None:
    """The image type to show the file as inline, when its name and first bytes agree."""
    guessed = mimetypes.guess_type(name)[0]
    signatures = INLINE_IMAGES.get(guessed or "")
    if guessed is None or signatures is None:
        return None
    head = os.pread(fd, 16, 0)
    if not head.startswith(signatures):
        return None
    if guessed == "image/webp" and head[8:12] != b"WEBP":
        return None
    return guessed


def content_disposition(name: str, *, inline: bool) -> str:
    """`attachment` (or `inline`) with the file name, ASCII-safe and in UTF-8 (RFC 6266)."""
    fallback = "".join(
        c if c.isascii() and c.isprintable() and c not in '"\\' else "_" for c in name
    )
    kind = "inline" if inline else "attachment"
    return f"{kind}; filename=\"{fallback}\"; filename*=UTF-8''{quote(name, safe='')}"


class AttachmentResponse(Response):
    """The bytes of an opened attachment, read from its descriptor in a worker thread, chunk by
    chunk; the descriptor is closed at the end, also when the browser goes away."""

    def __init__(self, opened: OpenAttachment) -> None:
        super().__init__(
            status_code=200,
            media_type=opened.media_type,
            headers={"content-disposition": content_disposition(opened.name, inline=opened.inline)},
        )
        self.headers["content-length"] = str(opened.size)
        self.opened = opened

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        opened = self.opened
        try:
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            offset = 0 if scope.get("method") != "HEAD" else opened.size  # HEAD: no body
            while offset < opened.size:
                wanted = min(_CHUNK, opened.size - offset)
                chunk = await anyio.to_thread.run_sync(os.pread, opened.fd, wanted, offset)
                if not chunk:  # the file shrank since: end here (the length was promised)
                    break
                offset += len(chunk)
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            opened.close()
