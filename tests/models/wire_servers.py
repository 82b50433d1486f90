"""A local HTTP server that plays scripted provider replies, so tests can run the real SDKs.

`WireServer` answers each POST with the next scripted `Reply`: a JSON error with a status and
headers, or a server-sent-event stream whose frames can be paced, stalled or cut off mid-body.
It records every request and notices when a client hangs up on a stream. `serve_wire` runs it
with uvicorn on a free port of 127.0.0.1 inside the caller's event loop.
"""

from __future__ import annotations

import json
import os
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from loopback_http import serving


def sse(data: object, *, event: str | None = None) -> bytes:
    """One server-sent event carrying `data` as JSON."""
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data)}\n\n".encode()


@dataclass(frozen=True)
class Reply:
    """One scripted answer.

    With `json_body` set, the server answers with that body and `status`. Otherwise it streams
    `frames`, waiting `frame_delay` before each frame from index `slow_from` on; with
    `drop_after` set it cuts the connection after that many frames.
    """

    status: int = 200
    json_body: object = None
    headers: Mapping[str, str] = field(default_factory=dict)
    frames: Sequence[bytes] = ()
    frame_delay: float = 0.0
    slow_from: int = 1
    drop_after: int | None = None


@dataclass(frozen=True)
class RecordedRequest:
    path: str
    headers: Mapping[str, str]
    body: Any
    at: float
    """`time.monotonic()` when the request arrived."""


class DroppedByTest(Exception):
    """Raised inside a stream to make uvicorn cut the connection mid-body."""


class WireServer:
    def __init__(self) -> None:
        self.port = 0
        self.requests: list[RecordedRequest] = []
        self.client_hung_up = anyio.Event()
        self._replies: deque[Reply] = deque()
        # Instead of the script: a function choosing each reply from the request's body.
        self.choose: Callable[[dict[str, Any]], Reply] | None = None
        self.app = Starlette(routes=[Route("/{path:path}", self._handle, methods=["POST"])])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def script(self, *replies: Reply) -> None:
        self._replies.extend(replies)

    async def _handle(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append(
            RecordedRequest(request.url.path, dict(request.headers), body, time.monotonic())
        )
        if self.choose is not None:
            self._replies.append(self.choose(body))
        if not self._replies:
            message = f"The test server has no reply scripted for request {len(self.requests)}."
            return JSONResponse({"error": {"message": message}}, status_code=400)
        reply = self._replies.popleft()
        if reply.json_body is not None:
            return JSONResponse(reply.json_body, status_code=reply.status, headers=reply.headers)
        return StreamingResponse(
            self._stream(reply),
            status_code=reply.status,
            headers=reply.headers,
            media_type="text/event-stream",
        )

    async def _stream(self, reply: Reply) -> AsyncIterator[bytes]:
        try:
            for i, frame in enumerate(reply.frames):
                if i == reply.drop_after:
                    raise DroppedByTest
                if reply.frame_delay and i >= reply.slow_from:
                    await anyio.sleep(reply.frame_delay)
                yield frame
        except anyio.get_cancelled_exc_class():
            # Starlette cancels the stream when the client disconnects.
            self.client_hung_up.set()
            raise


@asynccontextmanager
async def serve_wire(server: WireServer) -> AsyncIterator[WireServer]:
    """Run `server` on a free port of 127.0.0.1 until the block ends."""
    async with serving(server.app) as port:
        server.port = port
        yield server


# --- OpenAI chat-completions replies ----------------------------------------------------------

DONE = b"data: [DONE]\n\n"


def completion_chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    return sse(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "test",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
    )


def tool_call_reply(name: str, **arguments: Any) -> Reply:
    call = {
        "index": 0,
        "id": "call_1",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }
    return Reply(
        frames=[
            completion_chunk({"role": "assistant", "content": None, "tool_calls": [call]}),
            completion_chunk({}, finish="tool_calls"),
            DONE,
        ]
    )


def text_reply(text: str) -> Reply:
    return Reply(
        frames=[
            completion_chunk({"role": "assistant", "content": text}),
            completion_chunk({}, finish="stop"),
            DONE,
        ]
    )


def subprocess_env() -> dict[str, str]:
    """For a `wakeful` subprocess talking to a wire server: this environment without provider
    settings or proxies that could redirect the requests."""
    dropped = {"OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID"}
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in dropped and not key.lower().endswith("_proxy")
    }
    return env | {"NO_PROXY": "127.0.0.1,localhost"}
