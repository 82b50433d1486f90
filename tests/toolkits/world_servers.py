"""Stand-ins for the outside world that the execution tools reach: in-process or on 127.0.0.1.

`RecordingHTTP` records every request (method, path, query, headers, body) and answers from a
script keyed by method and path: in-process through its `transport` (an `httpx2.MockTransport`,
registered with `HttpSettings`), or over a real socket when `serve_http` serves it with uvicorn
in the test's event loop. `SMTPRecorder` runs aiosmtpd's controller and keeps every
message it receives. `world_services` gives real Services with a real SQLite store, which the
safety ledgers need.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx2
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, Envelope, Session

from loopback_http import in_process, serving_handler
from tool_services import tool_services
from wakeful.services import Services
from wakeful.store.sqlite import Store
from wakeful.tools.http import HttpSettings


@asynccontextmanager
async def world_services(tmp_path: Path, *settings: object) -> AsyncIterator[Services]:
    """Services over `tmp_path / "root"` with a store in `tmp_path`, and the given settings."""
    root = tmp_path / "root"
    root.mkdir(exist_ok=True)
    store = await Store.open(tmp_path / "w.db")
    async with store, tool_services(root) as (services, _events):
        services.store = store
        for item in settings:
            services.settings[type(item)] = item
        yield services


def closed_port() -> int:
    """A port of 127.0.0.1 that nothing listens on (it was free a moment ago)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# --- HTTP ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Seen:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes


@dataclass(frozen=True)
class Answer:
    status: int = 200
    body: bytes | str = b""
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "application/json"


Script = Callable[[Seen], Answer]

_IN_PROCESS = "http://world.test"


class RecordingHTTP:
    """Answers each request from `routes[(method, path)]`: an Answer, or a function of it."""

    def __init__(self) -> None:
        self.served_at = ""
        self.seen: list[Seen] = []
        self.routes: dict[tuple[str, str], Answer | Script] = {}
        self.transport = in_process(self.handle, _IN_PROCESS)

    @property
    def url(self) -> str:
        """Where to send requests: 127.0.0.1 while served, else a name only `transport` answers."""
        return self.served_at or _IN_PROCESS

    @property
    def settings(self) -> HttpSettings:
        """The HTTP settings that send every tool request to this server, in-process."""
        return HttpSettings(transport=self.transport)

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        seen = Seen(
            request.method,
            request.url.path,
            dict(request.url.params),
            dict(request.headers),
            request.content,
        )
        self.seen.append(seen)
        route = self.routes.get((seen.method, seen.path))
        answer = Answer(404, b'{"message": "Not Found"}') if route is None else route
        if callable(answer):
            answer = answer(seen)
        headers = {"content-type": answer.content_type, **answer.headers}
        body = answer.body.encode() if isinstance(answer.body, str) else answer.body
        return httpx2.Response(answer.status, headers=headers, content=body)


@asynccontextmanager
async def serve_http(server: RecordingHTTP) -> AsyncIterator[RecordingHTTP]:
    """Serve `server` on a free port of 127.0.0.1 until the block ends."""
    async with serving_handler(server.handle) as url:
        server.served_at = url
        try:
            yield server
        finally:
            server.served_at = ""


# --- SMTP ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Received:
    mail_from: str
    recipients: list[str]
    data: bytes


class _Recording:
    def __init__(self, refuse: set[str]) -> None:
        self.received: list[Received] = []
        self.refuse = refuse

    async def handle_RCPT(
        self, server: SMTP, session: Session, envelope: Envelope, address: str, options: list[str]
    ) -> str:
        if address in self.refuse:
            return "550 5.1.1 No such user here"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        content = envelope.original_content or b""
        self.received.append(
            Received(str(envelope.mail_from), [str(r) for r in envelope.rcpt_tos], content)
        )
        return "250 Message accepted for delivery"


@contextmanager
def smtp_server(refuse: set[str] | None = None) -> Iterator[tuple[int, list[Received]]]:
    """An SMTP server on a free port of 127.0.0.1; yields the port and the messages it got."""
    handler = _Recording(refuse or set())
    port = closed_port()
    controller = Controller(handler, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield port, handler.received
    finally:
        controller.stop()
