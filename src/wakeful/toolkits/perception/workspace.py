"""The root a tool works under: the services' working directory, held open by descriptor.

Tools open paths through :meth:`wakeful.safety.beneath.Root.open` (or `place`, to write), never
by name after a check, so a symlink swapped in meanwhile cannot lead them out of the root.
"""

from __future__ import annotations

from pathlib import Path

from ...errors import ToolError
from ...safety.beneath import Root
from ...tools.spec import ToolContext


def workspace_root(ctx: ToolContext) -> Path:
    root = ctx.services.workdir
    if root is None:
        raise ToolError(
            f"{ctx.tool_name} has no root directory to work in: no workspace is configured. "
            "Start the server with --root DIR (or give the runtime a workdir)."
        )
    return root


def open_workspace(ctx: ToolContext) -> Root:
    """The workspace root, opened (close it with `with`). Blocks: call it in a worker thread."""
    root = workspace_root(ctx)
    try:
        return Root(root)
    except (FileNotFoundError, NotADirectoryError) as exc:
        raise ToolError(
            f"The root directory {str(root)!r} no longer exists, so {ctx.tool_name} cannot "
            "work. Restart the server with an existing --root."
        ) from exc
