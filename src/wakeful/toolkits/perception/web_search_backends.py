"""Search backends for web_search: one small interface, three services behind it.

Each backend takes a query and a 0-based page number and returns a :class:`SearchPage` of
`{title, url, snippet}` hits. SearXNG and Brave are JSON APIs reached through :mod:`.web_http`;
DuckDuckGo is reached through the `ddgs` library, which is blocking, so it runs in a worker
thread. Each backend's answer is mapped by a pure function, so the mapping is testable offline.
"""

from __future__ import annotations

import html
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
from ddgs import DDGS
from ddgs.exceptions import DDGSException, RatelimitException, TimeoutException
from pydantic import BaseModel, ConfigDict, ValidationError

from ...errors import ToolError
from .web_http import get_json
from .web_settings import WebSettings

if TYPE_CHECKING:
    from ...services import Services

PAGE_SIZE = 10
MAX_PAGES = 10
"""Pages one query can be followed to; Brave serves at most 10 (offset 0-9), the others thin out."""

_TAG = re.compile(r"<[^>]+>")
_M = TypeVar("_M", bound=BaseModel)


@dataclass(frozen=True, slots=True)
class SearchHit:
    title: str
    url: str
    snippet: str


@dataclass(frozen=True, slots=True)
class SearchPage:
    """One page of hits; `total` when the service says how many there are, `more` if it has
    (or may have) a next page."""

    hits: list[SearchHit]
    total: int | None
    more: bool


async def search(
    settings: WebSettings, query: str, page: int, services: Services | None = None
) -> SearchPage:
    """Page `page` (0-based) of the hits for `query` from the configured backend; `services`
    supplies the HTTP transport of the JSON backends (see :mod:`wakeful.tools.http`)."""
    if settings.search_backend == "searxng":
        return await _searxng(settings, query, page, services)
    if settings.search_backend == "brave":
        return await _brave(settings, query, page, services)
    return await _ddgs(settings, query, page)


def plain_text(fragment: str) -> str:
    """A snippet with its HTML tags dropped, entities decoded and whitespace collapsed."""
    return " ".join(html.unescape(_TAG.sub("", fragment)).split())


# --- SearXNG -------------------------------------------------------------------------------------


class _Loose(BaseModel):
    model_config = ConfigDict(extra="ignore")


class _SearxngResult(_Loose):
    url: str
    title: str = ""
    content: str | None = None


class _SearxngAnswer(_Loose):
    results: list[_SearxngResult]
    number_of_results: float = 0


def searxng_page(answer: object, page: int) -> SearchPage:
    """The hits of a SearXNG `/search?format=json` answer."""
    parsed = _parse(_SearxngAnswer, answer, "SearXNG")
    hits = [
        SearchHit(plain_text(r.title), r.url, plain_text(r.content or "")) for r in parsed.results
    ]
    total = int(parsed.number_of_results) or None  # SearXNG says 0 when it does not know
    return SearchPage(hits, total, more=bool(hits) and page + 1 < MAX_PAGES)


async def _searxng(
    settings: WebSettings, query: str, page: int, services: Services | None
) -> SearchPage:
    url = settings.searxng_url.rstrip("/") + "/search"
    params: dict[str, str | int] = {"q": query, "format": "json", "pageno": page + 1}
    answer = await get_json(url, settings, params=params, service="SearXNG", services=services)
    return searxng_page(answer, page)


# --- Brave ---------------------------------------------------------------------------------------


class _BraveResult(_Loose):
    url: str
    title: str = ""
    description: str | None = None


class _BraveWeb(_Loose):
    results: list[_BraveResult] = []


class _BraveQuery(_Loose):
    more_results_available: bool = False


class _BraveAnswer(_Loose):
    web: _BraveWeb = _BraveWeb()
    query: _BraveQuery = _BraveQuery()


def brave_page(answer: object, page: int) -> SearchPage:
    """The hits of a Brave `/res/v1/web/search` answer (no `web` part means no hits)."""
    parsed = _parse(_BraveAnswer, answer, "Brave Search")
    hits = [
        SearchHit(plain_text(r.title), r.url, plain_text(r.description or ""))
        for r in parsed.web.results
    ]
    more = parsed.query.more_results_available and page + 1 < MAX_PAGES
    return SearchPage(hits, None, more=more)


async def _brave(
    settings: WebSettings, query: str, page: int, services: Services | None
) -> SearchPage:
    key = os.environ.get(settings.brave_api_key_env, "").strip()
    if not key:
        raise ToolError(
            f"web_search is set to use Brave Search, but the environment variable "
            f"{settings.brave_api_key_env} holds no API key. Ask the user to set it (or to "
            "switch the web settings to another search backend)."
        )
    url = settings.brave_base_url.rstrip("/") + "/res/v1/web/search"
    params: dict[str, str | int] = {"q": query, "count": PAGE_SIZE, "offset": page}
    headers = {"X-Subscription-Token": key}
    answer = await get_json(
        url, settings, params=params, headers=headers, service="Brave Search", services=services
    )
    return brave_page(answer, page)


# --- DuckDuckGo through ddgs ---------------------------------------------------------------------


def ddgs_page(records: Iterable[Mapping[str, Any]], page: int) -> SearchPage:
    """The hits of `DDGS().text(...)` records (`title`, `href`, `body`); those without a URL
    are dropped."""
    hits = [
        SearchHit(plain_text(str(r.get("title") or "")), href, plain_text(str(r.get("body") or "")))
        for r in records
        if isinstance(href := r.get("href"), str) and href
    ]
    return SearchPage(hits, None, more=len(hits) >= PAGE_SIZE and page + 1 < MAX_PAGES)


async def _ddgs(settings: WebSettings, query: str, page: int) -> SearchPage:
    timeout = max(1, round(settings.timeout_seconds))

    def run() -> list[dict[str, Any]]:
        with DDGS(proxy=settings.proxy, timeout=timeout) as client:
            return client.text(query, max_results=PAGE_SIZE, page=page + 1)

    try:
        records = await anyio.to_thread.run_sync(run, abandon_on_cancel=True)
    except RatelimitException as exc:
        raise ToolError(
            "DuckDuckGo refused the search: too many requests. Wait a minute before searching "
            "again, or ask the user to configure SearXNG or Brave in the web settings."
        ) from exc
    except TimeoutException as exc:
        raise ToolError(
            f"The search engines did not answer within {timeout} s. Try again, or try a "
            "shorter query."
        ) from exc
    except DDGSException as exc:
        # ddgs raises its base exception both when every engine failed (it passes the last
        # engine's exception) and when they answered with nothing (it passes a message).
        if exc.args and isinstance(exc.args[0], BaseException):
            raise ToolError(
                "The search engines could not be reached (no internet connection, or all of "
                f"them failed: {type(exc.args[0]).__name__}). Try again later, or ask the user "
                "to configure SearXNG or Brave in the web settings."
            ) from exc
        return SearchPage([], None, more=False)
    return ddgs_page(records, page)


# --- shared --------------------------------------------------------------------------------------


def _parse(model: type[_M], answer: object, service: str) -> _M:
    try:
        return model.model_validate(answer)
    except ValidationError as exc:
        raise ToolError(
            f"{service} answered JSON that is not a search result ({exc.error_count()} "
            "problem(s), e.g. missing 'results' or a hit without 'url'). Check that the web "
            "settings point at the service's search API."
        ) from exc
