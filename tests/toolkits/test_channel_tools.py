"""The channel tools in a running runtime: the agent connects a channel, is woken by what it
delivers, lists and disconnects it; bad calls come back as tool errors it can act on."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from line_channels import KIND, append, until
from tool_services import refused, tool_services
from wakeful.events import user_input
from wakeful.messages import Message, ToolMessage, UserMessage
from wakeful.models import FunctionModel, Turn, call, say, use
from wakeful.models.base import ToolDefinition
from wakeful.runtime import Runtime
from wakeful.toolkits.triggers.channels import (
    CHANNEL_TOOLS,
    connect_channel,
    disconnect_channel,
    list_channels,
)
from wakeful.tools.lint import lint_tool
from wakeful.tools.spec import Tool

pytestmark = pytest.mark.anyio

KINDS = {"lines": KIND}


def tool_results(rt: Runtime) -> list[Any]:
    messages = rt.sessions["main"].trajectory.messages
    return [m.content for m in messages if isinstance(m, ToolMessage)]


def scripted(
    calls: dict[str, Any],
) -> Callable[[Sequence[Message], Sequence[ToolDefinition]], Turn]:
    """A model that answers each user text in `calls` with that tool call, once."""

    def script(messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> Turn:
        last = messages[-1]
        if isinstance(last, UserMessage) and last.content in calls:
            name, arguments = calls[last.content]
            return use(call(name, **arguments))
        return say("")

    return script


async def test_the_agent_connects_a_channel_is_woken_by_it_and_disconnects_it(
    tmp_path: Path,
) -> None:
    feed = tmp_path / "feed.jsonl"

    model = FunctionModel(
        scripted(
            {
                "watch the feed": (
                    "connect_channel",
                    {
                        "kind": "lines",
                        "name": "feed",
                        "settings": {"path": str(feed)},
                        "filter": {"keywords": ["urgent"]},
                    },
                ),
                "what is connected?": ("list_channels", {}),
                "stop watching": ("disconnect_channel", {"name": "lines:feed"}),
            }
        )
    )
    async with Runtime(
        model=model, store_path=tmp_path / "w.db", channel_kinds=KINDS, workdir=tmp_path
    ) as rt:
        await rt.submit(user_input("watch the feed"))
        await rt.wait_idle()
        names = [t.name for t in model.requests[0].tools]
        assert {"connect_channel", "disconnect_channel", "list_channels"} <= set(names)
        connected = json.loads(tool_results(rt)[-1])
        assert connected["name"] == "lines:feed" and connected["state"] == "running"
        assert connected["filter"] == {"keywords": ["urgent"]}

        append(
            feed,
            {"from": "ops@example.com", "text": "urgent: the disk is full"},
            {"from": "news@example.com", "text": "our weekly digest"},
        )
        await until(lambda: rt.channels["lines:feed"].last_event_at is not None)
        await rt.wait_idle()
        texts = [
            m.content for m in rt.sessions["main"].trajectory.messages if isinstance(m, UserMessage)
        ]
        assert any("the disk is full" in t for t in texts)
        assert not any("weekly digest" in t for t in texts)

        await rt.submit(user_input("what is connected?"))
        await rt.wait_idle()
        listed = json.loads(tool_results(rt)[-1])
        assert listed["count"] == 1
        [channel] = listed["channels"]
        assert (channel["stored"], channel["filtered"], channel["origin"]) == (1, 1, "connected")

        await rt.submit(user_input("stop watching"))
        await rt.wait_idle()
        assert json.loads(tool_results(rt)[-1]) == {"disconnected": "lines:feed"}
        assert rt.channels == {}


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"kind": "fax", "name": "a", "settings": {}}, "There is no channel kind 'fax'"),
        ({"kind": "lines", "name": "a"}, "field `settings` is required"),
        ({"kind": "lines", "name": "a", "settings": {}}, "invalid settings for a lines channel"),
        (
            {"kind": "lines", "name": "a", "settings": {"path": "f"}, "filter": {"x": 1}},
            "invalid filter: `x`: Extra inputs are not permitted",
        ),
        (
            {"kind": "lines", "name": "a b", "settings": {"path": "f"}},
            "field `name`: String should match pattern",
        ),
    ],
)
async def test_bad_connect_calls_are_tool_errors_naming_the_fix(
    tmp_path: Path, arguments: dict[str, Any], problem: str
) -> None:
    async with Runtime(
        model=FunctionModel(scripted({})), store_path=tmp_path / "w.db", channel_kinds=KINDS
    ) as rt:
        assert problem in await refused(rt.services, connect_channel, **arguments)
        assert problem not in await refused(rt.services, disconnect_channel, name="lines:nothing")
        assert rt.channels == {}


async def test_a_webhook_whose_secret_variable_is_not_set_is_refused_and_not_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What only building the channel finds is the agent's tool error, not a channel that
    crashes and restarts for good (nor one stored for the next start)."""
    monkeypatch.delenv("CI_WEBHOOK_SECRET", raising=False)
    arguments = {
        "kind": "webhook",
        "name": "ci",
        "settings": {"scheme": "github", "secret_env": "CI_WEBHOOK_SECRET", "port": 0},
    }
    async with Runtime(model=FunctionModel(scripted({})), store_path=tmp_path / "w.db") as rt:
        message = await refused(rt.services, connect_channel, **arguments)
        assert "CI_WEBHOOK_SECRET, which is not set" in message
        assert rt.channels == {}
    async with Runtime(model=FunctionModel(scripted({})), store_path=tmp_path / "w.db") as rt:
        assert rt.channels == {}  # nothing was kept to reconnect


async def test_disconnecting_an_unknown_channel_names_the_connected_ones(tmp_path: Path) -> None:
    async with Runtime(
        model=FunctionModel(scripted({})), store_path=tmp_path / "w.db", channel_kinds=KINDS
    ) as rt:
        message = await refused(rt.services, disconnect_channel, name="feed")
    assert "There is no channel 'feed'. The connected channels are: none." in message


async def test_without_a_runtime_the_tools_say_what_is_missing() -> None:
    async with tool_services() as (services, _):
        for channel_tool, arguments in (
            (list_channels, {}),
            (disconnect_channel, {"name": "webhook:ci"}),
            (connect_channel, {"kind": "webhook", "name": "ci", "settings": {}}),
        ):
            assert "runs no event channels" in await refused(services, channel_tool, **arguments)


@pytest.mark.parametrize("channel_tool", CHANNEL_TOOLS, ids=lambda t: t.name)
def test_the_tool_descriptions_follow_the_standard(channel_tool: Tool) -> None:
    assert lint_tool(channel_tool) == []
    for example in channel_tool.spec.examples:
        channel_tool.validate(example)
