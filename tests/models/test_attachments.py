"""Images from tool results: kept in the trajectory, sent to vision models, described to others.

The provider tests run the real SDK adapters against local wire servers and read the request
bodies; the session test runs a real tool through the runtime with a scripted model.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

import anyio
import pytest

from wakeful.events import user_input
from wakeful.messages import (
    AssistantMessage,
    Attachment,
    Message,
    ToolCall,
    ToolMessage,
    UserMessage,
    check_trajectory,
    image_attachments,
    message_from_json,
    message_to_json,
    to_openai_shape,
)
from wakeful.models import (
    AnthropicModel,
    ModelRequest,
    OpenAIChatModel,
    ScriptedModel,
    call,
    say,
    use,
)
from wakeful.runtime import Runtime
from wakeful.tools.spec import ToolResult, tool

from .test_anthropic import text_frames
from .test_openai import text_reply
from .wire_servers import Reply, WireServer, serve_wire

pytestmark = pytest.mark.anyio

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n a tiny picture").decode()
JPEG = base64.b64encode(b"\xff\xd8\xff another picture").decode()
SHOT = Attachment(mime_type="image/png", data=PNG)
PHOTO = Attachment(mime_type="image/jpeg", data=JPEG)


def trajectory() -> list[Message]:
    """Two calls answered with images, one without, then a user message."""
    calls = [
        ToolCall(id="call_1", name="screenshot", arguments="{}"),
        ToolCall(id="call_2", name="read_file", arguments='{"path": "a.txt"}'),
        ToolCall(id="call_3", name="camera", arguments="{}"),
    ]
    return [
        UserMessage(content="Look around."),
        AssistantMessage(tool_calls=calls),
        ToolMessage(
            tool_call_id="call_1",
            name="screenshot",
            content="[image: image/png, 1 KB]",
            attachments=[SHOT],
        ),
        ToolMessage(tool_call_id="call_2", name="read_file", content="hello"),
        ToolMessage(
            tool_call_id="call_3",
            name="camera",
            content="[image: image/png, 1 KB]\n[image: image/jpeg, 1 KB]",
            attachments=[SHOT, PHOTO],
        ),
        UserMessage(content="What do you see?"),
    ]


@pytest.fixture
async def server() -> AsyncIterator[WireServer]:
    async with serve_wire(WireServer()) as running:
        yield running


async def send(model: OpenAIChatModel | AnthropicModel, request: ModelRequest) -> None:
    async with model, aclosing(model.stream(request)) as parts:
        async for _ in parts:
            pass


def openai_model(server: WireServer, **options: Any) -> OpenAIChatModel:
    return OpenAIChatModel("test-model", base_url=f"{server.url}/v1", timeout=5, **options)


def anthropic_model(server: WireServer, **options: Any) -> AnthropicModel:
    return AnthropicModel(
        "claude-test", base_url=server.url, api_key="sk-ant-test", timeout=5, **options
    )


# --- the trajectory ----------------------------------------------------------------------------


def test_attachments_round_trip_through_json() -> None:
    for message in trajectory():
        assert message_from_json(message_to_json(message)) == message


def test_a_result_without_attachments_serializes_as_before() -> None:
    plain = ToolMessage(tool_call_id="a", name="t", content="r")
    assert message_to_json(plain) == (
        '{"role":"tool","tool_call_id":"a","name":"t","content":"r","status":"ok"}'
    )
    assert message_from_json(message_to_json(plain)).attachments == []  # type: ignore[union-attr]
    assert to_openai_shape(plain) == {"role": "tool", "tool_call_id": "a", "content": "r"}


def test_malformed_images_in_structured_data_are_ignored() -> None:
    structured = {
        "images": [
            {"mime_type": "image/png", "data": PNG},
            {"mime_type": "text/plain", "data": PNG},  # not an image
            {"mime_type": "image/png", "data": "not base64!"},
            {"mime_type": "image/png", "data": ""},
            {"mime_type": "image/png"},
            {"data": PNG},
            "image.png",
        ]
    }
    assert image_attachments(structured) == [SHOT]
    assert image_attachments({"images": "nope"}) == []
    assert image_attachments(["not", "a", "mapping"]) == []
    assert image_attachments(None) == []


# --- OpenAI Chat Completions ---------------------------------------------------------------------


async def test_openai_sends_images_in_one_user_message_after_the_tool_results(
    server: WireServer,
) -> None:
    server.script(text_reply("a cat"))
    await send(openai_model(server), ModelRequest(messages=trajectory()))

    wire = server.requests[0].body["messages"]
    roles = [m["role"] for m in wire]
    assert roles == ["user", "assistant", "tool", "tool", "tool", "user", "user"]
    # Tool messages stay text, so every call is still answered before anything else.
    assert [m["content"] for m in wire[2:5]] == [
        "[image: image/png, 1 KB]",
        "hello",
        "[image: image/png, 1 KB]\n[image: image/jpeg, 1 KB]",
    ]
    assert wire[5]["content"] == [
        {"type": "text", "text": "The image returned by tool call call_1 (screenshot):"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
        {"type": "text", "text": "The 2 images returned by tool call call_3 (camera):"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
        {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{JPEG}"}},
    ]
    assert wire[6] == {"role": "user", "content": "What do you see?"}


async def test_openai_images_close_a_trajectory_that_ends_with_tool_results(
    server: WireServer,
) -> None:
    server.script(text_reply("a cat"))
    await send(openai_model(server), ModelRequest(messages=trajectory()[:-1]))

    wire = server.requests[0].body["messages"]
    assert [m["role"] for m in wire] == ["user", "assistant", "tool", "tool", "tool", "user"]
    assert [part["type"] for part in wire[-1]["content"]] == [
        "text",
        "image_url",
        "text",
        "image_url",
        "image_url",
    ]


async def test_openai_without_vision_sends_only_the_description(server: WireServer) -> None:
    server.script(text_reply("no idea"))
    model = openai_model(server, vision=False)
    assert model.vision is False
    await send(model, ModelRequest(messages=trajectory()))

    body = server.requests[0].body
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["user", "assistant", "tool", "tool", "tool", "user"]
    assert body["messages"][2] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "[image: image/png, 1 KB]",
    }
    assert PNG not in str(body)


# --- Anthropic Messages ------------------------------------------------------------------------


def image_block(media_type: str, data: str) -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}


async def test_anthropic_puts_images_inside_their_tool_result_blocks(server: WireServer) -> None:
    server.script(Reply(frames=text_frames("a cat")))
    await send(anthropic_model(server), ModelRequest(messages=trajectory()))

    turn = server.requests[0].body["messages"][2]
    assert turn == {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "call_1",
                "is_error": False,
                "content": [
                    {"type": "text", "text": "[image: image/png, 1 KB]"},
                    image_block("image/png", PNG),
                ],
            },
            {"type": "tool_result", "tool_use_id": "call_2", "is_error": False, "content": "hello"},
            {
                "type": "tool_result",
                "tool_use_id": "call_3",
                "is_error": False,
                "content": [
                    {"type": "text", "text": "[image: image/png, 1 KB]\n[image: image/jpeg, 1 KB]"},
                    image_block("image/png", PNG),
                    image_block("image/jpeg", JPEG),
                ],
            },
            {"type": "text", "text": "What do you see?"},
        ],
    }


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_image_types_the_api_does_not_take_are_only_described(
    server: WireServer, provider: str
) -> None:
    if provider == "openai":
        server.script(text_reply("ok"))
        model: OpenAIChatModel | AnthropicModel = openai_model(server)
    else:
        server.script(Reply(frames=text_frames("ok")))
        model = anthropic_model(server)
    svg = Attachment(mime_type="image/svg+xml", data=PNG)
    messages: list[Message] = [
        UserMessage(content="Draw."),
        AssistantMessage(tool_calls=[ToolCall(id="call_1", name="draw")]),
        ToolMessage(
            tool_call_id="call_1",
            name="draw",
            content="[image: image/svg+xml, 1 KB]",
            attachments=[svg],
        ),
    ]
    await send(model, ModelRequest(messages=messages))

    wire = server.requests[0].body["messages"]
    assert len(wire) == 3  # no user message of images after the OpenAI tool message
    if provider == "openai":
        assert wire[2]["content"] == "[image: image/svg+xml, 1 KB]"
    else:
        [result] = wire[2]["content"]
        assert result["content"] == "[image: image/svg+xml, 1 KB]"


async def test_anthropic_without_vision_sends_only_the_description(server: WireServer) -> None:
    server.script(Reply(frames=text_frames("no idea")))
    model = anthropic_model(server, vision=False)
    assert model.vision is False
    await send(model, ModelRequest(messages=trajectory()))

    body = server.requests[0].body
    results = body["messages"][2]["content"]
    assert [r.get("content") for r in results] == [
        "[image: image/png, 1 KB]",
        "hello",
        "[image: image/png, 1 KB]\n[image: image/jpeg, 1 KB]",
        None,
    ]
    assert PNG not in str(body)


# --- the session -------------------------------------------------------------------------------


@tool
async def take_screenshot() -> ToolResult:
    """Take a screenshot of the screen."""
    images = [{"mime_type": "image/png", "data": PNG}, {"mime_type": "image/png", "data": "%%"}]
    return ToolResult(content="[image: image/png, 1 KB]", structured={"images": images})


async def test_the_session_copies_a_tool_results_images_into_its_tool_message() -> None:
    model = ScriptedModel([use(call("take_screenshot", call_id="call_1")), "I see a cat."])
    async with Runtime(
        model=model, tools=[take_screenshot], with_core_tools=False, with_timers=False
    ) as rt:
        await rt.submit(user_input("What is on the screen?"))
        await rt.wait_idle()
        messages = rt.sessions["main"].trajectory.messages
        assert check_trajectory(messages) == []

    [result] = [m for m in messages if isinstance(m, ToolMessage)]
    assert result.content == "[image: image/png, 1 KB]"
    assert result.attachments == [SHOT]  # the malformed second image is dropped
    # The model's next request carries the image.
    assert result in model.requests[1].messages


# --- background results ------------------------------------------------------------------------


def background_batch() -> list[Message]:
    """A call moved to the background, then its result arriving as an event with an image."""
    return [
        UserMessage(content="Watch the screen."),
        AssistantMessage(tool_calls=[ToolCall(id="call_1", name="screenshot")]),
        ToolMessage(
            tool_call_id="call_1",
            name="screenshot",
            content="Started in the background as task_1.",
            status="placeholder",
        ),
        AssistantMessage(content="Waiting for it."),
        UserMessage(
            content="[TOOL_RESULT task_1 (screenshot)] [image: image/png, 1 KB]",
            event_ids=["evt_1"],
            mark="event",
            attachments=[SHOT],
        ),
    ]


def test_a_user_message_with_attachments_round_trips_through_json() -> None:
    [*_, batch] = background_batch()
    assert message_from_json(message_to_json(batch)) == batch
    assert '"attachments"' in message_to_json(batch)
    plain = UserMessage(content="hi", event_ids=["evt_1"], mark="event")
    assert message_to_json(plain) == (
        '{"role":"user","content":"hi","event_ids":["evt_1"],"mark":"event"}'
    )
    assert message_from_json(message_to_json(plain)).attachments == []  # type: ignore[union-attr]
    assert to_openai_shape(plain) == {"role": "user", "content": "hi"}


async def test_openai_sends_a_user_messages_images_as_content_parts(server: WireServer) -> None:
    server.script(text_reply("a cat"))
    await send(openai_model(server), ModelRequest(messages=background_batch()))

    wire = server.requests[0].body["messages"]
    assert [m["role"] for m in wire] == ["user", "assistant", "tool", "assistant", "user"]
    assert wire[0] == {"role": "user", "content": "Watch the screen."}
    assert wire[-1]["content"] == [
        {"type": "text", "text": "[TOOL_RESULT task_1 (screenshot)] [image: image/png, 1 KB]"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
    ]


async def test_anthropic_puts_a_user_messages_images_after_its_text(server: WireServer) -> None:
    server.script(Reply(frames=text_frames("a cat")))
    await send(anthropic_model(server), ModelRequest(messages=background_batch()))

    turn = server.requests[0].body["messages"][-1]
    assert turn == {
        "role": "user",
        "content": [
            {"type": "text", "text": "[TOOL_RESULT task_1 (screenshot)] [image: image/png, 1 KB]"},
            image_block("image/png", PNG),
        ],
    }


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_without_vision_a_user_message_sends_only_its_text(
    server: WireServer, provider: str
) -> None:
    if provider == "openai":
        server.script(text_reply("no idea"))
        model: OpenAIChatModel | AnthropicModel = openai_model(server, vision=False)
    else:
        server.script(Reply(frames=text_frames("no idea")))
        model = anthropic_model(server, vision=False)
    await send(model, ModelRequest(messages=background_batch()))

    body = server.requests[0].body
    text = "[TOOL_RESULT task_1 (screenshot)] [image: image/png, 1 KB]"
    if provider == "openai":
        assert body["messages"][-1] == {"role": "user", "content": text}
    else:
        assert body["messages"][-1] == {"role": "user", "content": [{"type": "text", "text": text}]}
    assert PNG not in str(body)


async def test_a_background_tools_images_reach_the_next_model_request() -> None:
    release = anyio.Event()

    @tool(run_mode="background")
    async def watch_screen() -> ToolResult:
        """Take a screenshot once the screen changes."""
        await release.wait()
        images = [
            {"mime_type": "image/png", "data": PNG},
            {"mime_type": "image/png", "data": "%%"},
        ]
        return ToolResult(content="[image: image/png, 1 KB]", structured={"images": images})

    model = ScriptedModel(
        [use(call("watch_screen", call_id="call_1")), say("Waiting."), say("I see a cat.")]
    )
    async with Runtime(
        model=model, tools=[watch_screen], with_core_tools=False, with_timers=False
    ) as rt:
        await rt.submit(user_input("Tell me when the screen changes."))
        await rt.wait_idle(include_tasks=False)
        requests_before = len(model.requests)
        release.set()
        with anyio.fail_after(5):
            await rt.wait_idle()
        messages = rt.sessions["main"].trajectory.messages
        assert check_trajectory(messages) == []

    [placeholder] = [m for m in messages if isinstance(m, ToolMessage)]
    assert placeholder.attachments == []  # the image came later, with the result
    batch = messages[-2]
    assert isinstance(batch, UserMessage)
    assert batch.content.startswith("[TOOL_RESULT task_")
    assert batch.attachments == [SHOT]  # the malformed second image is dropped
    assert len(model.requests) == requests_before + 1
    assert batch in model.requests[-1].messages


async def test_a_background_result_without_images_adds_no_attachments() -> None:
    @tool(run_mode="background")
    async def count_files() -> str:
        """Count the files."""
        return "12 files"

    model = ScriptedModel([use(call("count_files")), say("Counting."), say("Twelve.")])
    async with Runtime(
        model=model, tools=[count_files], with_core_tools=False, with_timers=False
    ) as rt:
        await rt.submit(user_input("How many files?"))
        with anyio.fail_after(5):
            await rt.wait_idle()
        [handle] = rt.tasks.list()
        messages = rt.sessions["main"].trajectory.messages

    assert handle.result is not None and handle.result.content == "12 files"
    results = [m for m in messages if isinstance(m, UserMessage) and "[TOOL_RESULT" in m.content]
    assert results and all(m.attachments == [] for m in results)
