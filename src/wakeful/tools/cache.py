"""A cache of read-only tool results: a call repeated within a short time does not run again.

Only tools whose spec says `read_only` are cached, and of third-party tools (from an MCP server)
only those of a server declared trusted: an untrusted server's read-only hint is a claim, not a
fact. Errors are never cached. Entries expire after a TTL and the cache is capped both in
entries and in bytes, evicting the least recently used first.

Two rules keep the cache from showing a model a world that has changed under it:

* Any call of a tool that is not read-only clears the whole cache, before and after it runs: a
  write may change what every read-only tool would see.
* Read-only tools that report live state (tasks, timers) change from one second to the next and
  are never cached (:data:`LIVE_STATE_TOOLS`).

A tool that takes a context may answer differently per session, so its entries are kept per
session; other tools share entries across sessions.

A hit returns the first result unchanged, byte for byte, as a :class:`CachedResult`, a
:class:`ToolResult` that also carries the entry's age. The cache hit is deliberately not written
into the text: the model gets the same bytes it would have got from the first call, and the
age is for observers, logs and the store to show. Nor does it go into `structured`, which is the
tool's own data and keeps its shape.
"""

from __future__ import annotations

import json
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from ..errors import UserError
from .spec import Tool, ToolResult

__all__ = [
    "LIVE_STATE_TOOLS",
    "CachedResult",
    "ResultCache",
]

log = logging.getLogger(__name__)

LIVE_STATE_TOOLS: Final = frozenset(
    {
        "task_status",
        "list_tasks",
        "monitor_shell",
        "list_timers",
        "list_channels",
        "list_user_messages",
    }
)
"""Built-in read-only tools whose answer is the state of the moment; caching them would lie."""


@dataclass(slots=True)
class CachedResult(ToolResult):
    """A result served from the cache: the first call's result, and how old it is."""

    age_seconds: float = 0.0


@dataclass(slots=True)
class _Entry:
    result: ToolResult
    stored_at: float
    size: int


class ResultCache:
    """Results of read-only tool calls by tool, arguments (canonical JSON) and, for tools that
    take a context, session."""

    def __init__(
        self,
        *,
        ttl_seconds: float = 60.0,
        max_entries: int = 256,
        max_bytes: int = 4 * 1024 * 1024,
        never_cache: Iterable[str] = LIVE_STATE_TOOLS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if ttl_seconds <= 0 or max_entries < 1 or max_bytes < 1:
            raise UserError(
                f"A result cache needs a positive TTL and size caps, got ttl_seconds="
                f"{ttl_seconds}, max_entries={max_entries}, max_bytes={max_bytes}. Give positive "
                "values, e.g. ResultCache(ttl_seconds=60, max_entries=256, max_bytes=4_000_000), "
                "or pass no cache to the registry to turn caching off."
            )
        self.ttl_seconds = ttl_seconds
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.never_cache = frozenset(never_cache)
        self._clock = clock
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._bytes = 0
        self._third_party: dict[str, bool] = {}
        self.hits = 0
        self.misses = 0

    # --- which tools ---------------------------------------------------------------------------

    def declare_third_party(self, tool_names: Iterable[str], *, trusted: bool) -> None:
        """Mark tools as coming from a third-party server; only a trusted one's are cached."""
        for name in tool_names:
            self._third_party[name] = trusted

    def admits(self, tool: Tool) -> bool:
        """Whether results of `tool` may be cached."""
        if not tool.spec.annotations.read_only or tool.name in self.never_cache:
            return False
        return self._third_party.get(tool.name, True)

    # --- entries -------------------------------------------------------------------------------

    def key(self, tool: Tool, arguments: Mapping[str, Any], *, session: str) -> str:
        scope = session if tool.takes_context else ""
        return _canonical_json([tool.name, scope, dict(arguments)])

    def get(self, tool: Tool, arguments: Mapping[str, Any], *, session: str) -> CachedResult | None:
        """The cached result of this call if one is fresh, else None (and the stale one goes)."""
        if not self.admits(tool):
            return None
        key = self.key(tool, arguments, session=session)
        entry = self._entries.get(key)
        now = self._clock()
        if entry is not None and now - entry.stored_at >= self.ttl_seconds:
            self._drop(key)
            entry = None
        if entry is None:
            self.misses += 1
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        first = entry.result
        return CachedResult(
            first.content, first.is_error, first.structured, age_seconds=now - entry.stored_at
        )

    def put(
        self, tool: Tool, arguments: Mapping[str, Any], result: ToolResult, *, session: str
    ) -> bool:
        """Keep a successful result of a cacheable tool; True if it was kept."""
        if result.is_error or not self.admits(tool):
            return False
        key = self.key(tool, arguments, session=session)
        size = len(key.encode()) + len(result.content.encode()) + _structured_size(result)
        if size > self.max_bytes:
            return False
        self._drop(key)
        self._entries[key] = _Entry(result, self._clock(), size)
        self._bytes += size
        while len(self._entries) > self.max_entries or self._bytes > self.max_bytes:
            self._drop(next(iter(self._entries)))
        return True

    def clear(self) -> None:
        self._entries.clear()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def size_bytes(self) -> int:
        return self._bytes

    def _drop(self, key: str) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._bytes -= entry.size


def _canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def _structured_size(result: ToolResult) -> int:
    if result.structured is None:
        return 0
    return len(_canonical_json(result.structured).encode())
