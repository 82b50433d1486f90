"""What the runtime lets a tree of subagents use: depth, how many at once, tokens, wall time.
Over a limit, spawn_subagent fails at once with a tool error saying which limit and how to
raise it; a running child over its tokens or wall time is cancelled and its parent told."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["SubagentLimits"]


class SubagentLimits(BaseModel):
    """`[subagents]` in wakeful.toml."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_depth: int = Field(default=2, ge=1, le=10)
    """How deep a tree may grow: 1 lets only top-level sessions spawn children."""

    max_children: int = Field(default=4, ge=1, le=100)
    """Children of one session running at the same time."""

    max_tree: int = Field(default=16, ge=1, le=1000)
    """Children running at the same time in one tree (all depths)."""

    max_tokens_per_child: int = Field(default=200_000, ge=1)
    """Model tokens (input + output) one child may use, over every run (a restart does not
    reset them)."""

    max_tokens_per_tree: int = Field(default=1_000_000, ge=1)
    """Model tokens all the children of one tree may use together, ended ones included, over
    every run."""

    max_seconds: float = Field(default=900.0, gt=0, le=7 * 24 * 3600)
    """Wall time of one child, from its spawn to its result."""

    answer_timeout_seconds: float = Field(default=300.0, gt=0)
    """How long a child's ask_parent waits for the parent's answer."""
