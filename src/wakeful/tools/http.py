"""The HTTP client every tool uses, and the one translation of HTTP failures into ToolErrors.

:func:`http_client` is the one place an ``httpx2.AsyncClient`` for a tool is built. The tool
family passes its own policy (timeout, base URL, headers, redirects, proxy); how the bytes move
comes from the :class:`HttpSettings` in ``Services.settings``. Registering
``HttpSettings(transport=httpx2.MockTransport(handler))`` answers every tool request in-process,
which is how tests (and embedders that route requests themselves) replace the network.

:class:`HttpErrors` is the adapter edge: ``httpx2`` exceptions, error statuses and oversized
bodies become ToolErrors that name who was asked, what went wrong and what to do next. A family
says only what is special to it: how to name the service, what to check when it cannot be
reached, what to do after a failure, and the advice for the statuses its service gives meaning.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import httpx2

from ..errors import ToolError
from ..services import settings_of

if TYPE_CHECKING:
    from ..services import Services


@dataclass(frozen=True, slots=True)
class HttpSettings:
    """How the HTTP requests of every tool family travel; look it up with `settings_of`."""

    transport: httpx2.AsyncBaseTransport | None = None
    """Moves the bytes of every tool request, e.g. ``httpx2.MockTransport(handler)``; None opens
    real connections (and honours each family's proxy setting and the environment's proxies).
    The transport is shared by all clients and never closed by them: its owner closes it. With
    a transport given, the families' proxy settings do not apply (the transport decides)."""


def http_client(
    services: Services | None,
    *,
    timeout_seconds: float,
    base_url: str = "",
    headers: Mapping[str, str] | None = None,
    follow_redirects: bool = False,
    max_redirects: int = 5,
    proxy: str | None = None,
) -> httpx2.AsyncClient:
    """A client with a tool family's policy, over the transport of `services`' HttpSettings.

    `services` None uses the network directly (for callers that have no services). The client
    is the caller's to close (`async with`); closing it never closes a shared transport.
    """
    transport = settings_of(services, HttpSettings).transport if services is not None else None
    return httpx2.AsyncClient(
        base_url=base_url,
        headers=dict(headers or {}),
        timeout=httpx2.Timeout(timeout_seconds),
        follow_redirects=follow_redirects,
        max_redirects=max_redirects,
        # An explicit proxy would be mounted in front of a given transport and bypass it.
        proxy=proxy if transport is None else None,
        transport=_Shared(transport) if transport is not None else None,
    )


class _Shared(httpx2.AsyncBaseTransport):
    """A transport lent to one client: requests pass through, closing the client leaves it open."""

    def __init__(self, transport: httpx2.AsyncBaseTransport) -> None:
        self._transport = transport

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        return await self._transport.handle_async_request(request)


RequestFailure = httpx2.HTTPError | httpx2.InvalidURL
"""What a request can raise: a transport failure, a redirect loop, or a URL that cannot be sent."""

# Failures that happen before any byte of the request reaches the server.
_NOTHING_SENT = (
    httpx2.ConnectError,
    httpx2.ConnectTimeout,
    httpx2.PoolTimeout,
    httpx2.ProxyError,
    httpx2.UnsupportedProtocol,
    httpx2.InvalidURL,
)


def nothing_sent(exc: RequestFailure) -> bool:
    """Whether `exc` happened before the request could reach the server (so it had no effect)."""
    return isinstance(exc, _NOTHING_SENT)


async def read_capped(response: httpx2.Response, limit: int) -> tuple[bytes, bool]:
    """At most `limit` bytes of a streamed body, and whether the body was longer than that."""
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) > limit:
            return bytes(body[:limit]), True
    return bytes(body), False


