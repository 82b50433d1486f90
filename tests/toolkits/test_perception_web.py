"""The web tools against a fake web served on 127.0.0.1 with recorded responses.

Nothing here reaches the internet: pages, SearXNG and Brave are answered by a fake web
in-process (one test serves it on 127.0.0.1), and ddgs (which only talks to the internet) is
tested through its result mapping on a recorded sample and through its failure path with a proxy
on a closed port.
"""

from __future__ import annotations

import base64
import json
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import httpx2
import pytest

from loopback_http import in_process, serving_handler
from tool_services import tool_services
from wakeful.errors import ToolError
from wakeful.services import Services
from wakeful.toolkits.perception.cursors import make_cursor
from wakeful.toolkits.perception.web import (
    MAX_LIMIT,
    WEB_TOOLS,
    WebSettings,
    fetch_url,
    get_page_metadata,
    web_search,
)
from wakeful.toolkits.perception.web_search_backends import ddgs_page, plain_text
from wakeful.tools.http import HttpSettings
from wakeful.tools.lint import lint_tool
from wakeful.tools.spec import Tool, ToolContext, ToolResult

FIXTURES = Path(__file__).parent / "web_fixtures"
BRAVE_KEY = "test-brave-key"


@dataclass
class Site:
    """A fake web: pages, redirects, failures and search APIs, and what it was asked.

    One handler of `httpx2.Request`s: it answers in-process through a mock transport, and on a
    real socket of 127.0.0.1 for the test that covers the network path.
    """

    base: str = ""
    requests: list[tuple[str, dict[str, list[str]], httpx2.Headers]] = field(default_factory=list)

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        query = parse_qs(request.url.query.decode())
        self.requests.append((request.url.path, query, request.headers))
        route = request.url.path
        if route == "/article":
            return page(200, "text/html; charset=utf-8", (FIXTURES / "article.html").read_bytes())
        if route == "/empty":
            return page(200, "text/html", (FIXTURES / "empty.html").read_bytes())
        if route == "/latin1":
            body = "<html><body><article><p>" + "Déjà vu, garçon. " * 20 + "</p></article>"
            return page(200, "text/html; charset=iso-8859-1", body.encode("latin-1"))
        if route in ("/moved", "/loop"):
            to = "/article" if route == "/moved" else "/loop"
            return httpx2.Response(302, headers={"Location": to})
        if route == "/missing":
            return page(404, "text/html", b"<h1>Not Found</h1>")
        if route == "/broken":
            return page(500, "text/html", b"<h1>Internal Server Error</h1>")
        if route == "/paper.pdf":
            return page(200, "application/pdf", b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
        if route == "/data.json":
            return page(200, "application/json", b"{}")
        if route == "/huge":
            paragraph = b"<p>" + b"endless text " * 80 + b"</p>\n"
            return page(200, "text/html", b"<html><body><article>" + paragraph * 500)
        if route == "/search":
            number = int(query.get("pageno", ["1"])[0])
            name = f"searxng_page{min(number, 3)}.json"
            return page(200, "application/json", (FIXTURES / name).read_bytes())
        if route == "/res/v1/web/search":
            if request.headers.get("X-Subscription-Token") != BRAVE_KEY:
                return page(401, "application/json", b'{"error": "unauthorized"}')
            return page(200, "application/json", (FIXTURES / "brave_page.json").read_bytes())
        if route == "/not-an-api/search":
            return page(200, "text/html", b"<html>SearXNG</html>")
        if route == "/odd-api/search":
            return page(200, "application/json", b'{"hits": []}')
        return page(404, "text/plain", b"no such route")


def page(status: int, content_type: str, body: bytes) -> httpx2.Response:
    return httpx2.Response(status, headers={"Content-Type": content_type}, content=body)


@pytest.fixture
def site() -> Site:
    return Site(base="http://web.test")


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
async def services(site: Site) -> AsyncIterator[Services]:
    async with tool_services() as (services, _events):
        services.settings[WebSettings] = WebSettings(timeout_seconds=5, proxy=None)
        services.settings[HttpSettings] = HttpSettings(in_process(site.handle, site.base))
        yield services


@pytest.fixture
async def served(services: Services, site: Site) -> AsyncIterator[Site]:
    """`site` on a real socket of 127.0.0.1, and `services` sending to it there."""
    del services.settings[HttpSettings]
    async with serving_handler(site.handle) as site.base:
        yield site


def use(services: Services, **settings: Any) -> None:
    services.settings[WebSettings] = WebSettings(timeout_seconds=5, **settings)


async def run(services: Services, tool: Tool, **arguments: Any) -> ToolResult:
    return await tool.run(arguments, ToolContext("main", "call_1", tool.name, services))


async def fails(services: Services, tool: Tool, **arguments: Any) -> str:
    with pytest.raises(ToolError) as caught:
        await run(services, tool, **arguments)
    return str(caught.value)


# --- the standard --------------------------------------------------------------------------------


def test_the_tools_meet_the_description_standard() -> None:
    assert [t.name for t in WEB_TOOLS] == ["web_search", "fetch_url", "get_page_metadata"]
    for t in WEB_TOOLS:
        assert lint_tool(t) == [], t.name
        assert t.spec.annotations.read_only


def test_settings_default_to_ddgs_and_forbid_unknown_options() -> None:
    settings = WebSettings()
    assert settings.search_backend == "ddgs"
    assert settings.max_page_bytes == 10 * 1024 * 1024
    with pytest.raises(ValueError):
        WebSettings.model_validate({"search_backend": "google"})
    with pytest.raises(ValueError):
        WebSettings.model_validate({"brave_api_key": "secret"})


# --- fetch_url -----------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_fetch_url_shows_the_extracted_text_a_window_at_a_time(
    services: Services, site: Site
) -> None:
    url = f"{site.base}/article"
    first = await run(services, fetch_url, url=url, limit=2000)
    data = first.structured
    total = data["total_chars"]
    assert total > 4000
    assert first.content.startswith(
        f"{url}: characters 0–2,000 of {total:,} shown (extracted text as Markdown)\n"
    )
    assert "# Memory object streams" in first.content
    assert "Paragraph 1:" in first.content
    assert "cookies" not in first.content and "Privacy" not in first.content  # boilerplate gone
    assert "More: pass offset=2000 for the next characters." in first.content
    assert data["next_offset"] == 2000 and data["cut_at_max_bytes"] is False

    pieces = [first]
    while pieces[-1].structured["next_offset"] is not None:
        offset = pieces[-1].structured["next_offset"]
        pieces.append(await run(services, fetch_url, url=url, offset=offset, limit=2000))
    last = pieces[-1]
    assert last.structured["end"] == total
    assert "More:" not in last.content
    assert "“café” ünïcode" in last.content  # UTF-8 kept as the page has it


