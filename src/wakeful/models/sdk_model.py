"""The shell shared by providers built on a vendor SDK: retries and the client's lifetime.

A subclass opens one streamed request in `_attempt` and maps the SDK's exceptions in
`_translate`; this class runs the attempts under the retry policy of :mod:`.retry` and owns
the SDK client, created on first use by `_open_client` and closed by `aclose`.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import replace
from types import TracebackType
from typing import Generic, Protocol, Self, TypeVar

from ..messages import ToolCall
from .base import Model, ModelRequest, StreamPart, ToolCallPart, TurnEnd, wire_tool_name
from .retry import Backoff, Failure, stream_with_retries


class ClosableClient(Protocol):
    async def close(self) -> None: ...


ClientT = TypeVar("ClientT", bound=ClosableClient)


class SDKModel(Model, Generic[ClientT]):
    """A model whose requests go through an SDK client it creates once and reuses."""

    def __init__(self, *, max_retries: int, backoff: Backoff | None) -> None:
        self.max_retries = max_retries
        self.backoff = backoff or Backoff()
        self._client: ClientT | None = None

    def stream(self, request: ModelRequest) -> AsyncGenerator[StreamPart, None]:
        parts = stream_with_retries(
            lambda: self._attempt(request),
            self._translate,
            max_retries=self.max_retries,
            backoff=self.backoff,
        )
        names = {wire_tool_name(t.name): t.name for t in request.tools}
        if all(wire == name for wire, name in names.items()):
            return parts
        return _restore_tool_names(parts, names)

    @abstractmethod
    def _attempt(self, request: ModelRequest) -> AsyncGenerator[StreamPart, None]:
        """Open one request and stream its parts."""

    @abstractmethod
    def _translate(self, exc: Exception) -> Failure | None:
        """The provider failure an SDK exception stands for, or None if it is not one."""

    @abstractmethod
    async def _open_client(self) -> ClientT:
        """Create the SDK client (called once, on the first request)."""

    async def _sdk_client(self) -> ClientT:
        if self._client is None:
            self._client = await self._open_client()
        return self._client

    async def aclose(self) -> None:
        """Close the SDK client and its connections; a later request opens a new one."""
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


async def _restore_tool_names(
    parts: AsyncGenerator[StreamPart, None], names: dict[str, str]
) -> AsyncGenerator[StreamPart, None]:
    """Give calls back the names the runtime uses (`server.tool`, sent as `server__tool`)."""

    def restore(call: ToolCall) -> ToolCall:
        name = names.get(call.name, call.name)
        return call if name == call.name else call.model_copy(update={"name": name})

    async with aclosing(parts) as stream:
        async for part in stream:
            if isinstance(part, ToolCallPart):
                yield ToolCallPart(restore(part.call))
            elif isinstance(part, TurnEnd) and part.message.tool_calls:
                calls = [restore(c) for c in part.message.tool_calls]
                message = part.message.model_copy(update={"tool_calls": calls})
                yield replace(part, message=message)
            else:
                yield part
