"""The read-only result cache: a repeated call within the TTL returns the first result without
running; writes, errors, live state and untrusted servers are never served from it. Calls go
through the tool pipeline, where the cache is a layer (see wakeful.tools.pipeline)."""

from __future__ import annotations

import json
from typing import Annotated, Any

import pytest
from pydantic import Field

from tool_services import tool_services
from wakeful.core.executor import ToolExecutor
from wakeful.errors import ToolError, UserError
from wakeful.messages import ToolCall
from wakeful.runtime import core_tools
from wakeful.runtime.catalog import channel_tools
from wakeful.tools.cache import LIVE_STATE_TOOLS, CachedResult, ResultCache
from wakeful.tools.pipeline import assemble_pipeline
from wakeful.tools.registry import ToolRegistry
from wakeful.tools.spec import Tool, ToolAnnotations, ToolContext, ToolResult, tool


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Runs:
    """Tools that count how often they really ran."""

    def __init__(self) -> None:
        self.count = 0
        self.files = {"a.txt": "alpha"}

        @tool(annotations=ToolAnnotations(read_only=True), name="read_file")
        async def read_file(
            path: Annotated[str, Field(description="A path, e.g. 'a.txt'.")],
        ) -> dict[str, Any]:
            """Read a file."""
            self.count += 1
            if path not in self.files:
                raise ToolError(f"There is no file {path!r}.")
            return {"path": path, "text": self.files[path], "run": self.count}

        @tool(name="write_file")
        async def write_file(
            path: Annotated[str, Field(description="A path, e.g. 'a.txt'.")],
            text: Annotated[str, Field(description="The text, e.g. 'hi'.")],
        ) -> str:
            """Write a file."""
            self.files[path] = text
            return "written"

        @tool(annotations=ToolAnnotations(read_only=True), name="whoami")
        async def whoami(ctx: ToolContext) -> str:
            """Name the calling session."""
            self.count += 1
            return ctx.session

        self.read_file: Tool = read_file
        self.write_file: Tool = write_file
        self.whoami: Tool = whoami


def call(name: str, **arguments: Any) -> ToolCall:
    return ToolCall(name=name, arguments=json.dumps(arguments))


def pipeline(*tools: Tool, cache: ResultCache | None) -> ToolExecutor:
    return assemble_pipeline(ToolRegistry(tools), cache=cache)


pytestmark = pytest.mark.anyio


async def test_a_repeated_read_only_call_returns_the_first_result_without_running() -> None:
    runs, clock = Runs(), Clock()
    cache = ResultCache(ttl_seconds=30, clock=clock)
    tools = pipeline(runs.read_file, runs.write_file, cache=cache)
    async with tool_services() as (services, _):
        ctx = ToolContext("main", "call_1", "read_file", services)
        first = await tools.execute(call("read_file", path="a.txt"), ctx)
        clock.now += 29
        # The same arguments in another order are the same call.
        again = await tools.execute(
            ToolCall(name="read_file", arguments='{ "path" : "a.txt" }'), ctx
        )
    assert runs.count == 1
    assert isinstance(again, CachedResult) and not isinstance(first, CachedResult)
    assert (again.content, again.structured, again.is_error) == (
        first.content,
        first.structured,
        first.is_error,
    )
    assert again.age_seconds == 29
    assert (cache.hits, cache.misses) == (1, 1)


async def test_an_entry_expires_after_the_ttl() -> None:
    runs, clock = Runs(), Clock()
    tools = pipeline(runs.read_file, cache=ResultCache(ttl_seconds=30, clock=clock))
    async with tool_services() as (services, _):
        ctx = ToolContext("main", "call_1", "read_file", services)
        await tools.execute(call("read_file", path="a.txt"), ctx)
        clock.now += 30
        result = await tools.execute(call("read_file", path="a.txt"), ctx)
    assert runs.count == 2 and not isinstance(result, CachedResult)
    assert '"run": 2' in result.content


