"""The root a perception tool works under: the services' working directory, confined."""

from __future__ import annotations

from pathlib import Path

import anyio

from ...errors import ToolError
from ...safety.paths import confine
from ...tools.spec import ToolContext


def workspace_root(ctx: ToolContext) -> Path:
    root = ctx.services.workdir
    if root is None:
        raise ToolError(
            f"{ctx.tool_name} has no root directory to work in: no workspace is configured. "
            "Start the server with --root DIR (or give the runtime a workdir)."
        )
    return root


async def confined(ctx: ToolContext, user_path: str) -> tuple[Path, Path]:
    """The resolved root and the resolved path under it (see :func:`wakeful.safety.confine`)."""
    root = workspace_root(ctx)

    def resolve_both() -> tuple[Path, Path]:
        return root.resolve(strict=True), confine(root, user_path)

    try:
        return await anyio.to_thread.run_sync(resolve_both)
    except FileNotFoundError as exc:
        raise ToolError(
            f"The root directory {str(root)!r} no longer exists, so {ctx.tool_name} cannot "
            "work. Restart the server with an existing --root."
        ) from exc
