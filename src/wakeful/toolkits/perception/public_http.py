"""`PublicDataSettings` and the one HTTP request every public-data tool makes through it.

Every service is keyless and its base URL is a setting, so a deployment can point a tool at a
mirror and tests point them at a server on 127.0.0.1. Transport failures and HTTP error statuses
become :class:`ToolError` here, worded by :class:`wakeful.tools.http.HttpErrors` with the host
and status named; a tool only maps what is special to its service (Frankfurter's 404 for an
unknown currency, say) before calling :func:`check_status`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx2
from pydantic import BaseModel, ConfigDict, Field

from ...errors import ToolError
from ...tools.http import HttpErrors, http_client, read_capped

if TYPE_CHECKING:
    from ...services import Services

MAX_RESPONSE_BYTES = 5 * 1024 * 1024
"""The most bytes of one answer that are read; a bigger answer is an error, not a cut."""

_MAX_REDIRECTS = 5


class PublicDataSettings(BaseModel):
    """Where get_weather, wikipedia_*, arxiv_search, exchange_rate and stock_quote ask."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    open_meteo_forecast_url: str = "https://api.open-meteo.com/v1/forecast"
    """Open-Meteo's forecast endpoint (no key)."""

    open_meteo_geocoding_url: str = "https://geocoding-api.open-meteo.com/v1/search"
    """Open-Meteo's geocoding endpoint, which turns a city name into coordinates."""

    wikipedia_api_url: str = "https://{language}.wikipedia.org/w/api.php"
    """The MediaWiki Action API; `{language}` is replaced by the call's language code."""

    wikipedia_article_url: str = "https://{language}.wikipedia.org/wiki/{title}"
    """How an article's address is made; `{title}` is the title with '_' for spaces, quoted."""

    wikipedia_language: str = Field(default="en", pattern=r"^[a-z]{2,3}(-[a-z]{2,8})*$")
    """The Wikipedia edition used when a call names none."""

    arxiv_api_url: str = "http://export.arxiv.org/api/query"
    """The arXiv API query endpoint; it answers in Atom XML."""

    exchange_rate_url: str = "https://api.frankfurter.app"
    """Frankfurter's base URL (European Central Bank reference rates, working days only);
    `/latest` or `/YYYY-MM-DD` is added to it."""

    stock_quote_url: str = "https://stooq.com/q/l/"
    """Stooq's quote endpoint, which answers one CSV row per symbol (delayed quotes, no key)."""

    timeout_seconds: float = Field(default=10.0, gt=0, le=120)
    """How long one request may take, connecting and reading together."""

    user_agent: str = "wakeful/0.1 (+https://github.com/wakeful; public data tools)"
    """The User-Agent header of every request (Wikipedia refuses requests without one)."""


async def fetch(
    settings: PublicDataSettings,
    tool: str,
    service: str,
    url: str,
    *,
    params: Mapping[str, str | int | float] | None = None,
    method: str = "GET",
    content: bytes | None = None,
    headers: Mapping[str, str] | None = None,
    auth: tuple[str, str] | None = None,
    services: Services | None = None,
) -> httpx2.Response:
    """One request to `service`, its whole body read; ToolError when no answer came back.

    The status is not checked: the caller maps what its service means by one, then calls
    :func:`check_status`. `services` supplies the transport (see :mod:`wakeful.tools.http`).
    """
    errors = _errors(service, urlsplit(url).netloc or url, settings.timeout_seconds)
    try:
        async with (
            http_client(
                services,
                timeout_seconds=settings.timeout_seconds,
                headers={"User-Agent": settings.user_agent},
                follow_redirects=True,
                max_redirects=_MAX_REDIRECTS,
            ) as client,
            client.stream(
                method, url, params=params, content=content, headers=headers, auth=auth
            ) as response,
        ):
            body, too_long = await read_capped(response, MAX_RESPONSE_BYTES)
    except (httpx2.HTTPError, httpx2.InvalidURL) as exc:
        raise errors.for_exception(exc) from exc
    if too_long:
        raise errors.too_large(
            MAX_RESPONSE_BYTES, f"Ask {tool} for less (a shorter window or fewer results)."
        )
    return httpx2.Response(
        response.status_code,
        headers=response.headers,
        content=body,
        request=response.request,
    )


def check_status(response: httpx2.Response, service: str, hint: str = "") -> None:
    """ToolError for any status but 2xx, naming the status; `hint` says what to do after a 4xx."""
    if 200 <= response.status_code < 300:
        return
    errors = _errors(service, response.request.url.host)
    if hint:  # the caller knows better than the general advice what a refusal means here
        errors = replace(errors, status_advice={401: hint, 403: hint, 404: hint}, refused=hint)
    raise errors.for_status(response)


def _errors(service: str, host: str, timeout_seconds: float = 0.0) -> HttpErrors:
    return HttpErrors(
        target=f"{service} at {host}",
        timeout_seconds=timeout_seconds,
        check="Check the network, or the configured URL if it is not the public service.",
        retry="Try again in a minute; if it keeps failing, the service is down.",
        max_redirects=_MAX_REDIRECTS,
    )


def json_body(response: httpx2.Response, service: str) -> Any:
    """The decoded JSON of an answer; ToolError when it is not JSON."""
    try:
        return response.json()
    except ValueError as exc:
        raise ToolError(
            f"{service} answered with something that is not JSON "
            f"({_excerpt(response.text) or 'an empty body'}). Try again later."
        ) from exc


def _excerpt(text: str, limit: int = 200) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"
