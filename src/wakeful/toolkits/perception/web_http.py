"""HTTP for the web tools: one page or one JSON answer, with the errors a model can act on.

This is the adapter edge: `httpx2` exceptions and HTTP error statuses become ToolErrors that
name the URL, what went wrong and what to try next. A page body is read as a stream and cut at
`WebSettings.max_page_bytes`, so a huge or endless response costs at most that much.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx2

from ...errors import ToolError
from .web_settings import WebSettings

HTML_TYPES = ("text/html", "application/xhtml+xml")


@dataclass(frozen=True, slots=True)
class FetchedPage:
    """The bytes of one page as it arrived, and where it came from after redirects."""

    url: str
    content_type: str
    charset: str | None
    content_language: str | None
    body: bytes
    cut_at_max_bytes: bool
    redirected: bool

    def text(self) -> str:
        """The body decoded with the charset the server named, or UTF-8; bad bytes become �."""
        try:
            return self.body.decode(self.charset or "utf-8", errors="replace")
        except LookupError:  # a charset Python does not know
            return self.body.decode("utf-8", errors="replace")


def checked_url(url: str) -> str:
    """`url` stripped, if it is an absolute http or https URL with a host; ToolError if not."""
    url = url.strip()
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("http", "https"):
        shown = f"scheme {parts.scheme!r}" if parts.scheme else "no scheme"
        raise ToolError(
            f"{url!r} has {shown}; only http and https URLs can be fetched. Pass a full URL "
            "such as 'https://example.com/page' (to read a local file, use read_file)."
        )
    if not parts.hostname:
        raise ToolError(f"{url!r} names no host. Pass a full URL such as 'https://example.com/'.")
    return url


def _client(settings: WebSettings) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(
        timeout=httpx2.Timeout(settings.timeout_seconds),
        follow_redirects=True,
        max_redirects=settings.max_redirects,
        headers={"User-Agent": settings.user_agent},
        proxy=settings.proxy,
    )


async def fetch_page(url: str, settings: WebSettings) -> FetchedPage:
    """GET an HTML page; ToolError when it cannot be reached, fails, or is not HTML."""
    async with _client(settings) as client:
        try:
            async with client.stream("GET", url, headers={"Accept": ", ".join(HTML_TYPES)}) as r:
                _check_status(r, url)
                content_type = r.headers.get("content-type", "")
                media_type = content_type.split(";", 1)[0].strip().lower()
                if media_type not in HTML_TYPES:
                    raise ToolError(_not_html(url, media_type))
                body, cut = await _read_capped(r, settings.max_page_bytes)
                return FetchedPage(
                    url=str(r.url),
                    content_type=media_type,
                    charset=r.charset_encoding,
                    content_language=r.headers.get("content-language"),
                    body=body,
                    cut_at_max_bytes=cut,
                    redirected=bool(r.history),
                )
        except (httpx2.HTTPError, httpx2.InvalidURL) as exc:
            raise _transport_error(url, settings, exc) from exc


async def get_json(
    url: str,
    settings: WebSettings,
    *,
    params: Mapping[str, str | int],
    headers: Mapping[str, str] | None = None,
    service: str,
) -> Any:
    """GET a JSON answer from a search service; ToolError naming `service` when that fails."""
    async with _client(settings) as client:
        try:
            response = await client.get(
                url, params=dict(params), headers={"Accept": "application/json", **(headers or {})}
            )
        except (httpx2.HTTPError, httpx2.InvalidURL) as exc:
            raise _transport_error(url, settings, exc, service=service) from exc
        _check_status(response, url, service=service)
        try:
            return json.loads(response.content)
        except (ValueError, UnicodeDecodeError) as exc:
            media_type = response.headers.get("content-type", "no content type")
            raise ToolError(
                f"{service} at {url} answered with {media_type}, not JSON. Check that the URL "
                "in the web settings points at the service's API (for SearXNG, that the json "
                "format is enabled in its settings.yml)."
            ) from exc


async def _read_capped(response: httpx2.Response, limit: int) -> tuple[bytes, bool]:
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size >= limit:
            return b"".join(chunks)[:limit], True
    return b"".join(chunks), False


def _check_status(response: httpx2.Response, url: str, *, service: str | None = None) -> None:
    status = response.status_code
    if status < 400:
        return
    what = f"{service} at {url}" if service else url
    reason = response.reason_phrase or "error"
    if status in (401, 403):
        advice = (
            "Check the API key in the web settings."
            if service
            else "The page needs a login or refuses automated readers; try another source."
        )
    elif status == 404:
        advice = (
            "Check the service URL in the web settings."
            if service
            else "The page does not exist; check the URL for typos, or search for its new address "
            "with web_search."
        )
    elif status == 429:
        advice = "Too many requests: wait a minute before trying again, or use another source."
    elif status >= 500:
        advice = "The server failed; try again in a minute, or use another source."
    else:
        advice = "Check the URL and its query."
    raise ToolError(f"{what} answered HTTP {status} ({reason}). {advice}")


def _not_html(url: str, media_type: str) -> str:
    shown = media_type or "no content type"
    if media_type == "application/pdf":
        advice = "Download it and read it with read_document instead."
    else:
        advice = "These tools read web pages only; use a tool made for that kind of file."
    return f"{url} is {shown}, not an HTML page, so no text can be extracted from it. {advice}"


def _transport_error(
    url: str,
    settings: WebSettings,
    exc: httpx2.HTTPError | httpx2.InvalidURL,
    *,
    service: str | None = None,
) -> ToolError:
    what = f"{service} at {url}" if service else url
    if isinstance(exc, httpx2.TimeoutException):
        return ToolError(
            f"{what} did not answer within {settings.timeout_seconds:g} s. Try again later, or "
            "another source."
        )
    if isinstance(exc, httpx2.TooManyRedirects):
        return ToolError(
            f"{what} redirected more than {settings.max_redirects} times (a redirect loop?). "
            "Open the final address directly if you know it, or try another source."
        )
    if isinstance(exc, httpx2.ConnectError):
        return ToolError(
            f"Could not connect to {what}: the host is unknown or not reachable, or refused "
            "the connection. Check the URL for typos, or try another source."
        )
    if isinstance(exc, httpx2.InvalidURL | httpx2.UnsupportedProtocol):
        return ToolError(f"{url!r} is not a URL that can be fetched. Pass a full http(s) URL.")
    return ToolError(
        f"Reading {what} failed ({type(exc).__name__}): the connection broke off. Try again, "
        "or try another source."
    )
