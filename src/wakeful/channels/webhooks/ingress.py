"""The webhook ingress: one channel, one HTTP server, several endpoints.

`POST /hooks/<endpoint>` is checked in the order that costs an attacker most and us least:
unknown endpoint (404), wrong method (405), too many deliveries in flight (429 with
Retry-After), a body over the cap (413, read as a stream and dropped at the cap, or refused at
once by its Content-Length), a bad, missing or stale signature (401 with the reason), a body
that cannot be read (400). None of these reaches the store or the agent.

A delivery that passes is handed to the Inbox (with those that arrive meanwhile, in one write:
see :mod:`.batching`), and answered 2xx **only once the Inbox says it is stored** (or already
was: a redelivery is answered 200 and dropped). When the store refuses it (a full disk) the
answer is 503 with Retry-After, so the sender tries again: whatever was acknowledged is durable,
and nothing unacknowledged is lost by the sender. Error bodies are short JSON,
`{"error": "..."}`, and never hold a secret.

The server is uvicorn serving a Starlette app in the runtime's own event loop; it leaves the
process's signal handlers to the runtime. `app` can be driven without a socket (httpx's ASGI
transport) where the wire is not the point.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import socket
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final

import anyio
import uvicorn
from anyio.abc import TaskStatus
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ...clock import Clock, SystemClock
from ...core.channel import ChannelHealth, ChannelState, Delivery, Inbox
from ...errors import StoreError, StoreFull, UserError
from ...events import InvalidEvent
from .batching import GroupDelivery
from .deliveries import PayloadRejected, delivery_event, slack_challenge
from .settings import WebhookEndpoint, WebhookSettings
from .signatures import SignatureRejected, verify_github, verify_slack, verify_standard

__all__ = ["WebhookIngress", "WebhookListenError"]

log = logging.getLogger(__name__)

# Seconds a sender is asked to wait: after a 429 (deliveries in flight), after a 503 (the store
# refused the write; a full disk takes a while to clear).
OVERLOAD_RETRY_AFTER: Final = 1
STORE_RETRY_AFTER: Final = 30
STARTUP_TIMEOUT: Final = 10.0
# On shutdown, deliveries being stored get this long to finish and be answered.
GRACEFUL_SHUTDOWN_SECONDS: Final = 5

_METHODS: Final = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]


class WebhookListenError(UserError):
    """The ingress cannot listen on its host and port."""


class _BodyTooLarge(Exception):
    pass


@dataclass(frozen=True)
class _Endpoint:
    settings: WebhookEndpoint
    key: bytes = field(repr=False)  # the secret: never in a repr, a log or a traceback


class WebhookIngress:
    """A :class:`~wakeful.core.channel.Channel` serving the endpoints of `settings`; each
    verified delivery becomes one event handed to `inbox`."""

    def __init__(
        self,
        settings: WebhookSettings,
        *,
        name: str,
        inbox: Inbox,
        clock: Clock | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        """Secrets are resolved here (a missing `secret_env` variable is a ConfigError now,
        not a 401 for every delivery later)."""
        self._settings = settings
        self._name = name
        # Deliveries that overlap reach the Inbox together, in one write (see .batching).
        self._delivery = GroupDelivery(inbox)
        self._clock = clock or SystemClock()
        # The endpoint given inline takes the channel's name: "webhook:github" → /hooks/github.
        endpoints = [
            e if e.name else e.model_copy(update={"name": name.rpartition(":")[2]})
            for e in settings.endpoints
        ]
        self._endpoints = {e.name: _Endpoint(e, e.secret_key(environ)) for e in endpoints}
        self._in_flight = 0
        self._state: ChannelState = "stopped"
        self._port: int | None = None
        self._last_event_at: datetime | None = None
        # How many answers of each status ("200", "401", …) it gave, for health and tests.
        self.answered: collections.Counter[str] = collections.Counter()
        self.app = Starlette(
            routes=[Route("/hooks/{endpoint}", self._receive, methods=_METHODS)],
            exception_handlers={HTTPException: _http_error},
        )

    @property
    def name(self) -> str:
        return self._name

    @property
    def url(self) -> str | None:
        """The base URL it listens on once running, e.g. "http://127.0.0.1:8787"."""
        if self._port is None:
            return None
        host = self._settings.host
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self._port}"

    def endpoint_urls(self) -> dict[str, str]:
        """Each endpoint's URL, once running (for `connect_channel`'s answer and the docs)."""
        base = self.url
        return {n: f"{base}/hooks/{n}" for n in self._endpoints} if base else {}

    def health(self) -> ChannelHealth:
        refused = {k: v for k, v in self.answered.items() if not k.startswith("2")}
        detail = f"listening on {self.url}" if self.url else "not listening"
        detail += f"; endpoints: {', '.join(sorted(self._endpoints))}"
        if refused:
            detail += "; refused: " + ", ".join(f"{n} × {c}" for c, n in sorted(refused.items()))
        return ChannelHealth(self._state, detail, self._last_event_at)

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Listen until cancelled; reports started once connections are accepted. On
        cancellation, deliveries being stored are finished and answered first."""
        sock = self._bind()
        server = _Server(
            uvicorn.Config(
                self.app,
                http="auto",  # httptools when installed (uvicorn[standard]), else h11
                ws="none",
                lifespan="off",
                log_config=None,
                log_level="warning",
                access_log=False,
                server_header=False,
                timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
            )
        )
        self._state = "starting"
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(_serve_shielded, server, sock)
                try:
                    with anyio.fail_after(STARTUP_TIMEOUT):
                        await server.ready.wait()
                    self._state = "running"
                    log.info("webhook ingress %s listening on %s", self._name, self.url)
                    task_status.started()
                    await anyio.sleep_forever()
                finally:
                    server.should_exit = True
        finally:
            self._state = "stopped"
            self._port = None
            sock.close()

    def _bind(self) -> socket.socket:
        host, port = self._settings.host, self._settings.port
        # IPPROTO_TCP named, not left 0: asyncio sets TCP_NODELAY only on sockets that say they
        # are TCP, and without it every answer waits ~40 ms for a delayed ACK (Nagle).
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
        except OSError as exc:
            sock.close()
            raise WebhookListenError(
                f"The webhook ingress {self._name!r} cannot listen on {host}:{port}: "
                f"{exc.strerror or exc}. Choose another port in its settings (port = 0 picks a "
                "free one and reports it in the channel's health)."
            ) from exc
        self._port = sock.getsockname()[1]
        return sock

    # -- one delivery --

    async def _receive(self, request: Request) -> Response:
        response = await self._answer(request)
        self.answered[str(response.status_code)] += 1
        return response

    async def _answer(self, request: Request) -> Response:
        endpoint = self._endpoints.get(request.path_params["endpoint"])
        if endpoint is None:
            return _error(404, "No webhook endpoint of that name is served here.")
        if request.method != "POST":
            return _error(405, "Webhook deliveries are POSTed.", headers={"Allow": "POST"})
        if self._in_flight >= self._settings.max_in_flight:
            return _error(
                429,
                "Too many deliveries in flight; retry shortly.",
                headers={"Retry-After": str(OVERLOAD_RETRY_AFTER)},
            )
        self._in_flight += 1
        try:
            return await self._verify_and_deliver(endpoint, request)
        finally:
            self._in_flight -= 1

    async def _verify_and_deliver(self, endpoint: _Endpoint, request: Request) -> Response:
        cap = self._settings.max_body_bytes
        try:
            body = await _read_capped(request, cap)
        except _BodyTooLarge:
            return _error(413, f"The body is over this endpoint's cap of {cap:,} bytes.")
        except ClientDisconnect:
            return _error(400, "The sender disconnected before the body was complete.")
        headers = {k.lower(): v for k, v in request.headers.items()}
        settings = endpoint.settings
        now = self._clock.now()
        window = self._settings.replay_window_seconds
        delivery_id: str | None = None
        try:
            if settings.scheme == "standard":
                delivery_id = verify_standard(
                    endpoint.key, headers, body, now=now.timestamp(), window=window
                )
            elif settings.scheme == "github":
                delivery_id = verify_github(endpoint.key, headers, body)
            elif settings.scheme == "slack":
                verify_slack(endpoint.key, headers, body, now=now.timestamp(), window=window)
        except SignatureRejected as exc:
            log.info("webhook %s/%s: refused (%s)", self._name, settings.name, exc.reason)
            return _error(401, exc.reason)
        if settings.scheme == "slack":
            challenge = slack_challenge(body)
            if challenge is not None:
                return JSONResponse({"challenge": challenge})
        try:
            event = delivery_event(
                settings,
                channel=self._name,
                headers=headers,
                body=body,
                delivery_id=delivery_id,
                now=now,
            )
        except PayloadRejected as exc:
            return _error(400, exc.reason)
        try:
            filtered = settings.filter.rejects(event) if settings.filter else None
            outcome: Delivery = await self._delivery.deliver(event, filtered=filtered)
        except InvalidEvent as exc:  # over the store's event size cap, once parsed
            log.warning("webhook %s/%s: %s", self._name, settings.name, exc)
            return _error(413, "The delivery is too large to store as one event; send less.")
        except StoreFull:
            return _error(
                503,
                "The receiver cannot store deliveries right now; retry later.",
                headers={"Retry-After": str(STORE_RETRY_AFTER)},
            )
        except StoreError:
            log.exception("webhook %s/%s: could not store a delivery", self._name, settings.name)
            return _error(
                503,
                "The receiver could not store the delivery; retry later.",
                headers={"Retry-After": str(STORE_RETRY_AFTER)},
            )
        if outcome != "duplicate":
            self._last_event_at = now
        return JSONResponse({"status": outcome})


class _Server(uvicorn.Server):
    """uvicorn, saying when it accepts connections, and leaving signals to the runtime."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = anyio.Event()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        self.ready.set()


async def _serve_shielded(server: _Server, sock: socket.socket) -> None:
    # Shielded: when the channel is cancelled, `should_exit` stops the server gracefully, and
    # the deliveries it is storing are answered, instead of being cut off mid-write.
    with anyio.CancelScope(shield=True):
        await server.serve([sock])


async def _read_capped(request: Request, cap: int) -> bytes:
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > cap:
        raise _BodyTooLarge
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > cap:
            raise _BodyTooLarge
        chunks.append(chunk)
    return b"".join(chunks)


def _error(status: int, reason: str, *, headers: Mapping[str, str] | None = None) -> Response:
    return JSONResponse({"error": reason}, status_code=status, headers=headers)


async def _http_error(request: Request, exc: Exception) -> Response:
    # Starlette's own refusals (no such path) in the same short JSON as ours.
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    reason = "Not found: webhooks are POSTed to /hooks/<endpoint>." if status == 404 else "Error."
    return _error(status, reason, headers=getattr(exc, "headers", None))
