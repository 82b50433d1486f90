"""The runtime: one process that owns the store, the background tasks, the timers and every
agent session, and wires them together (:mod:`.runtime`)."""

from .runtime import Runtime, core_tools

__all__ = ["Runtime", "core_tools"]
