"""OpenAI-compatible Chat Completions, streamed through the `openai` SDK.

One adapter serves every server that speaks the Chat Completions wire format: OpenAI itself,
vLLM, Ollama, the llama.cpp server, LM Studio. It translates wakeful messages to the wire,
assembles streamed tool-call fragments by index (a call is complete when the next index starts or
the choice finishes), reads `reasoning_content` / `reasoning` deltas as thinking, and maps SDK
errors to wakeful errors. Retries are the policy of :mod:`wakeful.models.retry`.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncGenerator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import openai
from openai.types import CompletionUsage
from openai.types.chat import (
    ChatCompletionChunk,
    ChatCompletionContentPartParam,
    ChatCompletionFunctionToolParam,
    ChatCompletionMessageParam,
)
from openai.types.chat.chat_completion_chunk import ChoiceDelta, ChoiceDeltaToolCall

from ..errors import (
    ConfigError,
    ModelAPIError,
    ModelConnectionError,
    ModelResponseError,
    ModelTimeout,
)
from ..messages import AssistantMessage, Message, SystemMessage, ToolCall, ToolMessage, UserMessage
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

PROVIDER = "openai"
OPENAI_BASE_URL = "https://api.openai.com/v1"

# Local servers (vLLM, Ollama, llama.cpp, LM Studio) ignore the key, but the SDK insists on one.
_KEY_FOR_KEYLESS_SERVERS = "not-needed"

# The image types OpenAI takes in `image_url` parts. Others reach the model only as their
# description: one it rejects would fail every later request of the session.
_IMAGE_MEDIA_TYPES = frozenset({"image/jpeg", "image/jpg", "image/png", "image/gif", "image/webp"})


def _api_key_hint(api_key_env: str | None) -> str:
    """Where the key of a rejected request came from, and so where to fix it."""
    if api_key_env is None:
        return "pass api_key= to OpenAIChatModel or set OPENAI_API_KEY"
    return (
        f"the key is read from ${api_key_env} (api_key_env in wakeful.toml); set it to a valid key"
    )


class OpenAIChatModel(SDKModel[openai.AsyncOpenAI]):
    """A model behind an OpenAI-compatible Chat Completions endpoint.

    `base_url` defaults to `OPENAI_BASE_URL` or the OpenAI API; point it at a local server, e.g.
    `http://localhost:8000/v1` (vLLM) or `http://localhost:11434/v1` (Ollama). `api_key`
    defaults to the variable `api_key_env` names (`OPENAI_API_KEY` by default), which is also
    the one a rejected key's error tells the user to fix; servers at a custom `base_url` may run
    without one.
    `max_tokens` applies when a request sets none; it is sent as `max_completion_tokens` to
    OpenAI and as `max_tokens` elsewhere, unless `max_tokens_field` says otherwise.
    `extra_body` is merged into every request, for server options such as vLLM's
    `chat_template_kwargs` or `reasoning_effort`. With `vision` (the default) images that tools
    return are sent to the model; pass `vision=False` for a text-only model, which then reads
    only their description in the tool result.

    The SDK client is created on the first request and reused; close it with `aclose()` or by
    using the model as an async context manager. Use one instance within one event loop.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 60,
        max_retries: int = 4,
        backoff: Backoff | None = None,
        max_tokens: int | None = None,
        max_tokens_field: Literal["max_tokens", "max_completion_tokens"] | None = None,
        extra_body: Mapping[str, object] | None = None,
        vision: bool = True,
        name: str | None = None,
        api_key_env: str | None = None,
    ) -> None:
        super().__init__(max_retries=max_retries, backoff=backoff)
        self.model = model
        self.name = name or model
        self.vision = vision
        self.api_key_env = api_key_env or "OPENAI_API_KEY"
        explicit_url = base_url or os.environ.get("OPENAI_BASE_URL")
        self.base_url = explicit_url or OPENAI_BASE_URL
        self.timeout = timeout
        self.max_tokens = max_tokens
        self.max_tokens_field = max_tokens_field or (
            "max_tokens" if explicit_url else "max_completion_tokens"
        )
        self.extra_body = dict(extra_body) if extra_body else None
        self._api_key = api_key
        self._custom_server = explicit_url is not None
        self._endpoint = Endpoint(
            provider=PROVIDER,
            model=model,
            base_url=self.base_url,
            api_key_hint=_api_key_hint(api_key_env),
        )

    async def _open_client(self) -> openai.AsyncOpenAI:
        api_key = self._api_key or os.environ.get(self.api_key_env)
        if not api_key:
            if not self._custom_server:
                raise ConfigError(
                    f"OpenAIChatModel({self.model!r}) has no API key for {self.base_url}. "
                    f"Pass api_key= or set {self.api_key_env}; for a local server, pass its "
                    "base_url (e.g. http://localhost:8000/v1)."
                )
            api_key = _KEY_FOR_KEYLESS_SERVERS
        return openai.AsyncOpenAI(
            api_key=api_key,
            base_url=self.base_url,
            timeout=self.timeout,
            max_retries=0,  # retries are ours: see wakeful.models.retry
        )

    async def _attempt(self, request: ModelRequest) -> AsyncGenerator[StreamPart, None]:
        check_model_request_allowed(PROVIDER, self.base_url)
        client = await self._sdk_client()
        max_tokens = request.max_tokens or self.max_tokens
        chunks = await client.chat.completions.create(
            model=self.model,
            messages=wire_messages(request.messages, vision=self.vision),
            tools=[wire_tool(tool) for tool in request.tools] if request.tools else openai.omit,
            max_tokens=max_tokens
            if max_tokens is not None and self.max_tokens_field == "max_tokens"
            else openai.omit,
            max_completion_tokens=max_tokens
            if max_tokens is not None and self.max_tokens_field == "max_completion_tokens"
            else openai.omit,
            stream=True,
            stream_options={"include_usage": True},
            extra_body=self.extra_body,
            timeout=self.timeout,
        )
        async with chunks:
            turn = _StreamedTurn(self._endpoint)
            async for chunk in chunks:
                for part in turn.feed(chunk):
                    yield part
            for part in turn.finish():
                yield part

    def _translate(self, exc: Exception) -> Failure | None:
        endpoint = self._endpoint
        where = f"the {PROVIDER} API at {endpoint.base_url}"
        if isinstance(exc, openai.APITimeoutError):
            return Failure(
                ModelTimeout(
                    f"No answer from {where} within {self.timeout:g} s. Raise timeout= on "
                    "OpenAIChatModel, or check that the server is not overloaded.",
                    provider=PROVIDER,
                ),
                retryable=True,
            )
        if isinstance(exc, openai.APIConnectionError):
            cause = f" ({exc.__cause__})" if exc.__cause__ is not None else ""
            return Failure(
                ModelConnectionError(
                    f"The connection to {where} failed or dropped{cause}. Check that the "
                    "server is running and that base_url is right.",
                    provider=PROVIDER,
                ),
                retryable=True,
            )
        if isinstance(exc, openai.APIResponseValidationError):
            return Failure(
                ModelResponseError(
                    f"{where.capitalize()} answered with data the openai SDK cannot read "
                    f"(HTTP {exc.status_code}). Check that base_url points at a Chat "
                    "Completions endpoint.",
                    provider=PROVIDER,
                    status_code=exc.status_code,
                )
            )
        if isinstance(exc, openai.APIStatusError):
            return failure_for_status(
                endpoint,
                exc.status_code,
                headers=exc.response.headers,
                detail=error_detail(exc.body),
            )
        if isinstance(exc, openai.APIError):
            # An error object inside a 200 stream. Some gateways put the upstream status in
            # `code`; use it when they do.
            code = exc.body.get("code") if isinstance(exc.body, Mapping) else None
            if isinstance(code, int) and 400 <= code < 600:
                return failure_for_status(endpoint, code, headers={}, detail=error_detail(exc.body))
            return Failure(
                ModelAPIError(
                    f"{where.capitalize()} reported an error in the middle of its stream: "
                    f"{error_detail(exc.body) or exc.message}. Try the turn again.",
                    provider=PROVIDER,
                )
            )
        if isinstance(exc, json.JSONDecodeError):
            return Failure(
                ModelResponseError(
                    f"{where.capitalize()} sent a stream event that is not JSON ({exc}). Check "
                    "that base_url points at a Chat Completions endpoint.",
                    provider=PROVIDER,
                )
            )
        return None