@pytest.mark.anyio
async def test_fetch_url_follows_redirects_and_decodes_the_declared_charset(
    services: Services, served: Site
) -> None:
    """Over a real socket, so the whole network path is covered once."""
    moved = await run(services, fetch_url, url=f"{served.base}/moved")
    assert moved.structured["final_url"] == f"{served.base}/article"
    assert f"(redirected from {served.base}/moved)" in moved.content
    latin = await run(services, fetch_url, url=f"{served.base}/latin1")
    assert "Déjà vu, garçon." in latin.content


@pytest.mark.anyio
async def test_fetch_url_says_when_a_page_has_no_readable_text(
    services: Services, site: Site
) -> None:
    result = await run(services, fetch_url, url=f"{site.base}/empty")
    assert result.structured["total_chars"] == 0
    assert "No readable text was found" in result.content
    assert "get_page_metadata" in result.content


@pytest.mark.anyio
async def test_fetch_url_cuts_an_oversize_page_and_says_so(services: Services, site: Site) -> None:
    use(services, max_page_bytes=4096)
    result = await run(services, fetch_url, url=f"{site.base}/huge")
    assert result.structured["cut_at_max_bytes"] is True
    assert "longer than the 4,096-byte download limit" in result.content


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/missing", "answered HTTP 404 Not Found. The page does not exist"),
        ("/broken", "answered HTTP 500 Internal Server Error. The server failed"),
        ("/paper.pdf", "is application/pdf, not an HTML page"),
        ("/data.json", "is application/json, not an HTML page"),
        ("/loop", "redirected more than 5 times"),
    ],
)
async def test_fetch_url_explains_failed_pages(
    services: Services, site: Site, path: str, expected: str
) -> None:
    message = await fails(services, fetch_url, url=site.base + path)
    assert expected in message
    if path == "/paper.pdf":
        assert "read_document" in message


@pytest.mark.anyio
async def test_fetch_url_explains_an_unreachable_host(services: Services) -> None:
    del services.settings[HttpSettings]  # a real connection to a closed port
    message = await fails(services, fetch_url, url=f"http://127.0.0.1:{closed_port()}/")
    assert message.startswith("Could not connect to http://127.0.0.1:")


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("ftp://example.com/file", "has scheme 'ftp'; only http and https"),
        ("file:///etc/passwd", "has scheme 'file'; only http and https"),
        ("example.com/page", "has no scheme"),
        ("http:///nohost", "names no host"),
    ],
)
async def test_fetch_url_refuses_urls_it_cannot_fetch(
    services: Services, url: str, expected: str
) -> None:
    assert expected in await fails(services, fetch_url, url=url)
    assert expected in await fails(services, get_page_metadata, url=url)


