"""OpenAIChatModel against a local server speaking Chat Completions, through the real SDK."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

import anyio
import pytest

import wakeful.models.guard as guard
from wakeful.errors import (
    ConfigError,
    ModelAPIError,
    ModelConnectionError,
    ModelRateLimited,
    ModelRequestsDisabled,
    ModelTimeout,
)
from wakeful.messages import (
    AssistantMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from wakeful.models import (
    Backoff,
    ModelRequest,
    OpenAIChatModel,
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
DONE = b"data: [DONE]\n\n"


def chunk(
    delta: dict[str, Any] | None = None,
    *,
    finish: str | None = None,
    usage: dict[str, Any] | None = None,
) -> bytes:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return sse(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "test-model",
            "choices": choices,
            "usage": usage,
        }
    )


def tool_fragment(
    index: int, *, id: str | None = None, name: str | None = None, args: str = ""
) -> bytes:
    function: dict[str, Any] = {"arguments": args}
    call: dict[str, Any] = {"index": index, "function": function}
    if id is not None:
        call |= {"id": id, "type": "function"}
        function["name"] = name
    return chunk({"tool_calls": [call]})


def text_reply(*pieces: str, **options: Any) -> Reply:
    frames = [chunk({"role": "assistant", "content": ""})]
    frames += [chunk({"content": piece}) for piece in pieces]
    frames += [chunk({}, finish="stop"), DONE]
    return Reply(frames=frames, **options)


def error_reply(status: int, message: str, **headers: str) -> Reply:
    return Reply(
        status=status,
        json_body={"error": {"message": message, "type": "error", "code": None}},
        headers=headers,
    )


@pytest.fixture
async def server() -> AsyncIterator[WireServer]:
    async with serve_wire(WireServer()) as running:
        yield running


@pytest.fixture
async def model(
    server: WireServer, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[OpenAIChatModel]:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    async with OpenAIChatModel(
        "test-model", base_url=f"{server.url}/v1", max_retries=2, backoff=FAST, timeout=5
    ) as opened:
        yield opened


async def collect(model: OpenAIChatModel, request: ModelRequest = HELLO) -> list[StreamPart]:
    async with aclosing(model.stream(request)) as parts:
        return [part async for part in parts]


async def test_text_streams_as_deltas_then_one_turn_end_with_usage(
    server: WireServer, model: OpenAIChatModel
) -> None:
    usage = {
        "prompt_tokens": 12,
        "completion_tokens": 5,
        "total_tokens": 17,
        "prompt_tokens_details": {"cached_tokens": 8},
    }
    server.script(
        Reply(
            frames=[
                chunk({"role": "assistant", "content": ""}),
                chunk({"content": "Hel"}),
                chunk({"content": "lo"}),
                chunk({}, finish="stop"),
                chunk(usage=usage),
                DONE,
            ]
        )
    )

    parts = await collect(model)

    assert parts == [
        TextDelta("Hel"),
        TextDelta("lo"),
        TurnEnd(
            message=AssistantMessage(content="Hello"),
            usage=Usage(input_tokens=12, output_tokens=5, cache_read_tokens=8),
            stop_reason="stop",
        ),
    ]
    [sent] = server.requests
    assert sent.path == "/v1/chat/completions"
    assert sent.body["stream"] is True
    assert sent.body["stream_options"] == {"include_usage": True}
    # No key configured: a local server gets a placeholder rather than an SDK error.
    assert sent.headers["authorization"] == "Bearer not-needed"


async def test_messages_and_tools_are_translated_to_the_wire(
    server: WireServer, model: OpenAIChatModel
) -> None:
    server.script(text_reply("ok"))
    good = ToolCall(id="call_1", name="read_file", arguments='{"path": "a.txt"}')
    bad = ToolCall(id="call_2", name="read_file", arguments='{"path": ')
    request = ModelRequest(
        messages=[
            SystemMessage(content="Be brief."),
            UserMessage(content="Read two files."),
            AssistantMessage(content="", thinking="secret plan", tool_calls=[good, bad]),
            ToolMessage(tool_call_id="call_1", name="read_file", content="hello"),
            ToolMessage(
                tool_call_id="call_2", name="read_file", content="bad JSON", status="error"
            ),
        ],
        tools=[ToolDefinition("read_file", "Read a file.", {"type": "object", "properties": {}})],
        max_tokens=100,
    )

    await collect(model, request)

    body = server.requests[0].body
    assert body["model"] == "test-model"
    assert body["max_tokens"] == 100
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Read two files."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "a.txt"}'},
                },
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": "{}"},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "hello"},
        {"role": "tool", "tool_call_id": "call_2", "content": "bad JSON"},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "read_file",
                "description": "Read a file.",
                "parameters": {"type": "object", "properties": {}},
            },
        }
    ]


async def test_parallel_tool_calls_are_assembled_and_each_emitted_when_complete(
    server: WireServer, model: OpenAIChatModel
) -> None:
    server.script(
        Reply(
            frames=[
                chunk({"role": "assistant", "content": None}),
                tool_fragment(0, id="call_a", name="read_file"),
                tool_fragment(0, args='{"pa'),
                tool_fragment(0, args='th": "a.txt"}'),
                tool_fragment(1, id="call_b", name="run_shell", args='{"command"'),
                tool_fragment(1, args=': "ls"}'),
                chunk({}, finish="tool_calls"),
                DONE,
            ],
            frame_delay=0.05,
        )
    )
    received: list[tuple[float, StreamPart]] = []

    async with aclosing(model.stream(HELLO)) as parts:
        async for part in parts:
            received.append((time.monotonic(), part))

    call_a = ToolCall(id="call_a", name="read_file", arguments='{"path": "a.txt"}')
    call_b = ToolCall(id="call_b", name="run_shell", arguments='{"command": "ls"}')
    assert [part for _, part in received] == [
        ToolCallPart(call_a),
        ToolCallPart(call_b),
        TurnEnd(
            message=AssistantMessage(tool_calls=[call_a, call_b]),
            stop_reason="tool_calls",
        ),
    ]
    # The first call is out as soon as the second starts, not when the stream ends.
    assert received[1][0] - received[0][0] > 0.08


async def test_reasoning_content_streams_as_thinking(
    server: WireServer, model: OpenAIChatModel
) -> None:
    server.script(
        Reply(
            frames=[
                chunk({"role": "assistant", "reasoning_content": "Let me "}),
                chunk({"reasoning_content": "think."}),
                chunk({"content": "Done."}),
                chunk({}, finish="stop"),
                DONE,
            ]
        )
    )

    parts = await collect(model)

    assert parts[:3] == [ThinkingDelta("Let me "), ThinkingDelta("think."), TextDelta("Done.")]
    end = parts[-1]
    assert isinstance(end, TurnEnd)
    assert end.message.thinking == "Let me think."
    assert end.message.content == "Done."


async def test_malformed_tool_arguments_are_kept_verbatim(
    server: WireServer, model: OpenAIChatModel
) -> None:
    server.script(
        Reply(
            frames=[
                tool_fragment(0, id="call_x", name="write_file", args='{"path": "a.txt", '),
                tool_fragment(0, args='"content": "unterminated'),
                chunk({}, finish="tool_calls"),
                DONE,
            ]
        )
    )

    parts = await collect(model)

    assert parts[0] == ToolCallPart(
        ToolCall(
            id="call_x",
            name="write_file",
            arguments='{"path": "a.txt", "content": "unterminated',
        )
    )


async def test_cancelling_the_consumer_closes_the_http_stream(
    server: WireServer, model: OpenAIChatModel
) -> None:
    words = [chunk({"content": "word "}) for _ in range(20)]
    server.script(Reply(frames=words, frame_delay=1.0))  # the first word comes at once
    first_part = anyio.Event()

    async def consume() -> None:
        async with aclosing(model.stream(HELLO)) as parts:
            async for _ in parts:
                first_part.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(consume)
        with anyio.fail_after(2):
            await first_part.wait()
        await anyio.sleep(0.05)  # the consumer now waits inside the SDK for the next chunk
        cancelled_at = time.monotonic()
        tg.cancel_scope.cancel()

    assert time.monotonic() - cancelled_at < 0.5
    with anyio.fail_after(2):
        await server.client_hung_up.wait()


async def test_429_waits_for_retry_after_then_succeeds(
    server: WireServer, model: OpenAIChatModel
) -> None:
    server.script(error_reply(429, "Slow down.", **{"retry-after": "0.3"}), text_reply("hi"))

    parts = await collect(model)

    assert parts[-1] == TurnEnd(message=AssistantMessage(content="hi"))
    first, second = server.requests
    assert 0.3 <= second.at - first.at < 0.6


async def test_server_error_is_retried_then_succeeds(
    server: WireServer, model: OpenAIChatModel
) -> None:
    server.script(error_reply(500, "Internal error."), text_reply("hi"))

    parts = await collect(model)

    assert parts[-1] == TurnEnd(message=AssistantMessage(content="hi"))
    assert len(server.requests) == 2


async def test_rate_limit_raises_after_the_retries_are_exhausted(
    server: WireServer, model: OpenAIChatModel
) -> None:
    server.script(*[error_reply(429, "Slow down.", **{"retry-after-ms": "10"})] * 3)

    with pytest.raises(ModelRateLimited) as caught:
        await collect(model)

    assert caught.value.retry_after == 0.01
    assert caught.value.provider == "openai"
    assert len(server.requests) == 3  # one attempt and max_retries=2 retries


async def test_server_errors_raise_model_api_error_after_the_retries(
    server: WireServer, model: OpenAIChatModel
) -> None:
    server.script(*[error_reply(503, "Overloaded.")] * 3)

    with pytest.raises(ModelAPIError) as caught:
        await collect(model)

    assert caught.value.status_code == 503
    assert "Overloaded." in str(caught.value)
    assert len(server.requests) == 3


async def test_a_stalled_stream_times_out_and_is_retried(
    server: WireServer, model: OpenAIChatModel
) -> None:
    model.timeout = 0.2
    server.script(text_reply("late", frame_delay=1.0, slow_from=0), text_reply("on time"))

    parts = await collect(model)

    assert parts[-1] == TurnEnd(message=AssistantMessage(content="on time"))
    assert len(server.requests) == 2


async def test_timeouts_raise_model_timeout_after_the_retries(
    server: WireServer, model: OpenAIChatModel
) -> None:
    model.timeout, model.max_retries = 0.1, 0
    server.script(text_reply("late", frame_delay=1.0, slow_from=0))

    with pytest.raises(ModelTimeout):
        await collect(model)


async def test_a_connection_dropped_mid_stream_raises_without_retrying(
    server: WireServer, model: OpenAIChatModel
) -> None:
    server.script(text_reply("one ", "two ", "three", drop_after=3), text_reply("unused"))
    received: list[StreamPart] = []

    with pytest.raises(ModelConnectionError):
        async with aclosing(model.stream(HELLO)) as parts:
            async for part in parts:
                received.append(part)

    assert received == [TextDelta("one "), TextDelta("two ")]
    assert len(server.requests) == 1


async def test_a_rejected_api_key_says_where_to_fix_it(server: WireServer) -> None:
    server.script(error_reply(401, "Incorrect API key provided."))

    async with OpenAIChatModel("test-model", base_url=f"{server.url}/v1", api_key="sk-bad") as m:
        with pytest.raises(ModelAPIError) as caught:
            await collect(m)

    assert caught.value.status_code == 401
    assert "Incorrect API key provided." in str(caught.value)
    assert "OPENAI_API_KEY" in str(caught.value)
    assert len(server.requests) == 1
    assert server.requests[0].headers["authorization"] == "Bearer sk-bad"


async def test_a_rejected_key_read_from_a_configured_variable_names_that_variable(
    server: WireServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_KEY", "sk-mine")
    server.script(error_reply(401, "Incorrect API key provided."))
    url = f"{server.url}/v1"

    async with OpenAIChatModel("test-model", base_url=url, api_key_env="MY_KEY") as m:
        with pytest.raises(ModelAPIError) as caught:
            await collect(m)

    assert caught.value.status_code == 401
    assert "$MY_KEY (api_key_env in wakeful.toml)" in str(caught.value)
    assert "OPENAI_API_KEY" not in str(caught.value)
    assert server.requests[0].headers["authorization"] == "Bearer sk-mine"


async def test_the_guard_blocks_remote_servers_before_any_request() -> None:
    assert guard.ALLOW_MODEL_REQUESTS is False
    model = OpenAIChatModel("gpt-test", base_url="https://api.example.com/v1")

    with pytest.raises(ModelRequestsDisabled, match=r"api\.example\.com"):
        await collect(model)

    assert model._client is None  # no SDK client, so no connection was ever opened


async def test_the_default_api_without_a_key_is_a_config_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(guard, "ALLOW_MODEL_REQUESTS", True)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    model = OpenAIChatModel("gpt-test")

    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        await collect(model)

    assert model._client is None


async def test_namespaced_tool_names_travel_as_the_wire_allows(
    server: WireServer, model: OpenAIChatModel
) -> None:
    server.script(
        Reply(
            frames=[
                chunk({"role": "assistant", "content": None}),
                tool_fragment(0, id="call_w", name="weather__get", args='{"city": "Oslo"}'),
                chunk({}, finish="tool_calls"),
                DONE,
            ]
        )
    )
    tool = ToolDefinition("weather.get", "The weather.", {"type": "object", "properties": {}})
    earlier = ToolCall(id="call_0", name="weather.get", arguments="{}")
    request = ModelRequest(
        messages=[
            UserMessage(content="weather?"),
            AssistantMessage(tool_calls=[earlier]),
            ToolMessage(tool_call_id="call_0", name="weather.get", content="rain"),
        ],
        tools=[tool],
    )
    parts = await collect(model, request)
    body = server.requests[0].body
    assert body["tools"][0]["function"]["name"] == "weather__get"
    assert body["messages"][1]["tool_calls"][0]["function"]["name"] == "weather__get"
    end = parts[-1]
    assert isinstance(end, TurnEnd)
    assert [c.name for c in end.message.tool_calls] == ["weather.get"]
    assert isinstance(parts[0], ToolCallPart) and parts[0].call.name == "weather.get"
