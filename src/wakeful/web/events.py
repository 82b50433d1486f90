"""The console's live feed: what happened, fanned out to every open page as server-sent events.

The feed keeps the user's lines typed in the console during this run (the agent's messages are
kept, with their read state, by the outbox's message repository) so a page opened later shows
them too, and hands each new entry to every subscriber's stream. A page that reads too slowly
loses entries rather than holding the agent up: its stream is bounded and a full one is skipped
(the page reloads the state anyway, and fetches the messages it missed when it reconnects).

A page subscribes when its request arrives, before the response's headers go out: the browser
reports the stream open on the headers, and from then on nothing published may be missed. The
subscription ends with the response, also when the browser goes away (see
:class:`EventStreamResponse`).
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Any, Final

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from starlette.responses import Response

KEEPALIVE_SECONDS: Final = 15.0
_BUFFER: Final = 256


class LiveFeed:
    """The user's lines so far and the open pages' streams."""

    def __init__(self, history_limit: int = 2000) -> None:
        self.history: list[dict[str, Any]] = []
        self.history_limit = history_limit
        self._streams: list[MemoryObjectSendStream[dict[str, Any]]] = []

    async def on_outbox_message(self, message: dict[str, Any]) -> None:
        """An outbox listener: the agent's message, as a chat entry. Its attachments are named,
        not located: the page fetches them by message id and index."""
        entry = {"type": "message", "role": "agent", **_plain(message)}
        entry["attachments"] = [
            {key: item.get(key) for key in ("name", "size", "type")}
            for item in entry.get("attachments") or []
            if isinstance(item, dict)
        ]
        self.publish(entry)

    async def on_read(self, ids: list[str], channel: str) -> None:
        """An outbox read listener: these messages were read (here, or elsewhere: an IM reply),
        so every open page clears their unread marks. Not bound to a session: a page ignores
        ids it does not show, and asks for its unread count again."""
        self.publish({"type": "read", "ids": list(ids), "channel": channel})

    def publish(self, entry: dict[str, Any], *, keep: bool = False) -> None:
        """Hand `entry` to every open page; `keep` it for pages opened later too."""
        if keep:
            self.history.append(entry)
            del self.history[: -self.history_limit]
        for stream in list(self._streams):
            try:
                stream.send_nowait(entry)
            except anyio.WouldBlock:
                continue
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                self._streams.remove(stream)

    @property
    def subscribers(self) -> int:
        """How many pages hold the event stream open."""
        return len(self._streams)

    def subscribe(self, session: str) -> Subscription:
        """A new subscriber for one session's entries, receiving from now on; `close` it."""
        send, receive = anyio.create_memory_object_stream[dict[str, Any]](_BUFFER)
        self._streams.append(send)
        return Subscription(self, session, send, receive)

    def unsubscribe(self, stream: MemoryObjectSendStream[dict[str, Any]]) -> None:
        if stream in self._streams:
            self._streams.remove(stream)


class Subscription:
    """One open page's entries, as server-sent events (`chunks`), until `close`."""

    def __init__(
        self,
        feed: LiveFeed,
        session: str,
        send: MemoryObjectSendStream[dict[str, Any]],
        receive: MemoryObjectReceiveStream[dict[str, Any]],
    ) -> None:
        self.session = session
        self._feed, self._send, self._receive = feed, send, receive

    async def chunks(self) -> AsyncGenerator[bytes, None]:
        """The session's entries as server-sent events, with a comment now and then to keep
        the connection open; endless."""
        yield b": connected\n\n"
        while True:
            # No yield inside the cancel scope: the generator may pause at a yield.
            entry: dict[str, Any] | None = None
            with anyio.move_on_after(KEEPALIVE_SECONDS):
                entry = await self._receive.receive()
            if entry is None:
                yield b": keep-alive\n\n"
            elif entry.get("session", self.session) == self.session:
                yield _sse(entry)

    def close(self) -> None:
        self._feed.unsubscribe(self._send)
        self._send.close()
        self._receive.close()


class EventStreamResponse(Response):
    """A subscription's events, sent until the browser goes away or the server stops; the
    subscription is closed then, whichever way the response ends."""

    media_type = "text/event-stream"

    def __init__(self, subscription: Subscription) -> None:
        super().__init__(headers={"x-accel-buffering": "no"})
        del self.headers["content-length"]  # an endless body
        self.subscription = subscription

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            async with anyio.create_task_group() as tg:

                async def until_gone() -> None:
                    while (await receive())["type"] != "http.disconnect":
                        pass
                    tg.cancel_scope.cancel()

                tg.start_soon(until_gone)
                async with aclosing(self.subscription.chunks()) as chunks:
                    async for chunk in chunks:
                        await send({"type": "http.response.body", "body": chunk, "more_body": True})
        finally:
            self.subscription.close()


def _plain(message: dict[str, Any]) -> dict[str, Any]:
    """The outbox message with only JSON values (a card or attachment list stays as it is)."""
    return json.loads(json.dumps(message, default=str))  # type: ignore[no-any-return]


def _sse(entry: dict[str, Any]) -> bytes:
    data = json.dumps(entry, ensure_ascii=False)
    return f"event: {entry.get('type', 'message')}\ndata: {data}\n\n".encode()
