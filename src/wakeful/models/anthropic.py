"""Anthropic's Messages API, streamed through the `anthropic` SDK.

The adapter translates wakeful messages into Messages-API turns (system prompt apart, tool
results as `tool_result` blocks in a user turn, consecutive same-role messages merged), reads the
raw event stream into thinking and text deltas, emits each `tool_use` block as a tool call when
the block stops, and maps SDK errors to wakeful errors. Retries are the policy of
:mod:`wakeful.models.retry`.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal, cast

import anthropic
import httpx2
from anthropic import types as wire

from ..errors import (
    ConfigError,
    ModelAPIError,
    ModelConnectionError,
    ModelResponseError,
    ModelTimeout,
)
from ..messages import (
    AssistantMessage,
    Attachment,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from .base import (
    ModelRequest,
    StreamPart,
    TextDelta,
    ThinkingDelta,
    ToolCallPart,
    ToolDefinition,
    TurnEnd,
    Usage,
    wire_tool_name,
)
from .guard import check_model_request_allowed
from .retry import Backoff, Endpoint, Failure, failure_for_status
from .sdk_model import SDKModel

PROVIDER = "anthropic"
ANTHROPIC_BASE_URL = "https://api.anthropic.com"

# Servers that speak the Messages API locally ignore the key, but the SDK insists on one.
_KEY_FOR_KEYLESS_SERVERS = "not-needed"

# The status an error event inside a 200 stream stands for, by its `error.type`.
_STATUS_OF_ERROR_TYPE = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}

# Our stop reasons are the Chat Completions names, which the session loop and scripts use.
_STOP_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
}

# The image types the Messages API takes; other images reach the model only as their description.
ImageMediaType = Literal["image/jpeg", "image/png", "image/gif", "image/webp"]
_IMAGE_MEDIA_TYPES: dict[str, ImageMediaType] = {
    "image/jpeg": "image/jpeg",
    "image/jpg": "image/jpeg",
    "image/png": "image/png",
    "image/gif": "image/gif",
    "image/webp": "image/webp",
}

ReplayBlock = wire.ThinkingBlockParam | wire.RedactedThinkingBlockParam
UserBlock = wire.TextBlockParam | wire.ImageBlockParam | wire.ToolResultBlockParam
AssistantBlock = wire.TextBlockParam | wire.ToolUseBlockParam | ReplayBlock


def replay_blocks(message: AssistantMessage) -> list[ReplayBlock]:
    """The signed thinking blocks this model left on a tool-use message, if any."""
    data = message.provider_data.get(PROVIDER)
    if not isinstance(data, dict):
        return []
    return cast(list[ReplayBlock], data.get("thinking_blocks", []))


def _api_key_hint(api_key_env: str | None) -> str:
    """Where the key of a rejected request came from, and so where to fix it."""
    if api_key_env is None:
        return "pass api_key= to AnthropicModel or set ANTHROPIC_API_KEY"
    return (
        f"the key is read from ${api_key_env} (api_key_env in wakeful.toml); set it to a valid key"
    )


class AnthropicModel(SDKModel[anthropic.AsyncAnthropic]):
    """A Claude model behind the Anthropic Messages API (or a server that speaks it).

    `base_url` defaults to `ANTHROPIC_BASE_URL` or the Anthropic API; `api_key` defaults to the
    variable `api_key_env` names when given, else to the SDK's own resolution
    (`ANTHROPIC_API_KEY`, `ANTHROPIC_AUTH_TOKEN`, profiles); a rejected key's error names the
    same place. `max_tokens`
    applies when a request sets none. `thinking` is passed through, e.g. `{"type": "adaptive"}`
    or `{"type": "enabled", "budget_tokens": 2048}`. With `prompt_caching` the request asks the
    API to cache the prompt up to its last block, which makes each turn of a long session cheap.
    With `vision` (the default) images that tools return go into their `tool_result` blocks;
    with `vision=False` the model reads only their description in the result's text.

    The API requires the signed thinking blocks of a tool-use turn to be sent back with it.
    They travel in the message's `provider_data`, which the store keeps, so a session resumed
    after a restart still sends them.

    The SDK client is created on the first request and reused; close it with `aclose()` or by
    using the model as an async context manager. Use one instance within one event loop.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        max_tokens: int = 4096,
        timeout: float = 60,
        max_retries: int = 4,
        backoff: Backoff | None = None,
        thinking: wire.ThinkingConfigParam | None = None,
        prompt_caching: bool = True,
        vision: bool = True,
        name: str | None = None,
        api_key_env: str | None = None,
    ) -> None:
        super().__init__(max_retries=max_retries, backoff=backoff)
        self.model = model
        self.name = name or model
        self.vision = vision
        self.api_key_env = api_key_env
        explicit_url = base_url or os.environ.get("ANTHROPIC_BASE_URL")
        self.base_url = explicit_url or ANTHROPIC_BASE_URL
        self.max_tokens = max_tokens
        self.timeout = timeout
        self.thinking = thinking
        self.prompt_caching = prompt_caching
        self._api_key = api_key
        self._custom_server = explicit_url is not None
        self._endpoint = Endpoint(
            provider=PROVIDER,
            model=model,
            base_url=self.base_url,
            api_key_hint=_api_key_hint(api_key_env),
        )

    async def _open_client(self) -> anthropic.AsyncAnthropic:
        api_key = self._api_key
        if api_key is None and self.api_key_env is not None:
            api_key = os.environ.get(self.api_key_env) or None
        key_in_env = any(os.environ.get(v) for v in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"))
        if api_key is None and not key_in_env and self._custom_server:
            api_key = _KEY_FOR_KEYLESS_SERVERS
        client = anthropic.AsyncAnthropic(
            api_key=api_key,
            base_url=self.base_url,
            timeout=self.timeout,
            max_retries=0,  # retries are ours: see wakeful.models.retry
        )
        if client.api_key is None and client.auth_token is None and client.credentials is None:
            await client.close()
            raise ConfigError(
                f"AnthropicModel({self.model!r}) has no API key for {self.base_url}. Pass "
                f"api_key= or set {self.api_key_env or 'ANTHROPIC_API_KEY'}."
            )
        return client

    async def _attempt(self, request: ModelRequest) -> AsyncGenerator[StreamPart, None]:
        check_model_request_allowed(PROVIDER, self.base_url)
        client = await self._sdk_client()
        system, messages = self._wire_messages(request.messages)
        events = await client.messages.create(
            model=self.model,
            max_tokens=request.max_tokens or self.max_tokens,
            messages=messages,
            system=system or anthropic.omit,
            tools=[wire_tool(tool) for tool in request.tools] if request.tools else anthropic.omit,
            thinking=self.thinking if self.thinking is not None else anthropic.omit,
            cache_control={"type": "ephemeral"} if self.prompt_caching else anthropic.omit,
            stream=True,
            timeout=self.timeout,
        )
        async with events:
            turn = _StreamedTurn(self._endpoint)
            async for event in events:
                for part in turn.feed(event):
                    yield part
            end = turn.finish()
            if turn.replay_blocks and end.message.tool_calls:
                # The API wants a tool-use turn's signed thinking back with it: keep it on the
                # message, which the store keeps.
                data = {PROVIDER: {"thinking_blocks": turn.replay_blocks}}
                end = replace(end, message=end.message.model_copy(update={"provider_data": data}))
            yield end

    def _wire_messages(self, messages: Sequence[Message]) -> tuple[str, list[wire.MessageParam]]:
        """The system prompt and the Messages-API turns for our messages.

        Consecutive messages of one role become one turn (tool results and the user message
        after them share a user turn, results first as the API requires); empty text is dropped
        because the API rejects empty text blocks.
        """
        system: list[str] = []
        turns: list[tuple[Literal["user", "assistant"], list[UserBlock | AssistantBlock]]] = []

        def add(
            role: Literal["user", "assistant"], blocks: Sequence[UserBlock | AssistantBlock]
        ) -> None:
            if not blocks:
                return
            if turns and turns[-1][0] == role:
                turns[-1][1].extend(blocks)
            else:
                turns.append((role, list(blocks)))

        for message in messages:
            if isinstance(message, SystemMessage):
                system.append(message.content)
            elif isinstance(message, UserMessage):
                user_blocks: list[UserBlock] = (
                    [{"type": "text", "text": message.content}] if message.content else []
                )
                user_blocks.extend(
                    block
                    for block in map(image_block, message.attachments if self.vision else ())
                    if block is not None
                )
                add("user", user_blocks)
            elif isinstance(message, ToolMessage):
                result: wire.ToolResultBlockParam = {
                    "type": "tool_result",
                    "tool_use_id": message.tool_call_id,
                    "is_error": message.is_error,
                }
                images = [
                    block
                    for block in map(image_block, message.attachments if self.vision else ())
                    if block is not None
                ]
                if images:
                    text: list[wire.TextBlockParam] = (
                        [{"type": "text", "text": message.content}] if message.content else []
                    )
                    result["content"] = [*text, *images]
                elif message.content:
                    result["content"] = message.content
                add("user", [result])
            elif isinstance(message, AssistantMessage):
                blocks: list[AssistantBlock] = []
                if message.tool_calls:
                    blocks.extend(replay_blocks(message))
                if message.content:
                    blocks.append({"type": "text", "text": message.content})
                blocks.extend(
                    {
                        "type": "tool_use",
                        "id": call.id,
                        "name": wire_tool_name(call.name),
                        "input": wire_input(call.arguments),
                    }
                    for call in message.tool_calls
                )
                add("assistant", blocks)
        wire_turns: list[wire.MessageParam] = []
        for role, content in turns:
            if role == "user":
                wire_turns.append({"role": "user", "content": content})
            else:
                wire_turns.append({"role": "assistant", "content": content})
        return "\n\n".join(system), wire_turns

    def _translate(self, exc: Exception) -> Failure | None:
        endpoint = self._endpoint
        where = f"the {PROVIDER} API at {endpoint.base_url}"
        # The SDK wraps transport errors while connecting; while streaming they arrive raw.
        if isinstance(exc, anthropic.APITimeoutError | httpx2.TimeoutException):
            return Failure(
                ModelTimeout(
                    f"No answer from {where} within {self.timeout:g} s. Raise timeout= on "
                    "AnthropicModel, or check that the server is not overloaded.",
                    provider=PROVIDER,
                ),
                retryable=True,
            )
        if isinstance(exc, anthropic.APIConnectionError | httpx2.TransportError):
            cause = exc.__cause__ if isinstance(exc, anthropic.APIConnectionError) else exc
            detail = f" ({cause})" if cause is not None and str(cause) else ""
            return Failure(
                ModelConnectionError(
                    f"The connection to {where} failed or dropped{detail}. Check that the "
                    "server is running and that base_url is right.",
                    provider=PROVIDER,
                ),
                retryable=True,
            )
        if isinstance(exc, anthropic.APIResponseValidationError):
            return Failure(
                ModelResponseError(
                    f"{where.capitalize()} answered with data the anthropic SDK cannot read "
                    f"(HTTP {exc.status_code}). Check that base_url points at a Messages API.",
                    provider=PROVIDER,
                    status_code=exc.status_code,
                )
            )
        if isinstance(exc, anthropic.APIStatusError):
            detail = exc.api_message or (exc.type or "")
            status = exc.status_code
            if status < 400:  # an error event inside a 200 stream
                mapped = _STATUS_OF_ERROR_TYPE.get(exc.type or "")
                if mapped is None:
                    return Failure(
                        ModelAPIError(
                            f"{where.capitalize()} reported an error in the middle of its "
                            f"stream ({exc.type}: {detail}). Try the turn again.",
                            provider=PROVIDER,
                        )
                    )
                status = mapped
            return failure_for_status(endpoint, status, headers=exc.response.headers, detail=detail)
        if isinstance(exc, json.JSONDecodeError):
            return Failure(
                ModelResponseError(
                    f"{where.capitalize()} sent a stream event that is not JSON ({exc}). Check "
                    "that base_url points at a Messages API.",
                    provider=PROVIDER,
                )
            )
        return None


def wire_input(arguments: str) -> dict[str, object]:
    """Tool-call arguments as a `tool_use` input: the parsed JSON object, else `{}`.

    The API only takes an object; malformed arguments were already answered by a tool error.
    """
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def image_block(image: Attachment) -> wire.ImageBlockParam | None:
    """An image attachment as a content block, or None for a type the API does not take."""
    media_type = _IMAGE_MEDIA_TYPES.get(image.mime_type.lower())
    if media_type is None:
        return None
    return {
        "type": "image",
        "source": {"type": "base64", "media_type": media_type, "data": image.data},
    }


def wire_tool(tool: ToolDefinition) -> wire.ToolParam:
    return {
        "name": wire_tool_name(tool.name),
        "description": tool.description,
        "input_schema": tool.parameters,
    }


@dataclass
class _Block:
    """One content block while it streams."""

    type: str
    pieces: list[str] = field(default_factory=list)
    signature: str = ""
    id: str = ""
    name: str = ""
    start_input: dict[str, object] = field(default_factory=dict)
    data: str = ""


class _StreamedTurn:
    """Assembles one streamed turn from raw events and says which parts are ready."""

    def __init__(self, endpoint: Endpoint) -> None:
        self._endpoint = endpoint
        self._blocks: dict[int, _Block] = {}
        self._text: list[str] = []
        self._thinking: list[str] = []
        self._calls: list[ToolCall] = []
        self.replay_blocks: list[ReplayBlock] = []
        self._stop_reason: str | None = None
        self._input_tokens = 0
        self._cache_read = 0
        self._cache_write = 0
        self._output_tokens = 0

    def feed(self, event: wire.RawMessageStreamEvent) -> list[StreamPart]:
        if isinstance(event, wire.RawMessageStartEvent):
            usage = event.message.usage
            self._input_tokens = usage.input_tokens or 0
            self._cache_read = usage.cache_read_input_tokens or 0
            self._cache_write = usage.cache_creation_input_tokens or 0
            self._output_tokens = usage.output_tokens or 0
        elif isinstance(event, wire.RawContentBlockStartEvent):
            return self._start_block(event)
        elif isinstance(event, wire.RawContentBlockDeltaEvent):
            return self._feed_delta(event)
        elif isinstance(event, wire.RawContentBlockStopEvent):
            return self._stop_block(event.index)
        elif isinstance(event, wire.RawMessageDeltaEvent):
            if event.delta.stop_reason is not None:
                self._stop_reason = event.delta.stop_reason
            delta_usage = event.usage
            self._output_tokens = delta_usage.output_tokens or self._output_tokens
            if delta_usage.input_tokens is not None:
                self._input_tokens = delta_usage.input_tokens
            if delta_usage.cache_read_input_tokens is not None:
                self._cache_read = delta_usage.cache_read_input_tokens
            if delta_usage.cache_creation_input_tokens is not None:
                self._cache_write = delta_usage.cache_creation_input_tokens
        return []

    def finish(self) -> TurnEnd:
        if self._stop_reason is None:
            raise ModelResponseError(
                f"The {self._endpoint.provider} API at {self._endpoint.base_url} ended the "
                "stream before the model finished its turn (no stop_reason); the partial turn "
                "was discarded. Run the turn again.",
                provider=self._endpoint.provider,
            )
        message = AssistantMessage(
            content="".join(self._text),
            thinking="".join(self._thinking),
            tool_calls=list(self._calls),
        )
        # input_tokens counts every prompt token, cached or not, as OpenAI's prompt_tokens does.
        usage = Usage(
            input_tokens=self._input_tokens + self._cache_read + self._cache_write,
            output_tokens=self._output_tokens,
            cache_read_tokens=self._cache_read,
        )
        stop_reason = _STOP_REASONS.get(self._stop_reason, self._stop_reason)
        return TurnEnd(message=message, usage=usage, stop_reason=stop_reason)

    def _start_block(self, event: wire.RawContentBlockStartEvent) -> list[StreamPart]:
        start = event.content_block
        block = _Block(type=start.type)
        self._blocks[event.index] = block
        parts: list[StreamPart] = []
        if isinstance(start, wire.TextBlock) and start.text:
            self._text.append(start.text)
            parts.append(TextDelta(start.text))
        elif isinstance(start, wire.ThinkingBlock):
            block.signature = start.signature or ""
            if start.thinking:
                block.pieces.append(start.thinking)
                self._thinking.append(start.thinking)
                parts.append(ThinkingDelta(start.thinking))
        elif isinstance(start, wire.RedactedThinkingBlock):
            block.data = start.data
        elif isinstance(start, wire.ToolUseBlock):
            block.id, block.name = start.id, start.name
            block.start_input = dict(start.input) if isinstance(start.input, dict) else {}
        return parts

    def _feed_delta(self, event: wire.RawContentBlockDeltaEvent) -> list[StreamPart]:
        block = self._blocks.get(event.index)
        if block is None:
            raise self._out_of_order(f"a delta for content block {event.index} before its start")
        delta = event.delta
        if isinstance(delta, wire.TextDelta):
            self._text.append(delta.text)
            return [TextDelta(delta.text)]
        if isinstance(delta, wire.ThinkingDelta):
            block.pieces.append(delta.thinking)
            self._thinking.append(delta.thinking)
            return [ThinkingDelta(delta.thinking)]
        if isinstance(delta, wire.SignatureDelta):
            block.signature += delta.signature
        elif isinstance(delta, wire.InputJSONDelta):
            block.pieces.append(delta.partial_json)
        return []

    def _stop_block(self, index: int) -> list[StreamPart]:
        block = self._blocks.pop(index, None)
        if block is None:
            raise self._out_of_order(f"the end of content block {index} before its start")
        if block.type == "thinking":
            self.replay_blocks.append(
                {
                    "type": "thinking",
                    "thinking": "".join(block.pieces),
                    "signature": block.signature,
                }
            )
        elif block.type == "redacted_thinking":
            self.replay_blocks.append({"type": "redacted_thinking", "data": block.data})
        elif block.type == "tool_use":
            # The raw JSON text is kept verbatim, even when malformed: the session loop answers
            # bad arguments with a tool error. A server that sends the whole input at the start
            # of the block, with no deltas, gets it serialized.
            arguments = "".join(block.pieces)
            if not arguments.strip():
                arguments = json.dumps(block.start_input, ensure_ascii=False)
            call = ToolCall(id=block.id, name=block.name, arguments=arguments)
            self._calls.append(call)
            return [ToolCallPart(call)]
        return []

    def _out_of_order(self, what: str) -> ModelResponseError:
        return ModelResponseError(
            f"The {self._endpoint.provider} API at {self._endpoint.base_url} sent {what}, which "
            "the Messages API stream does not allow. Check that base_url points at a Messages API.",
            provider=self._endpoint.provider,
        )
