"""The runtime: one process that owns the store, the background tasks, the timers and every
agent session, and wires them together. :mod:`.runtime` holds the `Runtime` façade; each of its
parts has a module of its own (settings, assembly, catalog, recovery, loaded_sessions, intake,
operator_alerts, idle_eviction)."""

from .runtime import Runtime, RuntimeSettings, core_tools

__all__ = ["Runtime", "RuntimeSettings", "core_tools"]