async def test_a_call_that_may_write_clears_the_cache() -> None:
    runs = Runs()
    cache = ResultCache(clock=Clock())
    tools = pipeline(runs.read_file, runs.write_file, cache=cache)
    async with tool_services() as (services, _):
        ctx = ToolContext("main", "call_1", "read_file", services)
        await tools.execute(call("read_file", path="a.txt"), ctx)
        assert len(cache) == 1
        await tools.execute(call("write_file", path="a.txt", text="beta"), ctx)
        assert len(cache) == 0
        result = await tools.execute(call("read_file", path="a.txt"), ctx)
    assert runs.count == 2 and '"text": "beta"' in result.content


async def test_errors_are_not_cached() -> None:
    runs = Runs()
    cache = ResultCache(clock=Clock())
    tools = pipeline(runs.read_file, cache=cache)
    async with tool_services() as (services, _):
        ctx = ToolContext("main", "call_1", "read_file", services)
        for _ in range(2):
            result = await tools.execute(call("read_file", path="b.txt"), ctx)
            assert result.is_error and "There is no file 'b.txt'" in result.content
    assert runs.count == 2 and len(cache) == 0
    assert not cache.put(runs.read_file, {"path": "x"}, ToolResult.error("no"), session="main")


async def test_a_tool_that_takes_a_context_is_cached_per_session() -> None:
    runs = Runs()
    tools = pipeline(runs.whoami, cache=ResultCache(clock=Clock()))
    async with tool_services() as (services, _):
        answers = []
        for session in ("alice", "bob", "alice"):
            ctx = ToolContext(session, "call_1", "whoami", services)
            answers.append((await tools.execute(call("whoami"), ctx)).content)
    assert answers == ["alice", "bob", "alice"] and runs.count == 2


async def test_without_a_cache_every_call_runs() -> None:
    runs = Runs()
    tools = pipeline(runs.read_file, cache=None)
    async with tool_services() as (services, _):
        ctx = ToolContext("main", "call_1", "read_file", services)
        for _ in range(2):
            await tools.execute(call("read_file", path="a.txt"), ctx)
    assert runs.count == 2


# --- which tools ---------------------------------------------------------------------------------


def test_only_read_only_tools_of_trusted_sources_are_admitted() -> None:
    runs = Runs()
    cache = ResultCache()
    assert cache.admits(runs.read_file) and not cache.admits(runs.write_file)
    cache.declare_third_party(["read_file"], trusted=False)
    assert not cache.admits(runs.read_file)
    cache.declare_third_party(["read_file"], trusted=True)
    assert cache.admits(runs.read_file)


def test_built_in_tools_that_report_live_state_are_never_cached() -> None:
    cache = ResultCache()
    builtins = {t.name: t for t in [*core_tools(), *channel_tools()]}
    assert set(builtins) >= LIVE_STATE_TOOLS
    # Every read-only built-in reports live state today, so none of them is cached.
    assert [name for name, t in builtins.items() if cache.admits(t)] == []


# --- size caps -----------------------------------------------------------------------------------


def test_the_least_recently_used_entry_goes_first_when_entries_are_capped() -> None:
    runs = Runs()
    cache = ResultCache(max_entries=2, clock=Clock())
    for path in ("a", "b"):
        cache.put(runs.read_file, {"path": path}, ToolResult(path), session="main")
    assert cache.get(runs.read_file, {"path": "a"}, session="main") is not None  # a is now recent
    cache.put(runs.read_file, {"path": "c"}, ToolResult("c"), session="main")
    assert cache.get(runs.read_file, {"path": "b"}, session="main") is None
    assert cache.get(runs.read_file, {"path": "a"}, session="main") is not None
    assert len(cache) == 2


def test_bytes_are_capped_and_an_entry_too_big_is_not_kept() -> None:
    runs = Runs()
    cache = ResultCache(max_bytes=1_000, clock=Clock())
    assert not cache.put(runs.read_file, {"path": "big"}, ToolResult("é" * 600), session="main")
    for path in ("a", "b", "c"):
        assert cache.put(runs.read_file, {"path": path}, ToolResult("x" * 400), session="main")
    assert len(cache) == 2 and cache.size_bytes <= 1_000
    assert cache.get(runs.read_file, {"path": "a"}, session="main") is None


def test_a_cache_without_room_is_refused_with_an_example() -> None:
    with pytest.raises(UserError, match="positive TTL and size caps, got ttl_seconds=0"):
        ResultCache(ttl_seconds=0)