def wire_messages(
    messages: Sequence[Message], *, vision: bool = True
) -> list[ChatCompletionMessageParam]:
    """Our messages in the Chat Completions shape. Thinking is not sent back.

    Tool messages carry only text in this format, so with `vision` the images of a run of tool
    results follow it in one user message, each introduced by the call it came from.
    """
    wire: list[ChatCompletionMessageParam] = []
    with_images: list[ToolMessage] = []
    for message in messages:
        if not isinstance(message, ToolMessage) and with_images:
            wire.append(tool_images_message(with_images))
            with_images = []
        if isinstance(message, SystemMessage):
            wire.append({"role": "system", "content": message.content})
        elif isinstance(message, UserMessage):
            wire.append(user_message(message, vision=vision))
        elif isinstance(message, AssistantMessage):
            if message.tool_calls:
                wire.append(
                    {
                        "role": "assistant",
                        "content": message.content or None,
                        "tool_calls": [
                            {
                                "id": call.id,
                                "type": "function",
                                "function": {
                                    "name": wire_tool_name(call.name),
                                    "arguments": wire_arguments(call.arguments),
                                },
                            }
                            for call in message.tool_calls
                        ],
                    }
                )
            else:
                wire.append({"role": "assistant", "content": message.content})
        elif isinstance(message, ToolMessage):
            wire.append(
                {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
            )
            images = [a for a in message.attachments if a.mime_type.lower() in _IMAGE_MEDIA_TYPES]
            if vision and images:
                with_images.append(message.model_copy(update={"attachments": images}))
    if with_images:
        wire.append(tool_images_message(with_images))
    return wire


def user_message(message: UserMessage, *, vision: bool) -> ChatCompletionMessageParam:
    """A user message; with `vision`, its images follow its text as content parts."""
    images = [a for a in message.attachments if a.mime_type.lower() in _IMAGE_MEDIA_TYPES]
    if not (vision and images):
        return {"role": "user", "content": message.content}
    parts: list[ChatCompletionContentPartParam] = []
    if message.content:
        parts.append({"type": "text", "text": message.content})
    parts.extend(
        {"type": "image_url", "image_url": {"url": f"data:{image.mime_type};base64,{image.data}"}}
        for image in images
    )
    return {"role": "user", "content": parts}


def tool_images_message(results: Sequence[ToolMessage]) -> ChatCompletionMessageParam:
    """One user message with the images of `results`, each group introduced by its call."""
    parts: list[ChatCompletionContentPartParam] = []
    for result in results:
        count = len(result.attachments)
        noun = "image" if count == 1 else f"{count} images"
        parts.append(
            {
                "type": "text",
                "text": f"The {noun} returned by tool call {result.tool_call_id} ({result.name}):",
            }
        )
        parts.extend(
            {
                "type": "image_url",
                "image_url": {"url": f"data:{image.mime_type};base64,{image.data}"},
            }
            for image in result.attachments
        )
    return {"role": "user", "content": parts}


def wire_arguments(arguments: str) -> str:
    """Tool-call arguments as sent back: verbatim when they are a JSON object, else `{}`.

    The model's malformed arguments were answered by a tool error already; sending them back
    verbatim would make servers that parse the history (vLLM does) reject every later turn.
    """
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return "{}"
    return arguments if isinstance(parsed, dict) else "{}"


def wire_tool(tool: ToolDefinition) -> ChatCompletionFunctionToolParam:
    return {
        "type": "function",
        "function": {
            "name": wire_tool_name(tool.name),
            "description": tool.description,
            "parameters": tool.parameters,
        },
    }


def error_detail(body: object) -> str:
    """The provider's own explanation from an error body, if it gave one."""
    if isinstance(body, Mapping):
        error = body.get("error")
        if isinstance(error, Mapping):
            body = error
        message = body.get("message")
        if isinstance(message, str):
            return message
        return json.dumps(body, default=str)[:500] if body else ""
    if isinstance(body, str):
        return body[:500]
    return ""


@dataclass
class _PendingCall:
    index: int
    id: str
    name: str
    arguments: str

    def complete(self) -> ToolCall:
        # An empty string is how some servers stream a call without arguments. Anything else
        # is kept verbatim, even malformed JSON: the session loop answers it with a tool error.
        arguments = self.arguments if self.arguments.strip() else "{}"
        if self.id:
            return ToolCall(id=self.id, name=self.name, arguments=arguments)
        return ToolCall(name=self.name, arguments=arguments)


class _StreamedTurn:
    """Assembles one streamed turn from chunks and says which parts are ready."""

    def __init__(self, endpoint: Endpoint) -> None:
        self._endpoint = endpoint
        self._text: list[str] = []
        self._thinking: list[str] = []
        self._calls: list[ToolCall] = []
        self._open_call: _PendingCall | None = None
        self._finish_reason: str | None = None
        self._usage = Usage()

    def feed(self, chunk: ChatCompletionChunk) -> list[StreamPart]:
        parts: list[StreamPart] = []
        if chunk.usage is not None:
            self._usage = _usage(chunk.usage)
        for choice in chunk.choices:
            if choice.index != 0:  # we never ask for n > 1
                continue
            parts.extend(self._feed_delta(choice.delta))
            if choice.finish_reason is not None:
                self._finish_reason = choice.finish_reason
                parts.extend(self._close_open_call())
        return parts

    def finish(self) -> list[StreamPart]:
        if self._finish_reason is None:
            raise ModelResponseError(
                f"The {self._endpoint.provider} API at {self._endpoint.base_url} ended the "
                "stream before the model finished its turn (no finish_reason); the partial turn "
                "was discarded. Run the turn again.",
                provider=self._endpoint.provider,
            )
        parts = self._close_open_call()
        stop_reason = self._finish_reason
        if self._calls and stop_reason == "stop":  # Ollama and others say "stop" after calls
            stop_reason = "tool_calls"
        message = AssistantMessage(
            content="".join(self._text),
            thinking="".join(self._thinking),
            tool_calls=list(self._calls),
        )
        parts.append(TurnEnd(message=message, usage=self._usage, stop_reason=stop_reason))
        return parts

    def _feed_delta(self, delta: ChoiceDelta) -> list[StreamPart]:
        parts: list[StreamPart] = []
        reasoning = _reasoning_text(delta)
        if reasoning:
            self._thinking.append(reasoning)
            parts.append(ThinkingDelta(reasoning))
        for text in (delta.content, delta.refusal):
            if text:
                self._text.append(text)
                parts.append(TextDelta(text))
        for fragment in delta.tool_calls or ():
            parts.extend(self._feed_tool_fragment(fragment))
        return parts

    def _feed_tool_fragment(self, fragment: ChoiceDeltaToolCall) -> list[StreamPart]:
        parts: list[StreamPart] = []
        open_call = self._open_call
        index = fragment.index
        if index is None:  # some servers omit the index: a new id starts a new call
            if open_call is None:
                index = len(self._calls)
            elif fragment.id and fragment.id != open_call.id:
                index = open_call.index + 1
            else:
                index = open_call.index
        if open_call is None or index != open_call.index:
            if open_call is not None and index < open_call.index:
                raise ModelResponseError(
                    f"The {self._endpoint.provider} API at {self._endpoint.base_url} streamed "
                    f"more of tool call {index} after tool call {open_call.index} had started, "
                    "which the Chat Completions format does not allow. Check the server's "
                    "tool-call parser.",
                    provider=self._endpoint.provider,
                )
            parts.extend(self._close_open_call())
            open_call = self._open_call = _PendingCall(index=index, id="", name="", arguments="")
        if fragment.id and not open_call.id:
            open_call.id = fragment.id
        function = fragment.function
        if function is not None:
            if function.name and not open_call.name:
                open_call.name = function.name
            if function.arguments:
                open_call.arguments += function.arguments
        return parts

    def _close_open_call(self) -> list[StreamPart]:
        if self._open_call is None:
            return []
        call = self._open_call.complete()
        self._open_call = None
        self._calls.append(call)
        return [ToolCallPart(call)]


def _reasoning_text(delta: ChoiceDelta) -> str:
    """Thinking text of a delta: vLLM and DeepSeek send `reasoning_content`, others `reasoning`."""
    extra: dict[str, Any] = delta.model_extra or {}
    for key in ("reasoning_content", "reasoning"):
        value = extra.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


def _usage(usage: CompletionUsage) -> Usage:
    """Token counts; `input_tokens` includes the cached prompt tokens, as OpenAI reports them."""
    details = usage.prompt_tokens_details
    cached = details.cached_tokens if details is not None else None
    return Usage(
        input_tokens=usage.prompt_tokens or 0,
        output_tokens=usage.completion_tokens or 0,
        cache_read_tokens=cached or 0,
    )
