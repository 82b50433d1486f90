"""AnthropicModel against a local server speaking the Messages API, through the real SDK."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

import anyio
import pytest

import wakeful.models.guard as guard
from wakeful.errors import (
    ModelAPIError,
    ModelConnectionError,
    ModelRateLimited,
    ModelRequestsDisabled,
)
from wakeful.messages import (
    AssistantMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
    message_from_json,
    message_to_json,
)
from wakeful.models import (
    AnthropicModel,
    Backoff,
    ModelRequest,
    StreamPart,
    TextDelta,
    ThinkingDelta,
    ToolCallPart,
    ToolDefinition,
    TurnEnd,
    Usage,
)

from .wire_servers import Reply, WireServer, serve_wire, sse

pytestmark = pytest.mark.anyio

FAST = Backoff(initial=0.01, maximum=0.5)
HELLO = ModelRequest(messages=[UserMessage(content="Say hello.")])


def event(kind: str, **fields: Any) -> bytes:
    return sse({"type": kind, **fields}, event=kind)


def message_start(*, input_tokens: int = 10, cache_read: int = 0, cache_write: int = 0) -> bytes:
    usage = {
        "input_tokens": input_tokens,
        "output_tokens": 1,
        "cache_read_input_tokens": cache_read,
        "cache_creation_input_tokens": cache_write,
    }
    message: dict[str, Any] = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": usage,
    }
    return event("message_start", message=message)


def block_start(index: int, block: dict[str, Any]) -> bytes:
    return event("content_block_start", index=index, content_block=block)


def block_delta(index: int, delta: dict[str, Any]) -> bytes:
    return event("content_block_delta", index=index, delta=delta)


def block_stop(index: int) -> bytes:
    return event("content_block_stop", index=index)


def message_end(stop_reason: str, *, output_tokens: int = 5) -> list[bytes]:
    return [
        event(
            "message_delta",
            delta={"stop_reason": stop_reason, "stop_sequence": None},
            usage={"output_tokens": output_tokens},
        ),
        event("message_stop"),
    ]


def text_frames(*pieces: str) -> list[bytes]:
    return [
        message_start(),
        block_start(0, {"type": "text", "text": ""}),
        *[block_delta(0, {"type": "text_delta", "text": piece}) for piece in pieces],
        block_stop(0),
        *message_end("end_turn"),
    ]


def tool_frames(index: int, call_id: str, name: str, *json_pieces: str) -> list[bytes]:
    return [
        block_start(index, {"type": "tool_use", "id": call_id, "name": name, "input": {}}),
        *[block_delta(index, {"type": "input_json_delta", "partial_json": p}) for p in json_pieces],
        block_stop(index),
    ]


def error_body(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


def error_reply(status: int, kind: str, message: str, **headers: str) -> Reply:
    return Reply(status=status, json_body=error_body(kind, message), headers=headers)


@pytest.fixture
async def server() -> AsyncIterator[WireServer]:
    async with serve_wire(WireServer()) as running:
        yield running


@pytest.fixture
async def model(server: WireServer) -> AsyncIterator[AnthropicModel]:
    async with AnthropicModel(
        "claude-test",
        base_url=server.url,
        api_key="sk-ant-test",
        max_retries=2,
        backoff=FAST,
        timeout=5,
    ) as opened:
        yield opened


async def collect(model: AnthropicModel, request: ModelRequest = HELLO) -> list[StreamPart]:
    async with aclosing(model.stream(request)) as parts:
        return [part async for part in parts]


async def test_text_streams_as_deltas_then_one_turn_end_with_usage(
    server: WireServer, model: AnthropicModel
) -> None:
    server.script(
        Reply(
            frames=[
                message_start(input_tokens=3, cache_read=100, cache_write=20),
                event("ping"),
                block_start(0, {"type": "text", "text": ""}),
                block_delta(0, {"type": "text_delta", "text": "Hel"}),
                block_delta(0, {"type": "text_delta", "text": "lo"}),
                block_stop(0),
                *message_end("end_turn", output_tokens=7),
            ]
        )
    )

    parts = await collect(model)

    assert parts == [
        TextDelta("Hel"),
        TextDelta("lo"),
        TurnEnd(
            message=AssistantMessage(content="Hello"),
            usage=Usage(input_tokens=123, output_tokens=7, cache_read_tokens=100),
            stop_reason="stop",
        ),
    ]
    [sent] = server.requests
    assert sent.path == "/v1/messages"
    assert sent.headers["authorization"] == "Bearer sk-ant-test"
    assert sent.body["stream"] is True
    assert sent.body["max_tokens"] == 4096
    assert sent.body["cache_control"] == {"type": "ephemeral"}


async def test_messages_and_tools_are_translated_to_the_wire(
    server: WireServer, model: AnthropicModel
) -> None:
    server.script(Reply(frames=text_frames("ok")))
    good = ToolCall(id="toolu_1", name="read_file", arguments='{"path": "a.txt"}')
    bad = ToolCall(id="toolu_2", name="read_file", arguments='{"path": ')
    request = ModelRequest(
        messages=[
            SystemMessage(content="Be brief."),
            UserMessage(content="Read two files."),
            AssistantMessage(content="Reading.", thinking="a plan", tool_calls=[good, bad]),
            ToolMessage(tool_call_id="toolu_1", name="read_file", content="hello"),
            ToolMessage(tool_call_id="toolu_2", name="read_file", content="bad", status="error"),
            UserMessage(content="Also: hurry."),
        ],
        tools=[ToolDefinition("read_file", "Read a file.", {"type": "object", "properties": {}})],
        max_tokens=100,
    )

    await collect(model, request)

    body = server.requests[0].body
    assert body["model"] == "claude-test"
    assert body["max_tokens"] == 100
    assert body["system"] == "Be brief."
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Read two files."}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Reading."},
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "read_file",
                    "input": {"path": "a.txt"},
                },
                {"type": "tool_use", "id": "toolu_2", "name": "read_file", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "is_error": False,
                    "content": "hello",
                },
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_2",
                    "is_error": True,
                    "content": "bad",
                },
                {"type": "text", "text": "Also: hurry."},
            ],
        },
    ]
    assert body["tools"] == [
        {
            "name": "read_file",
            "description": "Read a file.",
            "input_schema": {"type": "object", "properties": {}},
        }
    ]


async def test_parallel_tool_calls_are_emitted_as_each_block_stops(
    server: WireServer, model: AnthropicModel
) -> None:
    server.script(
        Reply(
            frames=[
                message_start(),
                *tool_frames(0, "toolu_a", "read_file", '{"pa', 'th": "a.txt"}'),
                *tool_frames(1, "toolu_b", "run_shell", '{"command"', ': "ls"}'),
                *message_end("tool_use"),
            ],
            frame_delay=0.03,
        )
    )
    received: list[tuple[float, StreamPart]] = []

    async with aclosing(model.stream(HELLO)) as parts:
        async for part in parts:
            received.append((time.monotonic(), part))

    call_a = ToolCall(id="toolu_a", name="read_file", arguments='{"path": "a.txt"}')
    call_b = ToolCall(id="toolu_b", name="run_shell", arguments='{"command": "ls"}')
    assert [part for _, part in received] == [
        ToolCallPart(call_a),
        ToolCallPart(call_b),
        TurnEnd(
            message=AssistantMessage(tool_calls=[call_a, call_b]),
            usage=Usage(input_tokens=10, output_tokens=5),
            stop_reason="tool_calls",
        ),
    ]
    # The first call is out when its block stops, four frames before the second one.
    assert received[1][0] - received[0][0] > 0.1


async def test_thinking_streams_and_its_signed_block_is_replayed_with_the_tool_turn(
    server: WireServer, model: AnthropicModel
) -> None:
    model.thinking = {"type": "enabled", "budget_tokens": 1024}
    server.script(
        Reply(
            frames=[
                message_start(),
                block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
                block_delta(0, {"type": "thinking_delta", "thinking": "Let me "}),
                block_delta(0, {"type": "thinking_delta", "thinking": "look."}),
                block_delta(0, {"type": "signature_delta", "signature": "sig-123"}),
                block_stop(0),
                *tool_frames(1, "toolu_1", "read_file", '{"path": "a.txt"}'),
                *message_end("tool_use"),
            ]
        ),
        Reply(frames=text_frames("It says hello.")),
    )

    parts = await collect(model)

    assert parts[:2] == [ThinkingDelta("Let me "), ThinkingDelta("look.")]
    end = parts[-1]
    assert isinstance(end, TurnEnd)
    assert end.message.thinking == "Let me look."
    assert server.requests[0].body["thinking"] == {"type": "enabled", "budget_tokens": 1024}

    # As after a restart: the message comes back from the store to a new model instance.
    stored = message_from_json(message_to_json(end.message))
    follow_up = ModelRequest(
        messages=[
            UserMessage(content="Read a.txt."),
            stored,
            ToolMessage(tool_call_id="toolu_1", name="read_file", content="hello"),
        ]
    )
    async with AnthropicModel(
        "claude-test", base_url=server.url, api_key="sk-ant-test", backoff=FAST, timeout=5
    ) as restarted:
        await collect(restarted, follow_up)

    assistant_turn = server.requests[1].body["messages"][1]
    assert assistant_turn["content"][0] == {
        "type": "thinking",
        "thinking": "Let me look.",
        "signature": "sig-123",
    }


async def test_malformed_tool_input_is_kept_verbatim(
    server: WireServer, model: AnthropicModel
) -> None:
    server.script(
        Reply(
            frames=[
                message_start(),
                *tool_frames(0, "toolu_x", "write_file", '{"path": "a.txt", ', '"content": "unt'),
                *message_end("tool_use"),
            ]
        )
    )

    parts = await collect(model)

    assert parts[0] == ToolCallPart(
        ToolCall(id="toolu_x", name="write_file", arguments='{"path": "a.txt", "content": "unt')
    )


async def test_cancelling_the_consumer_closes_the_http_stream(
    server: WireServer, model: AnthropicModel
) -> None:
    words = [block_delta(0, {"type": "text_delta", "text": "word "}) for _ in range(20)]
    start = [message_start(), block_start(0, {"type": "text", "text": ""})]
    server.script(Reply(frames=[*start, *words], frame_delay=1.0, slow_from=3))
    first_part = anyio.Event()

    async def consume() -> None:
        async with aclosing(model.stream(HELLO)) as parts:
            async for _ in parts:
                first_part.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(consume)
        with anyio.fail_after(4):
            await first_part.wait()
        await anyio.sleep(0.05)  # the consumer now waits inside the SDK for the next event
        cancelled_at = time.monotonic()
        tg.cancel_scope.cancel()

    assert time.monotonic() - cancelled_at < 0.5
    with anyio.fail_after(2):
        await server.client_hung_up.wait()


async def test_429_waits_for_retry_after_ms_then_succeeds(
    server: WireServer, model: AnthropicModel
) -> None:
    server.script(
        error_reply(429, "rate_limit_error", "Slow down.", **{"retry-after-ms": "300"}),
        Reply(frames=text_frames("hi")),
    )

    parts = await collect(model)

    assert isinstance(parts[-1], TurnEnd)
    first, second = server.requests
    assert 0.3 <= second.at - first.at < 0.6


async def test_overloaded_is_retried_then_succeeds(
    server: WireServer, model: AnthropicModel
) -> None:
    server.script(
        error_reply(529, "overloaded_error", "Overloaded."), Reply(frames=text_frames("hi"))
    )

    parts = await collect(model)

    assert parts[-1] == TurnEnd(
        message=AssistantMessage(content="hi"), usage=Usage(10, 5), stop_reason="stop"
    )
    assert len(server.requests) == 2


async def test_an_error_event_before_any_part_is_retried(
    server: WireServer, model: AnthropicModel
) -> None:
    overloaded = sse(error_body("overloaded_error", "Overloaded."), event="error")
    server.script(Reply(frames=[message_start(), overloaded]), Reply(frames=text_frames("hi")))

    parts = await collect(model)

    assert parts[0] == TextDelta("hi")
    assert len(server.requests) == 2


async def test_an_error_event_after_parts_is_raised_without_retrying(
    server: WireServer, model: AnthropicModel
) -> None:
    overloaded = sse(error_body("overloaded_error", "Overloaded."), event="error")
    frames = text_frames("one ", "two")
    server.script(Reply(frames=[*frames[:3], overloaded]), Reply(frames=text_frames("unused")))
    received: list[StreamPart] = []

    with pytest.raises(ModelAPIError) as caught:
        async with aclosing(model.stream(HELLO)) as parts:
            async for part in parts:
                received.append(part)

    assert received == [TextDelta("one ")]
    assert caught.value.status_code == 529
    assert len(server.requests) == 1


async def test_a_stream_that_stalls_before_any_part_times_out_and_is_retried(
    server: WireServer, model: AnthropicModel
) -> None:
    model.timeout = 0.2
    server.script(
        Reply(frames=text_frames("late"), frame_delay=1.0, slow_from=1),
        Reply(frames=text_frames("on time")),
    )

    parts = await collect(model)

    assert parts[0] == TextDelta("on time")
    assert len(server.requests) == 2


async def test_rate_limit_raises_after_the_retries_are_exhausted(
    server: WireServer, model: AnthropicModel
) -> None:
    server.script(*[error_reply(429, "rate_limit_error", "Slow down.", **{"retry-after": "0"})] * 3)

    with pytest.raises(ModelRateLimited) as caught:
        await collect(model)

    assert caught.value.provider == "anthropic"
    assert caught.value.retry_after == 0
    assert len(server.requests) == 3


async def test_server_errors_raise_model_api_error_after_the_retries(
    server: WireServer, model: AnthropicModel
) -> None:
    server.script(*[error_reply(500, "api_error", "Internal error.")] * 3)

    with pytest.raises(ModelAPIError) as caught:
        await collect(model)

    assert caught.value.status_code == 500
    assert len(server.requests) == 3


async def test_a_connection_dropped_mid_stream_raises_without_retrying(
    server: WireServer, model: AnthropicModel
) -> None:
    server.script(
        Reply(frames=text_frames("one ", "two ", "three"), drop_after=4),
        Reply(frames=text_frames("unused")),
    )
    received: list[StreamPart] = []

    with pytest.raises(ModelConnectionError):
        async with aclosing(model.stream(HELLO)) as parts:
            async for part in parts:
                received.append(part)

    assert received == [TextDelta("one "), TextDelta("two ")]
    assert len(server.requests) == 1


async def test_a_rejected_api_key_says_where_to_fix_it(
    server: WireServer, model: AnthropicModel
) -> None:
    server.script(error_reply(401, "authentication_error", "invalid x-api-key"))

    with pytest.raises(ModelAPIError) as caught:
        await collect(model)

    assert caught.value.status_code == 401
    assert "invalid x-api-key" in str(caught.value)
    assert "ANTHROPIC_API_KEY" in str(caught.value)
    assert len(server.requests) == 1


async def test_a_rejected_key_read_from_a_configured_variable_names_that_variable(
    server: WireServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_KEY", "sk-ant-mine")
    server.script(error_reply(401, "authentication_error", "invalid x-api-key"))

    async with AnthropicModel(
        "claude-test", base_url=server.url, api_key_env="MY_KEY", max_retries=0
    ) as m:
        with pytest.raises(ModelAPIError) as caught:
            await collect(m)

    assert caught.value.status_code == 401
    assert "$MY_KEY (api_key_env in wakeful.toml)" in str(caught.value)
    assert "ANTHROPIC_API_KEY" not in str(caught.value)
    assert server.requests[0].headers["authorization"] == "Bearer sk-ant-mine"


async def test_the_guard_blocks_remote_servers_before_any_request() -> None:
    assert guard.ALLOW_MODEL_REQUESTS is False
    model = AnthropicModel("claude-test", base_url="https://api.example.com")

    with pytest.raises(ModelRequestsDisabled, match=r"api\.example\.com"):
        await collect(model)

    assert model._client is None  # no SDK client, so no connection was ever opened


def test_tool_use_input_sent_back_is_always_an_object() -> None:
    from wakeful.models.anthropic import wire_input

    assert wire_input('{"a": 1}') == {"a": 1}
    assert wire_input("[1, 2]") == {}
    assert wire_input('{"a": ') == {}
    assert json.dumps(wire_input("{}")) == "{}"
