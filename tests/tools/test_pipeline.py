"""The tool-call pipeline: each wrapper alone, then composed as sessions and the bridge use it.

Real tools, a real `CallGate` (rule sidecar with the command policy, a model sidecar played by a
`FunctionModel`, an audit log in a real store) and a real runtime for the turn's scheduling; the
only stand-ins are the scripted models.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import anyio
import pytest
from pydantic import Field

from tool_services import tool_services
from wakeful.events import user_input
from wakeful.messages import Message, ToolCall, ToolMessage
from wakeful.models import FunctionModel, ScriptedModel, call, say, use
from wakeful.models.base import ToolDefinition
from wakeful.runtime import Runtime
from wakeful.safety.audit import AuditLog
from wakeful.safety.commands import CommandPolicy, PolicySettings
from wakeful.safety.gate import CallGate
from wakeful.safety.sidecar import ModelSidecar, RuleSidecar, SidecarSettings
from wakeful.services import Services
from wakeful.store.sqlite import Store
from wakeful.tools.cache import ResultCache
from wakeful.tools.pipeline import (
    CachedExecutor,
    CallToolUnwrapping,
    RegistryExecutor,
    assemble_pipeline,
    concurrent_run,
)
from wakeful.tools.registry import ToolRegistry
from wakeful.tools.spec import ToolAnnotations, ToolContext, tool

pytestmark = pytest.mark.anyio

RAN: list[str] = []


@pytest.fixture(autouse=True)
def _clear_ran() -> None:
    RAN.clear()


@tool
async def pretend_shell(command: Annotated[str, Field(description="A command, e.g. 'ls'")]) -> str:
    """Records the command instead of running it (so a test can never run `rm -rf /`)."""
    RAN.append(command)
    return f"ran {command}"


@tool(annotations=ToolAnnotations(read_only=True))
async def read_note(path: Annotated[str, Field(description="A note, e.g. 'a'")]) -> str:
    """Reads a note."""
    RAN.append(f"read {path}")
    return f"note {path}"


@tool
async def whoami(ctx: ToolContext) -> str:
    """Says which call it runs as."""
    return f"{ctx.tool_name} {ctx.call_id}"


TOOLS = (pretend_shell, read_note, whoami)


def shell(command: str, call_id: str = "c1") -> ToolCall:
    return call("pretend_shell", call_id=call_id, command=command)


def through_call_tool(name: str, call_id: str = "c1", **arguments: Any) -> ToolCall:
    return call("call_tool", call_id=call_id, name=name, arguments=arguments)


def gate(workdir: Path, **kwargs: Any) -> CallGate:
    settings = SidecarSettings(shell_tools={"pretend_shell": "command"})
    sidecar = RuleSidecar(settings, CommandPolicy(PolicySettings(workspace=workdir)))
    return CallGate(sidecar=sidecar, **kwargs)


def no_messages() -> Sequence[Message]:
    return ()


def context(services: Services, a_call: ToolCall, session: str = "main") -> ToolContext:
    return ToolContext(session, a_call.id, a_call.name, services)


@contextmanager
def audited_rows(path: Path) -> Iterator[list[tuple[str, str]]]:
    """(tool, status) of each audit row of the store at `path`, once it is closed."""
    rows: list[tuple[str, str]] = []
    yield rows
    reader = Store.read_only(path)
    try:
        rows.extend((r.tool, r.status) for r in reader.audit_rows())
    finally:
        reader.close()


# --- each wrapper alone --------------------------------------------------------------------------


async def test_the_registry_executor_runs_the_named_tool_or_says_it_is_unknown() -> None:
    executor = RegistryExecutor(ToolRegistry(TOOLS))
    async with tool_services() as (services, _):
        ran = await executor.execute(shell("ls"), context(services, shell("ls")))
        missing = call("send_email", call_id="c2")
        unknown = await executor.execute(missing, context(services, missing))
    assert ran.content == "ran ls" and not ran.is_error
    assert unknown.is_error and "Unknown tool 'send_email'" in unknown.content
    assert executor.tool_for(shell("ls")) is pretend_shell


async def test_call_tool_runs_as_the_call_it_stands_for_under_the_same_id() -> None:
    executor = CallToolUnwrapping(RegistryExecutor(ToolRegistry(TOOLS)))
    wrapped = through_call_tool("whoami", call_id="c7")
    async with tool_services() as (services, _):
        result = await executor.execute(wrapped, context(services, wrapped))
    assert result.content == "whoami c7"
    assert executor.tool_for(wrapped) is whoami


async def test_with_discovery_an_unknown_name_is_answered_with_how_to_find_a_tool() -> None:
    registry = ToolRegistry(TOOLS)
    registry.unavailable = {"held_back": "held_back changed since it was pinned."}
    executor = assemble_pipeline(registry, discovery=True)
    async with tool_services() as (services, _):
        missing = through_call_tool("send_email", to="bob")
        found = await executor.execute(missing, context(services, missing))
        held = through_call_tool("held_back")
        explained = await executor.execute(held, context(services, held))
    assert found.is_error and "Find one for the need with discover_tools" in found.content
    assert explained.content == "held_back changed since it was pinned."


async def test_the_gate_alone_refuses_a_denied_call_before_the_tool(tmp_path: Path) -> None:
    executor = gate(tmp_path).guard(RegistryExecutor(ToolRegistry(TOOLS)), no_messages)
    async with tool_services(tmp_path) as (services, _):
        refused = await executor.execute(shell("rm -rf /"), context(services, shell("rm -rf /")))
        allowed = await executor.execute(shell("ls", "c2"), context(services, shell("ls", "c2")))
    assert RAN == ["ls"]
    assert refused.is_error and "pretend_shell was not run" in refused.content
    assert allowed.content == "ran ls"


async def test_the_cache_alone_runs_a_repeated_read_only_call_once() -> None:
    cache = ResultCache()
    executor = CachedExecutor(RegistryExecutor(ToolRegistry(TOOLS)), cache)
    async with tool_services() as (services, _):
        for call_id in ("c1", "c2"):
            read = call("read_note", call_id=call_id, path="a")
            assert (await executor.execute(read, context(services, read))).content == "note a"
        await executor.execute(shell("touch a"), context(services, shell("touch a")))
        read = call("read_note", call_id="c3", path="a")
        await executor.execute(read, context(services, read))
    assert RAN == ["read a", "touch a", "read a"]  # the write cleared the cache
    assert (cache.hits, cache.misses) == (1, 2)


# --- composed ------------------------------------------------------------------------------------


async def test_a_denied_call_never_reaches_the_tool_and_is_audited(tmp_path: Path) -> None:
    db = tmp_path / "w.db"
    with audited_rows(db) as rows:
        async with await Store.open(db) as store, tool_services(tmp_path) as (services, _):
            the_gate = gate(tmp_path, audit=AuditLog(store))
            tools = assemble_pipeline(ToolRegistry(TOOLS), gate=the_gate, cache=ResultCache())
            result = await tools.execute(shell("rm -rf /"), context(services, shell("rm -rf /")))
    assert RAN == [] and result.is_error
    assert rows == [("pretend_shell", "denied")]


async def test_a_cached_call_runs_the_tool_once_but_is_judged_each_time(tmp_path: Path) -> None:
    db = tmp_path / "w.db"
    with audited_rows(db) as rows:
        async with await Store.open(db) as store, tool_services(tmp_path) as (services, _):
            the_gate = gate(tmp_path, audit=AuditLog(store))
            tools = assemble_pipeline(ToolRegistry(TOOLS), gate=the_gate, cache=ResultCache())
            for call_id in ("c1", "c2"):
                read = call("read_note", call_id=call_id, path="a")
                assert (await tools.execute(read, context(services, read))).content == "note a"
    assert RAN == ["read a"]
    assert rows == [("read_note", "ok"), ("read_note", "ok")]


async def test_a_call_tool_call_is_judged_by_the_gate_as_the_inner_tool(tmp_path: Path) -> None:
    db = tmp_path / "w.db"
    with audited_rows(db) as rows:
        async with await Store.open(db) as store, tool_services(tmp_path) as (services, _):
            the_gate = gate(tmp_path, audit=AuditLog(store))
            tools = assemble_pipeline(ToolRegistry(TOOLS), gate=the_gate, discovery=True)
            wrapped = through_call_tool("pretend_shell", command="rm -rf /")
            result = await tools.execute(wrapped, context(services, wrapped))
    assert RAN == []
    assert "The safety checks refused this call; pretend_shell was not run." in result.content
    assert rows == [("pretend_shell", "denied")]


async def test_begin_starts_the_sidecar_on_the_inner_call_before_it_runs(tmp_path: Path) -> None:
    judged: list[str] = []

    async def judge(messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> str:
        judged.append(json.loads(messages[-1].content)["tool"])
        return '{"decision": "allow", "reason": "a source directory the user asked to remove"}'

    the_gate = gate(tmp_path, model_sidecar=ModelSidecar(FunctionModel(judge)))
    tools = assemble_pipeline(ToolRegistry(TOOLS), gate=the_gate)
    wrapped = through_call_tool("pretend_shell", command="rm -rf src")
    async with tool_services(tmp_path) as (services, _), anyio.create_task_group() as tg:
        tools.begin("main", wrapped, tg)  # as the model streams the call
        await anyio.wait_all_tasks_blocked()
        assert judged == ["pretend_shell"] and RAN == []
        result = await tools.execute(wrapped, context(services, wrapped))
    assert result.content == "ran rm -rf src"
    assert judged == ["pretend_shell"]  # the verdict begun while streaming was the one used


async def test_a_discarded_turns_checks_are_not_used_for_a_later_call(tmp_path: Path) -> None:
    judged: list[str] = []

    async def judge(messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> str:
        judged.append(json.loads(messages[-1].content)["tool"])
        return '{"decision": "allow", "reason": "a source directory the user asked to remove"}'

    the_gate = gate(tmp_path, model_sidecar=ModelSidecar(FunctionModel(judge)))
    tools = assemble_pipeline(ToolRegistry(TOOLS), gate=the_gate)
    async with tool_services(tmp_path) as (services, _), anyio.create_task_group() as tg:
        tools.begin("main", shell("rm -rf src"), tg)
        await anyio.wait_all_tasks_blocked()
        tools.discard("main")  # the turn was interrupted: its calls never run
        result = await tools.execute(shell("ls"), context(services, shell("ls")))
    assert result.content == "ran ls" and judged == ["pretend_shell"]


async def test_without_a_gate_or_cache_the_pipeline_only_unwraps_and_runs() -> None:
    tools = assemble_pipeline(ToolRegistry(TOOLS))
    async with tool_services() as (services, _):
        for call_id in ("c1", "c2"):
            wrapped = through_call_tool("read_note", call_id=call_id, path="a")
            assert (await tools.execute(wrapped, context(services, wrapped))).content == "note a"
    assert RAN == ["read a", "read a"]


# --- read-only concurrency -----------------------------------------------------------------------


def test_a_run_of_read_only_calls_goes_together_and_a_write_alone() -> None:
    tools = assemble_pipeline(ToolRegistry(TOOLS))
    calls = [
        call("read_note", call_id="r1", path="a"),
        through_call_tool("read_note", call_id="r2", path="b"),
        shell("touch c", "w1"),
        call("read_note", call_id="r3", path="c"),
        call("read_note", call_id="r4", path="d"),
    ]
    assert concurrent_run(calls, 0, tools) == 2  # call_tool counts as the read it stands for
    assert concurrent_run(calls, 2, tools) == 3
    assert concurrent_run(calls, 3, tools) == 5
    assert concurrent_run(calls, 3, tools, answered={"r4"}) == 4  # a refused call ends the run


class Overlap:
    """Read-only tools that each wait until both run, and a write that notes what runs with it."""

    def __init__(self) -> None:
        self.reading = 0
        self.both_reading = anyio.Event()
        self.seen_by_write: list[int] = []

        @tool(annotations=ToolAnnotations(read_only=True), name="slow_read")
        async def slow_read(path: Annotated[str, Field(description="A path, e.g. 'a'")]) -> str:
            """Reads slowly."""
            self.reading += 1
            if self.reading == 2:
                self.both_reading.set()
            with anyio.fail_after(5):
                await self.both_reading.wait()  # only ends if the other read runs meanwhile
            self.reading -= 1
            return f"read {path}"

        @tool(name="write_down")
        async def write_down(text: Annotated[str, Field(description="Text, e.g. 'hi'")]) -> str:
            """Writes."""
            self.seen_by_write.append(self.reading)
            return "written"

        self.tools = [slow_read, write_down]


async def test_read_only_calls_of_one_turn_overlap_while_a_write_waits(tmp_path: Path) -> None:
    overlap = Overlap()
    turn = use(
        call("slow_read", path="a"),
        call("slow_read", path="b"),
        call("write_down", text="done"),
    )
    model = ScriptedModel([turn, say("")])
    async with Runtime(
        model=model,
        tools=overlap.tools,
        with_core_tools=False,
        with_timers=False,
        workdir=tmp_path,
    ) as rt:
        await rt.submit(user_input("read both, then write"))
        await rt.wait_idle()
        results = [
            m.content for m in rt.sessions["main"].trajectory.messages if isinstance(m, ToolMessage)
        ]
    assert sorted(results) == ["read a", "read b", "written"]
    assert results[-1] == "written"  # after both reads
    assert overlap.seen_by_write == [0]  # no read was running while it wrote