@pytest.mark.anyio
async def test_fetch_url_rejects_bad_arguments(services: Services, site: Site) -> None:
    url = f"{site.base}/article"
    assert "past the end of the text" in await fails(services, fetch_url, url=url, offset=10**9)
    assert "`limit`" in await fails(services, fetch_url, url=url, limit=MAX_LIMIT + 1)
    assert "`limit`" in await fails(services, fetch_url, url=url, limit=0)
    assert "`offset`" in await fails(services, fetch_url, url=url, offset=-1)
    assert "`offset`" in await fails(services, fetch_url, url=url, offset="ten")
    assert "`url` is required" in await fails(services, fetch_url)
    assert "`url`" in await fails(services, fetch_url, url=123)
    assert "`url`" in await fails(services, fetch_url, url="http://x/" + "a" * 3000)
    assert "not a parameter" in await fails(services, fetch_url, url=url, headers={})


# --- get_page_metadata ---------------------------------------------------------------------------


@pytest.mark.anyio
async def test_get_page_metadata_gives_title_description_language_and_length(
    services: Services, site: Site
) -> None:
    result = await run(services, get_page_metadata, url=f"{site.base}/article")
    data = result.structured
    assert data["title"] and "Streams" in data["title"]
    assert data["description"] == "How memory object streams pass items between tasks in AnyIO."
    assert data["language"] == "en-GB"
    assert data["html_bytes"] == (FIXTURES / "article.html").stat().st_size
    assert data["text_chars"] > 4000
    assert "Paragraph 1" not in result.content  # no body
    assert f"Length: {data['html_bytes']:,} bytes of HTML" in result.content


@pytest.mark.anyio
async def test_get_page_metadata_reads_a_meta_language_and_reports_missing_values(
    services: Services, site: Site
) -> None:
    result = await run(services, get_page_metadata, url=f"{site.base}/empty")
    assert result.structured["language"] == "de"
    assert result.structured["description"] is None
    assert "Description: (none)" in result.content
    assert "404" in await fails(services, get_page_metadata, url=f"{site.base}/missing")


# --- web_search: SearXNG -------------------------------------------------------------------------


@pytest.mark.anyio
async def test_searxng_search_pages_with_a_cursor(services: Services, site: Site) -> None:
    use(services, search_backend="searxng", searxng_url=site.base + "/")
    first = await run(services, web_search, query="  anyio   streams ")
    data = first.structured
    assert data["total"] == 12300 and data["page"] == 1
    assert data["results"][0] == {
        "title": "Streams & tasks 1",
        "url": "https://example.org/streams/1",
        "snippet": "Memory object streams part 1.",
    }
    assert len(data["results"]) == 10
    assert first.content.startswith(
        "web_search 'anyio streams' (SearXNG), page 1: 10 results (about 12,300 in all)\n\n"
        "1. Streams & tasks 1\n   https://example.org/streams/1\n"
    )
    path, query, headers = site.requests[-1]
    assert path == "/search"
    assert query == {"q": ["anyio streams"], "format": ["json"], "pageno": ["1"]}
    assert headers["User-Agent"].startswith("wakeful/")

    second = await run(services, web_search, query="anyio streams", cursor=data["next_cursor"])
    assert second.structured["page"] == 2 and second.structured["total"] is None
    assert "11. The last hit" in second.content
    third = await run(
        services, web_search, query="anyio streams", cursor=second.structured["next_cursor"]
    )
    assert third.structured["results"] == [] and third.structured["next_cursor"] is None
    assert "no results. There are no more results" in third.content


@pytest.mark.anyio
async def test_search_cursors_are_checked(services: Services, site: Site) -> None:
    use(services, search_backend="searxng", searxng_url=site.base)
    first = await run(services, web_search, query="anyio streams")
    cursor = first.structured["next_cursor"]
    assert "different web_search call" in await fails(
        services, web_search, query="trio", cursor=cursor
    )
    assert "is not a cursor web_search gave" in await fails(
        services, web_search, query="anyio streams", cursor="not-a-cursor!"
    )
    use(services, search_backend="brave", brave_base_url=site.base)
    assert "different web_search call" in await fails(
        services, web_search, query="anyio streams", cursor=cursor
    )
    use(services, search_backend="searxng", searxng_url=site.base)
    padded = cursor + "=" * (-len(cursor) % 4)
    digest = json.loads(base64.urlsafe_b64decode(padded))["q"]
    too_far = make_cursor(digest, 10)
    assert "past the last page" in await fails(
        services, web_search, query="anyio streams", cursor=too_far
    )


