"""The one interface every model provider implements: stream a turn, cancellable at any point.

A provider turns a :class:`ModelRequest` (messages and tool definitions) into an async stream of
:class:`StreamPart` values: thinking and text deltas while the model writes, a
:class:`ToolCallPart` as soon as each tool call is complete (so safety checks can start while the
model still streams), and exactly one :class:`TurnEnd` carrying the finished assistant message and
token usage. Cancelling the consumer cancels the request; nothing half-streamed is ever returned.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

from ..errors import ModelResponseError
from ..messages import AssistantMessage, Message, ToolCall


@dataclass(frozen=True, slots=True)
class ToolDefinition:
    """What a model is told about one tool."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ModelRequest:
    messages: Sequence[Message]
    tools: Sequence[ToolDefinition] = ()
    max_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
        )


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ThinkingDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ToolCallPart:
    """A tool call whose name and arguments are complete."""

    call: ToolCall


@dataclass(frozen=True, slots=True)
class TurnEnd:
    message: AssistantMessage
    usage: Usage = field(default_factory=Usage)
    stop_reason: str = "stop"


StreamPart = TextDelta | ThinkingDelta | ToolCallPart | TurnEnd


def wire_tool_name(name: str) -> str:
    """A tool name as providers accept it (letters, digits, `_`, `-`): namespaced MCP tools'
    dots (`server.tool`) become `__`. Adapters map names back with the request's tool list."""
    return name.replace(".", "__")


class Model(ABC):
    """A model provider. Implementations are adapters: they translate, they hold no policy."""

    name: str = "model"
    # Whether the adapter sends the images of tool results (`ToolMessage.attachments`) to the
    # model; when False the model reads only their description in the result's text.
    vision: bool = False

    @abstractmethod
    def stream(self, request: ModelRequest) -> AsyncGenerator[StreamPart, None]:
        """Stream one assistant turn. The last part is always a `TurnEnd`."""

    async def complete(self, request: ModelRequest) -> TurnEnd:
        """Run a turn to the end and return its `TurnEnd`."""
        async with aclosing(self.stream(request)) as parts:
            async for part in parts:
                if isinstance(part, TurnEnd):
                    return part
        raise ModelResponseError(
            f"Model {self.name!r} ended its stream without a final turn.", provider=self.name
        )
