"""A read stream that notices the end of an MCP connection the moment it happens.

The SDK's session fails pending requests when its transport's read stream ends (a stdio server
exited, an HTTP stream dropped) but offers no event for it; an idle connection would only be
found dead at its next request. `WatchedReadStream` wraps the transport's read stream and sets
an `anyio.Event` when it runs out, so the connection's owning task can restart the server at once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from types import TracebackType
from typing import Generic, Self, TypeVar

import anyio
from mcp.client._transport import TransportStreams
from mcp.shared._stream_protocols import ReadStream
from mcp.shared.message import SessionMessage

T = TypeVar("T")


class WatchedReadStream(Generic[T]):
    """Delegates to `inner`; sets `ended` when it is exhausted or closed."""

    def __init__(self, inner: ReadStream[T], ended: anyio.Event) -> None:
        self._inner = inner
        self._ended = ended

    @property
    def last_context(self) -> object:
        # The dispatcher reads the sender's context off streams that carry one (HTTP).
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> T:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._ended.set()
            raise

    async def aclose(self) -> None:
        self._ended.set()
        await self._inner.aclose()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> T:
        try:
            return await self._inner.__anext__()
        except (StopAsyncIteration, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._ended.set()
            raise

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None:
        await self.aclose()
        return None


@asynccontextmanager
async def watched(
    transport: AbstractAsyncContextManager[TransportStreams], ended: anyio.Event
) -> AsyncIterator[TransportStreams]:
    """The transport's streams, with a read stream that sets `ended` when it runs out."""
    async with transport as (read_stream, write_stream):
        yield WatchedReadStream[SessionMessage | Exception](read_stream, ended), write_stream