@pytest.mark.anyio
async def test_search_rejects_bad_queries(services: Services) -> None:
    assert "blank" in await fails(services, web_search, query="   \n ")
    assert "`query`" in await fails(services, web_search, query="")
    assert "`query` is required" in await fails(services, web_search)
    assert "`query`" in await fails(services, web_search, query=["a", "b"])
    assert "`query`" in await fails(services, web_search, query="x" * 501)
    assert "`cursor`" in await fails(services, web_search, query="x", cursor=7)


@pytest.mark.anyio
async def test_searxng_failures_are_explained(services: Services, site: Site) -> None:
    use(services, search_backend="searxng", searxng_url=f"http://127.0.0.1:{closed_port()}")
    assert "Could not connect to SearXNG" in await fails(services, web_search, query="anyio")
    use(services, search_backend="searxng", searxng_url=site.base + "/not-an-api")
    assert "not JSON" in await fails(services, web_search, query="anyio")
    use(services, search_backend="searxng", searxng_url=site.base + "/odd-api")
    assert "not a search result" in await fails(services, web_search, query="anyio")
    use(services, search_backend="searxng", searxng_url=site.base + "/nowhere")
    message = await fails(services, web_search, query="anyio")
    assert "SearXNG at" in message and "HTTP 404" in message


# --- web_search: Brave ---------------------------------------------------------------------------


@pytest.mark.anyio
async def test_brave_search_sends_the_key_and_maps_results(
    services: Services, site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WAKEFUL_TEST_BRAVE", BRAVE_KEY)
    use(
        services,
        search_backend="brave",
        brave_base_url=site.base,
        brave_api_key_env="WAKEFUL_TEST_BRAVE",
    )
    result = await run(services, web_search, query="anyio streams")
    data = result.structured
    assert data["results"][0] == {
        "title": "AnyIO streams",
        "url": "https://anyio.readthedocs.io/en/stable/streams.html",
        "snippet": "Memory object streams & byte streams.",
    }
    assert data["total"] is None and data["next_cursor"] is not None
    path, query, headers = site.requests[-1]
    assert path == "/res/v1/web/search"
    assert query == {"q": ["anyio streams"], "count": ["10"], "offset": ["0"]}
    assert headers["X-Subscription-Token"] == BRAVE_KEY
    await run(services, web_search, query="anyio streams", cursor=data["next_cursor"])
    assert site.requests[-1][1]["offset"] == ["1"]


@pytest.mark.anyio
async def test_brave_search_without_a_valid_key_is_explained(
    services: Services, site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("WAKEFUL_TEST_BRAVE", raising=False)
    use(
        services,
        search_backend="brave",
        brave_base_url=site.base,
        brave_api_key_env="WAKEFUL_TEST_BRAVE",
    )
    assert "WAKEFUL_TEST_BRAVE holds no API key" in await fails(services, web_search, query="x")
    monkeypatch.setenv("WAKEFUL_TEST_BRAVE", "wrong")
    message = await fails(services, web_search, query="x")
    assert "HTTP 401" in message and "API key" in message


# --- web_search: ddgs ----------------------------------------------------------------------------


def test_ddgs_records_map_to_hits() -> None:
    records = json.loads((FIXTURES / "ddgs_text.json").read_text())
    page = ddgs_page(records, 0)
    assert [h.url for h in page.hits] == [
        "https://anyio.readthedocs.io/en/stable/streams.html",
        "https://stackoverflow.com/questions/1",
    ]
    assert page.hits[1].snippet == "Use a memory object stream & close it when done."
    assert page.total is None and page.more is False  # fewer than a full page
    assert ddgs_page(records * 5, 0).more is True
    assert ddgs_page(records * 5, 9).more is False  # the last page web_search follows


def test_plain_text_drops_tags_and_entities() -> None:
    assert plain_text("A <b>bold</b>\n  &amp; <i>free</i>  text") == "A bold & free text"


@pytest.mark.anyio
async def test_ddgs_failure_without_a_network_is_explained(services: Services) -> None:
    use(services, search_backend="ddgs", proxy=f"http://127.0.0.1:{closed_port()}")
    message = await fails(services, web_search, query="anyio streams")
    assert message.startswith("The search engines could not be reached")
