"""The tool-call pipeline: one executor interface, one wrapper per concern, assembled once.

From the outside in, a call passes

1. :class:`CallToolUnwrapping` — discovery's `call_tool(name, arguments)` becomes the call it
   stands for, so every layer below judges, caches and runs the real tool;
2. the safety gate (`wakeful.safety.gate.CallGate`, a :class:`~wakeful.core.executor.CallChecks`)
   — validation, sidecar, breaker, person, reviewer, verification, audit;
3. :class:`CachedExecutor` — a fresh repeat of a read-only call is answered from the cache;
4. :class:`RegistryExecutor` — the registry's tool runs.

:func:`assemble_pipeline` builds that stack; sessions, side sessions and the MCP bridge all call
it and then only the executor it returns. Which calls of one turn may run together is
:func:`concurrent_run`'s to say.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...core.executor import CallChecks, RecentMessages, ToolExecutor
from ...messages import Message
from ..cache import ResultCache
from ..registry import ToolRegistry
from .base import RegistryExecutor, WrapperExecutor
from .caching import CachedExecutor
from .call_tool import CALL_TOOL, CallToolUnwrapping, unwrap_call
from .concurrency import concurrent_run, runs_alongside

__all__ = [
    "CALL_TOOL",
    "CachedExecutor",
    "CallToolUnwrapping",
    "RegistryExecutor",
    "WrapperExecutor",
    "assemble_pipeline",
    "concurrent_run",
    "runs_alongside",
    "unwrap_call",
]


def _no_messages() -> Sequence[Message]:
    return ()


def assemble_pipeline(
    registry: ToolRegistry,
    *,
    gate: CallChecks | None = None,
    cache: ResultCache | None = None,
    discovery: bool = False,
    recent: RecentMessages = _no_messages,
) -> ToolExecutor:
    """The standard pipeline over `registry`: `call_tool` unwrapping, then `gate` (None: calls
    run unchecked), then `cache` (None: every call runs), then the tool.

    `discovery` says the caller's tools are found with discover_tools, so an unknown name is
    answered with how to find one; `recent` is the conversation the calls come from, for the
    gate's reviewer."""
    executor: ToolExecutor = RegistryExecutor(registry)
    if cache is not None:
        executor = CachedExecutor(executor, cache)
    if gate is not None:
        executor = gate.guard(executor, recent)
    return CallToolUnwrapping(
        executor, discovery=discovery, held_back=lambda name: name in registry.unavailable
    )
