"""The perception server: read-only file tools confined to one root directory.

`FILE_TOOLS` are ordinary wakeful tools; they work under `ctx.services.workdir`, so the same
tuple serves an agent directly or, through :func:`perception_server`, any MCP client.
"""

from __future__ import annotations

from pathlib import Path

from ...errors import UserError
from ...tools.spec import Tool
from ..bridge import BridgeServer, build_server
from .find_file import find_file
from .grep_file import grep_file
from .list_dir import list_dir
from .read_file import read_file

FILE_TOOLS: tuple[Tool, ...] = (find_file, grep_file, read_file, list_dir)
"""find_file, grep_file, read_file and list_dir: look at files, change nothing."""

INSTRUCTIONS = """\
Read-only access to the files under one root directory. Every path is relative to that root;
nothing outside it can be read. Find files by name with find_file, search their contents with
grep_file, read them with read_file (numbered lines, a page at a time) and look into
directories with list_dir. Long results come in pages: pass the offset or cursor a result
gives to get the next one."""


def perception_server(root: Path) -> BridgeServer:
    """An MCP server named "wakeful-perception" offering FILE_TOOLS under `root`."""
    if not root.is_dir():
        raise UserError(
            f"The root {str(root)!r} is not an existing directory. Give the directory the file "
            "tools may read, e.g. --root ."
        )
    return build_server(
        "wakeful-perception", FILE_TOOLS, instructions=INSTRUCTIONS, workdir=root.resolve()
    )


__all__ = [
    "FILE_TOOLS",
    "INSTRUCTIONS",
    "find_file",
    "grep_file",
    "list_dir",
    "perception_server",
    "read_file",
]
