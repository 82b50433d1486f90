"""HTTP for the web tools: one page or one JSON answer, with the errors a model can act on.

Failures are worded by :class:`wakeful.tools.http.HttpErrors` with the web tools' advice: they
name the URL, what went wrong and what to try next. A page body is read as a stream and cut at
`WebSettings.max_page_bytes`, so a huge or endless response costs at most that much.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx2

from ...errors import ToolError
from ...tools.http import HttpErrors, http_client, read_capped
from .web_settings import WebSettings

if TYPE_CHECKING:
    from ...services import Services

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


def _client(settings: WebSettings, services: Services | None) -> httpx2.AsyncClient:
    return http_client(
        services,
        timeout_seconds=settings.timeout_seconds,
        follow_redirects=True,
        max_redirects=settings.max_redirects,
        headers={"User-Agent": settings.user_agent},
        proxy=settings.proxy,
    )


async def fetch_page(
    url: str, settings: WebSettings, *, services: Services | None = None
) -> FetchedPage:
    """GET an HTML page; ToolError when it cannot be reached, fails, or is not HTML.

    `services` supplies the transport (see :mod:`wakeful.tools.http`).
    """
    errors = _errors(url, settings)
    async with _client(settings, services) as client:
        try:
            async with client.stream("GET", url, headers={"Accept": ", ".join(HTML_TYPES)}) as r:
                if r.status_code >= 400:
                    raise errors.for_status(r, said="")  # an error page's HTML helps no one
                content_type = r.headers.get("content-type", "")
                media_type = content_type.split(";", 1)[0].strip().lower()
                if media_type not in HTML_TYPES:
                    raise ToolError(_not_html(url, media_type))
                body, cut = await read_capped(r, settings.max_page_bytes)
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
            raise errors.for_exception(exc) from exc


async def get_json(
    url: str,
    settings: WebSettings,
    *,
    params: Mapping[str, str | int],
    headers: Mapping[str, str] | None = None,
    service: str,
    services: Services | None = None,
) -> Any:
    """GET a JSON answer from a search service; ToolError naming `service` when that fails."""
    errors = _errors(url, settings, service=service)
    async with _client(settings, services) as client:
        try:
            response = await client.get(
                url, params=dict(params), headers={"Accept": "application/json", **(headers or {})}
            )
        except (httpx2.HTTPError, httpx2.InvalidURL) as exc:
            raise errors.for_exception(exc) from exc
        if response.status_code >= 400:
            raise errors.for_status(response)
        try:
            return json.loads(response.content)
        except (ValueError, UnicodeDecodeError) as exc:
            media_type = response.headers.get("content-type", "no content type")
            raise ToolError(
                f"{service} at {url} answered with {media_type}, not JSON. Check that the URL "
                "in the web settings points at the service's API (for SearXNG, that the json "
                "format is enabled in its settings.yml)."
            ) from exc


def _errors(url: str, settings: WebSettings, *, service: str | None = None) -> HttpErrors:
    """How the web tools word a failure: pages and search services need different fixes."""
    if service is None:
        return HttpErrors(
            target=url,
            timeout_seconds=settings.timeout_seconds,
            check="Check the URL for typos, or try another source.",
            retry="Try again later, or try another source.",
            max_redirects=settings.max_redirects,
            status_advice={
                401: "The page needs a login or refuses automated readers; try another source.",
                403: "The page needs a login or refuses automated readers; try another source.",
                404: "The page does not exist; check the URL for typos, or search for its new "
                "address with web_search.",
                429: "Too many requests: wait a minute before trying again, or use another source.",
            },
            refused="Check the URL and its query.",
        )
    return HttpErrors(
        target=f"{service} at {url}",
        timeout_seconds=settings.timeout_seconds,
        check="Check the service's URL in the web settings, and the network.",
        retry="Try again later, or use another search backend.",
        max_redirects=settings.max_redirects,
        status_advice={
            401: "Check the API key in the web settings.",
            403: "Check the API key in the web settings.",
            404: "Check the service URL in the web settings.",
            429: "Too many requests: wait a minute before trying again.",
        },
        refused="Check the URL and its query.",
    )


def _not_html(url: str, media_type: str) -> str:
    shown = media_type or "no content type"
    if media_type == "application/pdf":
        advice = "Download it and read it with read_document instead."
    else:
        advice = "These tools read web pages only; use a tool made for that kind of file."
    return f"{url} is {shown}, not an HTML page, so no text can be extracted from it. {advice}"
