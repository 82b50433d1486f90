"""The console's live feed: what happened, fanned out to every open page as server-sent events.

The feed keeps the user's lines typed in the console during this run (the agent's messages are
kept, with their read state, by the outbox's message repository) so a page opened later shows
them too, and hands each new entry to every subscriber's stream. A page that reads too slowly
loses entries rather than holding the agent up: its stream is bounded and a full one is skipped
(the page reloads the state anyway).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any, Final

import anyio
from anyio.streams.memory import MemoryObjectSendStream

KEEPALIVE_SECONDS: Final = 15.0
_BUFFER: Final = 256


class LiveFeed:
    """The user's lines so far and the open pages' streams."""

    def __init__(self, history_limit: int = 2000) -> None:
        self.history: list[dict[str, Any]] = []
        self.history_limit = history_limit
        self._streams: list[MemoryObjectSendStream[dict[str, Any]]] = []

    async def on_outbox_message(self, message: dict[str, Any]) -> None:
        """An outbox listener: the agent's message, as a chat entry."""
        self.publish({"type": "message", "role": "agent", **_plain(message)})

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

    async def stream(self, session: str) -> AsyncIterator[bytes]:
        """The server-sent events of one session, with a comment now and then to keep the
        connection open; ends when the page goes away (the response is cancelled)."""
        send, receive = anyio.create_memory_object_stream[dict[str, Any]](_BUFFER)
        self._streams.append(send)
        try:
            yield b": connected\n\n"
            async with receive:
                while True:
                    # No yield inside the cancel scope: the generator may pause at a yield.
                    entry: dict[str, Any] | None = None
                    with anyio.move_on_after(KEEPALIVE_SECONDS):
                        entry = await receive.receive()
                    if entry is None:
                        yield b": keep-alive\n\n"
                    elif entry.get("session", session) == session:
                        yield _sse(entry)
        finally:
            if send in self._streams:
                self._streams.remove(send)
            send.close()


def _plain(message: dict[str, Any]) -> dict[str, Any]:
    """The outbox message with only JSON values (a card or attachment list stays as it is)."""
    return json.loads(json.dumps(message, default=str))  # type: ignore[no-any-return]


def _sse(entry: dict[str, Any]) -> bytes:
    data = json.dumps(entry, ensure_ascii=False)
    return f"event: {entry.get('type', 'message')}\ndata: {data}\n\n".encode()
