"""Models that play scripted turns: for tests, demos and benchmarks, shipped as library API.

`ScriptedModel(turns)` answers each request with the next turn of a list. `FunctionModel(fn)`
answers with whatever `fn(messages, tools)` returns, so a script can react to the trajectory
(for instance, call `task_status` once a tool result has arrived). Both stream their text in
chunks with an optional delay, so interrupts can land mid-stream exactly as with a real provider.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio

from ..errors import ModelAPIError, UserError
from ..messages import AssistantMessage, Message, ToolCall
from .base import (
    Model,
    ModelRequest,
    StreamPart,
    TextDelta,
    ThinkingDelta,
    ToolCallPart,
    ToolDefinition,
    TurnEnd,
    Usage,
)


@dataclass
class Turn:
    """One scripted assistant turn.

    `delay` is waited before the first part, `chunk_delay` between streamed chunks (and between
    tool calls), `after_calls_delay` between the last tool call and the end of the turn (a model
    still streaming after it emitted a call). When
    `error` is set, the stream raises it after `error_after_chunks` text chunks, as a provider
    failing mid-stream would.
    """

    text: str = ""
    thinking: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    delay: float = 0.0
    chunk_delay: float = 0.0
    error: ModelAPIError | None = None
    error_after_chunks: int = 0
    after_calls_delay: float = 0.0


def call(name: str, /, call_id: str | None = None, **arguments: Any) -> ToolCall:
    """A tool call with JSON-encoded arguments, for scripts: `call("run_shell", command="ls")`."""
    return ToolCall.make(name, call_id=call_id, **arguments)


def say(text: str, **kwargs: Any) -> Turn:
    """A turn that only writes text."""
    return Turn(text=text, **kwargs)


def use(*calls: ToolCall, text: str = "", **kwargs: Any) -> Turn:
    """A turn that calls tools (optionally with some text before the calls)."""
    return Turn(text=text, tool_calls=list(calls), **kwargs)


_CHUNK = re.compile(r"\S+\s*|\s+")


async def _play(turn: Turn, model_name: str) -> AsyncGenerator[StreamPart, None]:
    if turn.delay:
        await anyio.sleep(turn.delay)
    if turn.thinking:
        yield ThinkingDelta(turn.thinking)
    chunks = _CHUNK.findall(turn.text)
    for i, chunk in enumerate(chunks):
        if turn.error is not None and i == turn.error_after_chunks:
            raise turn.error
        if turn.chunk_delay:
            await anyio.sleep(turn.chunk_delay)
        yield TextDelta(chunk)
    if turn.error is not None:
        raise turn.error
    for i, tool_call in enumerate(turn.tool_calls):
        if i and turn.chunk_delay:
            await anyio.sleep(turn.chunk_delay)
        yield ToolCallPart(tool_call)
    if turn.tool_calls and turn.after_calls_delay:
        await anyio.sleep(turn.after_calls_delay)
    message = AssistantMessage(
        content=turn.text, thinking=turn.thinking, tool_calls=list(turn.tool_calls)
    )
    usage = Usage(output_tokens=len(chunks) + len(turn.tool_calls))
    stop_reason = "tool_calls" if turn.tool_calls else "stop"
    yield TurnEnd(message=message, usage=usage, stop_reason=stop_reason)


class ScriptedModel(Model):
    """Answers each request with the next scripted turn; records every request it saw."""

    def __init__(self, turns: Sequence[Turn | str], *, name: str = "scripted") -> None:
        self.name = name
        self._turns = [say(t) if isinstance(t, str) else t for t in turns]
        self.requests: list[ModelRequest] = []

    @property
    def remaining(self) -> int:
        return len(self._turns) - len(self.requests)

    def stream(self, request: ModelRequest) -> AsyncGenerator[StreamPart, None]:
        index = len(self.requests)
        self.requests.append(request)
        if index >= len(self._turns):
            raise UserError(
                f"ScriptedModel {self.name!r} has {len(self._turns)} turns but received request "
                f"{index + 1}. Add more turns to the script, or use FunctionModel to compute "
                "turns from the trajectory."
            )
        return _play(self._turns[index], self.name)


TurnFunction = Callable[
    [Sequence[Message], Sequence[ToolDefinition]], Turn | str | Awaitable[Turn | str]
]


class FunctionModel(Model):
    """Answers each request with `fn(messages, tools)`; `fn` may be sync or async."""

    def __init__(self, fn: TurnFunction, *, name: str = "function") -> None:
        self.name = name
        self._fn = fn
        self.requests: list[ModelRequest] = []

    async def _run(self, request: ModelRequest) -> AsyncGenerator[StreamPart, None]:
        result = self._fn(request.messages, request.tools)
        if inspect.isawaitable(result):
            result = await result
        turn = say(result) if isinstance(result, str) else result
        async for part in _play(turn, self.name):
            yield part

    def stream(self, request: ModelRequest) -> AsyncGenerator[StreamPart, None]:
        self.requests.append(request)
        return self._run(request)
