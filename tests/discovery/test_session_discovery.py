"""Active tool discovery in a running session: the prompt holds a few core tools, the rest are
found with discover_tools and called with call_tool, and the prefix never changes (experiment
4-6 of the chapter, with a scripted model over 125 tools of real MCP servers' catalogs)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from catalog_servers import catalog_servers, tool_count

from wakeful.discovery.session_tools import DiscoverySettings
from wakeful.events import user_input
from wakeful.messages import Message, ToolMessage, UserMessage
from wakeful.models import FunctionModel, ScriptedModel, Turn, call, say, use
from wakeful.models.base import ModelRequest, ToolDefinition
from wakeful.runtime import Runtime, core_tools

pytestmark = pytest.mark.anyio


def prefix(request: ModelRequest) -> str:
    """What must not change between requests: the system prompt and the tool definitions."""
    tools = [(t.name, t.description, t.parameters) for t in request.tools]
    return json.dumps([request.messages[0].model_dump(), tools], sort_keys=True)


def results(messages: Sequence[Message], name: str) -> list[dict[str, Any]]:
    return [
        json.loads(m.content) for m in messages if isinstance(m, ToolMessage) and m.name == name
    ]


def last_result(messages: Sequence[Message]) -> ToolMessage | None:
    last = messages[-1]
    return last if isinstance(last, ToolMessage) else None


def experiment_model() -> FunctionModel:
    """Discover a capability, call the tool found for it, report."""

    def play(messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> Turn | str:
        last = last_result(messages)
        if last is None:
            return use(call("discover_tools", need="get the current stock price of a company"))
        if last.name == "discover_tools":
            loaded = [t["name"] for t in json.loads(last.content)["loaded"]]
            chosen = next(n for n in loaded if "current_stock_price" in n)
            return use(call("call_tool", name=chosen, arguments={"symbol": "AAPL"}))
        if last.name == "call_tool":
            return use(call("reply_to_user", text=f"Done: {last.content}"))
        return say("")

    return FunctionModel(play)


def runtime(model: Any, tmp_path: Path, **kwargs: Any) -> Runtime:
    return Runtime(
        model=model,
        with_timers=False,
        workdir=tmp_path,
        discovery=DiscoverySettings(),
        mcp_in_process=catalog_servers(),
        **kwargs,
    )


async def test_experiment_4_6_discover_then_call_with_a_prefix_that_never_changes(
    tmp_path: Path,
) -> None:
    model = experiment_model()
    async with runtime(model, tmp_path) as rt:
        assert len(rt.registry) >= 120
        assert tool_count() == 125
        await rt.submit(user_input("What is Apple's stock price right now?"))
        await rt.wait_idle()
        messages = rt.sessions["main"].trajectory.messages
        loaded = rt.sessions["main"].loaded_tools
    (found,) = results(messages, "discover_tools")
    assert found["found"] is True
    assert "MCP-Yahoo-Finance" in {t["server"] for t in found["loaded"]}
    (called,) = [m for m in messages if isinstance(m, ToolMessage) and m.name == "call_tool"]
    assert called.content == (
        'MCP-Yahoo-Finance/get_current_stock_price called with {"symbol": "AAPL"}'
    )
    assert "get_current_stock_price" in loaded
    # The prompt: core tools + discover_tools + call_tool only, identical on every request.
    core = {t.name for t in core_tools()} | {"discover_tools", "call_tool"}
    assert {t.name for t in model.requests[0].tools} == core
    assert len(model.requests) == 4
    assert len({prefix(r) for r in model.requests}) == 1
    system = model.requests[0].messages[0].content
    assert "125 more tools are available through discover_tools" in system
    assert "- query (" in system and "- act (" in system


async def test_rediscovering_a_loaded_tool_does_not_append_it_again(tmp_path: Path) -> None:
    need = "get the current stock price of a company"
    model = ScriptedModel(
        [
            use(call("discover_tools", need=need)),
            use(call("discover_tools", need=need)),
            say(""),
            say(""),
        ]
    )
    async with runtime(model, tmp_path) as rt:
        await rt.submit(user_input("prices?"))
        await rt.wait_idle()
        await rt.submit(user_input("and now?"))
        await rt.wait_idle()
        messages = rt.sessions["main"].trajectory.messages
    first, second = results(messages, "discover_tools")
    assert first["loaded"] and not first["already_loaded"]
    assert second["loaded"] == []
    assert set(second["already_loaded"]) <= {t["name"] for t in first["loaded"]}
    assert second["already_loaded"]
    status = [m.content for m in messages if isinstance(m, UserMessage)][-1]
    assert "[Status] tools loaded: " in status
    assert "get_current_stock_price" in status


async def test_a_need_nothing_matches_gets_no_tool_and_advice(tmp_path: Path) -> None:
    model = ScriptedModel(
        [use(call("discover_tools", need="qwzx vlorp frobnicate snarf")), say("")]
    )
    async with runtime(model, tmp_path) as rt:
        await rt.submit(user_input("?"))
        await rt.wait_idle()
        (answer,) = results(rt.sessions["main"].trajectory.messages, "discover_tools")
    assert answer["found"] is False
    assert answer["loaded"] == []
    assert len(answer["closest_weak_candidates"]) <= 3
    assert "code_interpreter" in answer["advice"] or "ask the user" in answer["advice"]


async def test_call_tool_for_an_unknown_name_says_how_to_find_one(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            use(call("call_tool", name="teleport", arguments={})),
            use(call("call_tool", name="x", arguments="not an object")),
            use(call("call_tool", name="call_tool", arguments={})),
            say(""),
        ]
    )
    async with runtime(model, tmp_path) as rt:
        await rt.submit(user_input("go"))
        await rt.wait_idle()
        unknown, malformed, itself = [
            m for m in rt.sessions["main"].trajectory.messages if isinstance(m, ToolMessage)
        ]
    assert unknown.status == "error"
    assert "There is no tool named 'teleport'" in unknown.content
    assert "discover_tools" in unknown.content
    assert malformed.status == "error"
    assert "arguments" in malformed.content
    assert itself.status == "error"
    assert "call_tool cannot call itself" in itself.content


async def test_loaded_tools_survive_a_restart(tmp_path: Path) -> None:
    store = tmp_path / "w.db"
    need = "get the current stock price of a company"
    first = ScriptedModel([use(call("discover_tools", need=need)), say("")])
    async with runtime(first, tmp_path, store_path=store) as rt:
        await rt.submit(user_input("prices?"))
        await rt.wait_idle()
        before = list(rt.sessions["main"].loaded_tools)
    again = ScriptedModel([say("")])
    async with runtime(again, tmp_path, store_path=store) as rt:
        session = await rt.session("main")
        assert session.loaded_tools == before
    assert before
