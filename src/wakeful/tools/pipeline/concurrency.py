"""Which calls of one turn may run at the same time: read-only ones, side by side.

A model often asks for several reads at once (three files, two searches); they cannot disturb
each other, so they run together. A call that may write runs alone, after the calls before it
and before the calls after it, so the world each call sees is the one the model's order implies.
"""

from __future__ import annotations

from collections.abc import Container, Sequence

from ...core.executor import ToolExecutor
from ...messages import ToolCall
from ..spec import Tool


def runs_alongside(tool: Tool | None) -> bool:
    """Whether calls of `tool` may overlap with other such calls: read-only and inline."""
    return tool is not None and tool.spec.annotations.read_only and tool.spec.run_mode == "inline"


def concurrent_run(
    calls: Sequence[ToolCall],
    start: int,
    executor: ToolExecutor,
    *,
    answered: Container[str] = (),
) -> int:
    """The end (exclusive) of the calls from `start` that run together: the call at `start`
    alone, or, when it runs alongside others, with the read-only calls right after it. A call
    whose id is in `answered` (it will not run) ends the run."""
    end = start + 1
    if not runs_alongside(executor.tool_for(calls[start])):
        return end
    while (
        end < len(calls)
        and calls[end].id not in answered
        and runs_alongside(executor.tool_for(calls[end]))
    ):
        end += 1
    return end
