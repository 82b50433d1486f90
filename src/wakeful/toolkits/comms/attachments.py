"""Workspace files sent to the user by reference: checked to lie inside the workspace (through
its held-open root, so no '..', absolute path or symlink leads out), to be regular files, and to
fit the size limit; their bytes never enter the agent's context."""

from __future__ import annotations

import mimetypes
from collections.abc import Sequence
from pathlib import PurePosixPath

import anyio.to_thread

from ...core.records import MessageAttachment
from ...services import settings_of
from ...tools.spec import ToolContext
from ..perception.workspace import open_workspace
from .settings import CommsSettings

__all__ = ["workspace_attachments"]


async def workspace_attachments(
    ctx: ToolContext, paths: Sequence[str]
) -> tuple[MessageAttachment, ...]:
    """The attachments for these workspace paths, or a ToolError naming the first path that is
    outside the workspace, missing, not a file, or over the size limit."""
    if not paths:
        return ()
    limit = settings_of(ctx.services, CommsSettings).max_attachment_bytes

    def check() -> tuple[MessageAttachment, ...]:
        found = []
        with open_workspace(ctx) as root:
            for path in paths:
                with root.open(path) as opened:
                    info = opened.regular_file(
                        limit=limit,
                        not_regular="{shown!r} is not a regular file, so it cannot be attached; "
                        "attach the files in it one by one.",
                        too_big="{shown!r} is {size:,} bytes, over the attachment limit of "
                        "{limit:,} bytes (setting max_attachment_bytes); send a smaller file, "
                        "or say where the user can find it.",
                    )
                    name = PurePosixPath(opened.shown).name
                    kind = mimetypes.guess_type(name)[0] or "application/octet-stream"
                    found.append(
                        MessageAttachment(
                            path=str(root.path / opened.shown),
                            name=name,
                            size=info.st_size,
                            type=kind,
                        )
                    )
        return tuple(found)

    return await anyio.to_thread.run_sync(check)
