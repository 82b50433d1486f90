"""The read-only result cache as a layer: a repeated read-only call is answered from the cache.

The rules are the cache's (see :mod:`wakeful.tools.cache`): only tools it admits are kept, errors
never are, and any call of a tool that may write clears the whole cache before and after it
runs. Below the gate, so a call answered from the cache was still judged and audited.
"""

from __future__ import annotations

import logging

from ...core.executor import ToolExecutor
from ...errors import ToolError
from ...messages import ToolCall
from ..cache import ResultCache
from ..registry import parse_arguments
from ..spec import ToolContext, ToolResult
from .base import WrapperExecutor

log = logging.getLogger(__name__)


class CachedExecutor(WrapperExecutor):
    """Answers a fresh repeat of a read-only call from `cache`; keeps what may be kept."""

    def __init__(self, wrapped: ToolExecutor, cache: ResultCache) -> None:
        super().__init__(wrapped)
        self.cache = cache

    async def execute(self, call: ToolCall, ctx: ToolContext) -> ToolResult:
        tool = self.wrapped.tool_for(call)
        try:
            arguments = parse_arguments(call) if tool is not None else None
        except ToolError:
            arguments = None  # the layer below explains the bad arguments
        if tool is None or arguments is None:
            return await self.wrapped.execute(call, ctx)
        if not tool.spec.annotations.read_only:
            self.cache.clear()  # a write may change what any read-only tool would see
            try:
                return await self.wrapped.execute(call, ctx)
            finally:
                self.cache.clear()
        cached = self.cache.get(tool, arguments, session=ctx.session)
        if cached is not None:
            log.debug("tool %s answered from the cache (%.1f s old)", tool.name, cached.age_seconds)
            return cached
        result = await self.wrapped.execute(call, ctx)
        self.cache.put(tool, arguments, result, session=ctx.session)
        return result