@dataclass(frozen=True, slots=True)
class HttpErrors:
    """How one tool family words its HTTP failures: who was asked, and what to do next.

    Every message names `target`, what happened, and ends with advice a model can act on.
    """

    target: str
    """Who was asked, as the message names it: a URL, or e.g. "GitHub at https://api.github.com"."""

    timeout_seconds: float
    """The timeout the client was given, named when it runs out."""

    check: str = "Check the URL for typos, and the network."
    """What to check when the server cannot be reached or the URL cannot be sent."""

    retry: str = "Try again in a minute; if it keeps failing, the service is down."
    """What to do after a failure that may be temporary (a timeout, a broken connection, 5xx)."""

    changes: bool = False
    """The request changes something (POST, PUT, …): messages say whether it may have had an
    effect, since repeating it blindly could do it twice."""

    max_redirects: int = 0
    """The redirects the client follows, named when there were more."""

    status_advice: Mapping[int, str] = field(default_factory=dict)
    """Advice for statuses the service gives a meaning, replacing the general advice."""

    refused: str = "Check the arguments and call again."
    """Advice for a 4xx status not in `status_advice` nor among the well-known ones."""

    def for_exception(self, exc: RequestFailure) -> ToolError:
        """The ToolError for a request that raised `exc` (raise it `from exc`)."""
        where = self.target
        if isinstance(exc, httpx2.ConnectTimeout):
            return ToolError(
                f"Could not connect to {where} within {self.timeout_seconds:g} s"
                f"{self._nothing_sent}. {self.check}"
            )
        if isinstance(exc, httpx2.ConnectError | httpx2.ProxyError | httpx2.PoolTimeout):
            reason = f" ({exc})" if str(exc) else ""
            return ToolError(
                f"Could not connect to {where}{reason}: the host is unknown, not reachable, or "
                f"refused the connection{self._nothing_sent}. {self.check}"
            )
        if isinstance(exc, httpx2.TimeoutException):
            return ToolError(
                f"{where} did not answer within {self.timeout_seconds:g} s{self._maybe_done}. "
                f"{self.retry}"
            )
        if isinstance(exc, httpx2.TooManyRedirects):
            return ToolError(
                f"{where} redirected more than {self.max_redirects} times (a redirect loop?). "
                f"Open the final address directly if you know it. {self.check}"
            )
        if isinstance(exc, httpx2.InvalidURL | httpx2.UnsupportedProtocol):
            return ToolError(
                f"No request can be sent to {where}: the URL is not valid ({exc}). Pass a full "
                f"http(s) URL such as 'https://example.com/path'. {self.check}"
            )
        detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        return ToolError(
            f"The request to {where} failed ({detail}): the connection broke off or the answer "
            f"could not be read{self._maybe_done}. {self.retry}"
        )

    def for_status(self, response: httpx2.Response, *, said: str | None = None) -> ToolError:
        """The ToolError for an answer with a status of 400 or more; see `status_message`."""
        return ToolError(self.status_message(response, said=said))

    def status_message(self, response: httpx2.Response, *, said: str | None = None) -> str:
        """What an error status means and what to do; `said` overrides the body excerpt shown."""
        status = response.status_code
        reason = response.reason_phrase or "error"
        excerpt = _excerpt(response.text) if said is None else said
        shown = f" It said: {excerpt}" if excerpt else ""
        if excerpt and not excerpt.endswith((".", "!", "?", "…")):
            shown += "."
        return (
            f"{self.target} answered HTTP {status} {reason}{self._maybe_done_status(status)}."
            f"{shown} {self._advice(status)}"
        )

    def too_large(self, limit: int, advice: str) -> ToolError:
        """The ToolError for an answer longer than `limit` bytes; `advice` says how to ask less."""
        return ToolError(
            f"{self.target} sent more than {limit:,} bytes, more than is read from one answer. "
            f"{advice}"
        )

    def _advice(self, status: int) -> str:
        if status in self.status_advice:
            return self.status_advice[status]
        if status in (401, 403):
            return (
                "The server refused access: check the credentials in the settings, or whether "
                "this needs a login at all."
            )
        if status == 404:
            return f"Nothing is at this address. {self.check}"
        if status == 429:
            return "The service is rate-limiting requests: wait a minute before asking again."
        if status >= 500:
            return f"The server failed. {self.retry}"
        return self.refused

    @property
    def _nothing_sent(self) -> str:
        return "; nothing was sent" if self.changes else ""

    @property
    def _maybe_done(self) -> str:
        return "; the request may or may not have taken effect" if self.changes else ""

    def _maybe_done_status(self, status: int) -> str:
        return (
            " (the request may or may not have taken effect)"
            if self.changes and status >= 500
            else ""
        )


def _excerpt(text: str, limit: int = 200) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"
