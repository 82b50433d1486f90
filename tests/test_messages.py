"""The trajectory invariant checker."""

from __future__ import annotations

from typing import Any

import pydantic
from openai.types.chat import ChatCompletionMessageParam

from wakeful.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
    check_trajectory,
    message_from_json,
    message_to_json,
    to_openai_shape,
)

A = ToolCall(id="a", name="t", arguments="{}")
B = ToolCall(id="b", name="t", arguments="{}")


def test_a_paired_trajectory_is_well_formed() -> None:
    msgs: list[Message] = [
        SystemMessage(content="s"),
        UserMessage(content="u"),
        AssistantMessage(tool_calls=[A, B]),
        ToolMessage(tool_call_id="b", name="t", content="2"),
        ToolMessage(tool_call_id="a", name="t", content="1", status="placeholder"),
        UserMessage(content="[TOOL_RESULT …]"),
        AssistantMessage(content="done"),
    ]
    assert check_trajectory(msgs) == []


def test_each_way_of_breaking_the_pairing_is_reported() -> None:
    unanswered: list[Message] = [AssistantMessage(tool_calls=[A]), UserMessage(content="x")]
    assert "comes before results of calls ['a']" in check_trajectory(unanswered)[0]
    orphan: list[Message] = [
        UserMessage(content="x"),
        ToolMessage(tool_call_id="z", name="t", content=""),
    ]
    assert "answers no open tool call" in check_trajectory(orphan)[0]
    twice: list[Message] = [
        AssistantMessage(tool_calls=[A]),
        ToolMessage(tool_call_id="a", name="t", content=""),
        ToolMessage(tool_call_id="a", name="t", content=""),
    ]
    assert check_trajectory(twice) == ["message 2: tool result for 'a' answers no open tool call"]
    assert check_trajectory([AssistantMessage(tool_calls=[A])]) == [
        "end: calls ['a'] have no result yet"
    ]


def test_messages_round_trip_through_json() -> None:
    for m in [
        SystemMessage(content="s"),
        UserMessage(content="u", event_ids=["ev_1"], mark="events"),
        AssistantMessage(content="c", thinking="t", tool_calls=[A]),
        ToolMessage(tool_call_id="a", name="t", content="“quoted”\r\n", status="cancelled"),
    ]:
        assert message_from_json(message_to_json(m)) == m


def test_openai_shape() -> None:
    assert to_openai_shape(AssistantMessage(content="", tool_calls=[A])) == {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "t", "arguments": "{}"}}
        ],
    }
    assert to_openai_shape(ToolMessage(tool_call_id="a", name="t", content="r")) == {
        "role": "tool",
        "tool_call_id": "a",
        "content": "r",
    }


def test_the_openai_shape_is_what_the_openai_sdk_accepts() -> None:
    # Validated with the SDK's own request types: a message the API would reject fails here.
    adapter: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(ChatCompletionMessageParam)
    call = ToolCall.make("get_weather", city="Paris")
    trajectory: list[Message] = [
        SystemMessage(content="s"),
        UserMessage(content="weather?"),
        AssistantMessage(content="Let me look.", tool_calls=[call]),
        ToolMessage(tool_call_id=call.id, name="get_weather", content="sunny"),
        AssistantMessage(content="Sunny."),
    ]
    for message in trajectory:
        shape = to_openai_shape(message)
        validated = adapter.validate_python(shape)
        if "tool_calls" in validated:
            validated["tool_calls"] = [dict(c) for c in validated["tool_calls"]]
        assert validated == shape  # nothing the SDK does not know, nothing missing
    calls = to_openai_shape(trajectory[2])["tool_calls"]
    assert calls == [
        {
            "id": call.id,
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
        }
    ]
    assert to_openai_shape(trajectory[3]) == {
        "role": "tool",
        "tool_call_id": call.id,
        "content": "sunny",
    }
