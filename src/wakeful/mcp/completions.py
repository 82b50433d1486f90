"""`completion/complete` for the resource template's `path` argument: paths under the root.

MCP completion names a prompt or a resource template, never a tool, so tools' path arguments
cannot be completed through it; the file resource template's `path` is (see :mod:`.resources`).
A value `dir/na` completes to the entries of `dir` (under the root, resolved beneath it) whose
names start with `na`; directories end with '/'. Protected paths and the walk's skipped
directories are left out. At most `MAX_COMPLETIONS` values, with `hasMore` when there are more.
"""

from __future__ import annotations

import os
from typing import Final

import anyio
import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from ..errors import ToolError
from ..safety.beneath import Root
from ..safety.protected import protected_reason
from .resources import TEMPLATE_ARGUMENT, FileResources

MAX_COMPLETIONS: Final = 100
"""The most values one completion returns (the specification's limit)."""

_NO_VALUES = types.CompleteResult(completion=types.Completion(values=[], has_more=False))


async def complete(
    resources: FileResources | None, params: types.CompleteRequestParams
) -> types.CompleteResult:
    """Completions for one argument; MCPError for a reference or argument nobody completes."""
    ref = params.ref
    if not isinstance(ref, types.ResourceTemplateReference):
        return _NO_VALUES  # prompts have no arguments
    if resources is None or ref.uri != resources.template().uri_template:
        raise MCPError(
            INVALID_PARAMS,
            f"Unknown resource template {ref.uri!r}; list them with resources/templates/list.",
        )
    if params.argument.name != TEMPLATE_ARGUMENT:
        raise MCPError(
            INVALID_PARAMS,
            f"The resource template has no argument {params.argument.name!r}; its only "
            f"argument is {TEMPLATE_ARGUMENT!r}.",
        )
    values = await anyio.to_thread.run_sync(_paths, resources, params.argument.value)
    return types.CompleteResult(
        completion=types.Completion(
            values=values[:MAX_COMPLETIONS],
            total=len(values),
            has_more=len(values) > MAX_COMPLETIONS,
        )
    )


def _paths(resources: FileResources, value: str) -> list[str]:
    from ..toolkits.perception.walk import SKIPPED_DIRS

    folder, _, start = value.rpartition("/")
    try:
        with Root(resources.root) as root, root.open(folder) as found:
            base = "" if found.shown == "." else found.shown + "/"
            with os.scandir(found.fd) as listing:
                entries = sorted(
                    (e.name, e.is_dir(follow_symlinks=False))
                    for e in listing
                    if e.name.startswith(start)
                )
    except (ToolError, OSError):
        return []  # outside the root, missing or unreadable: nothing to offer
    values = []
    for name, is_dir in entries:
        path = base + name
        if protected_reason(path) or (is_dir and name in SKIPPED_DIRS):
            continue
        values.append(path + "/" if is_dir else path)
    return values
