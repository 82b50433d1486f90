"""The public data tools against a fake of their services that plays recorded answers.

The fake is one handler of `httpx2.Request`s. It answers in-process through a mock transport; one
test serves it on a real socket of 127.0.0.1 and one asks a closed port, so the network path stays
covered.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import pytest

from loopback_http import in_process, serving_handler
from tool_services import tool_services
from wakeful.errors import ToolError
from wakeful.services import Services
from wakeful.toolkits.perception.public_data import (
    PUBLIC_DATA_TOOLS,
    PublicDataSettings,
    arxiv_search,
    exchange_rate,
    get_weather,
    stock_quote,
    wikipedia_page,
    wikipedia_search,
)
from wakeful.tools.http import HttpSettings
from wakeful.tools.lint import lint_tool
from wakeful.tools.spec import Tool, ToolContext, ToolResult

DATA = Path(__file__).parent / "data_fixtures"

Answer = tuple[int, str, bytes]


@dataclass
class Recorded:
    """A fake service's routes (path → function of the query) and the requests it got."""

    routes: dict[str, Callable[[dict[str, str]], Answer]] = field(default_factory=dict)
    requests: list[tuple[str, dict[str, str], dict[str, str]]] = field(default_factory=list)
    base: str = ""

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        query = dict(request.url.params)
        self.requests.append((request.url.path, query, dict(request.headers)))
        route = self.routes.get(request.url.path)
        status, kind, body = route(query) if route else answer(404, '{"message":"nope"}')
        return httpx2.Response(status, headers={"Content-Type": kind}, content=body)


def fixture(name: str, status: int = 200) -> Answer:
    kind = {"json": "application/json", "xml": "application/atom+xml", "csv": "text/csv"}
    return status, kind[name.rsplit(".", 1)[1]], (DATA / name).read_bytes()


def answer(status: int, body: str, kind: str = "application/json") -> Answer:
    return status, kind, body.encode()


@pytest.fixture
def recorded() -> Recorded:
    return Recorded(base="http://public.test")


def settings_for(base: str) -> PublicDataSettings:
    return PublicDataSettings(
        open_meteo_forecast_url=f"{base}/v1/forecast",
        open_meteo_geocoding_url=f"{base}/v1/search",
        wikipedia_api_url=base + "/{language}/w/api.php",
        wikipedia_article_url="https://{language}.wikipedia.org/wiki/{title}",
        arxiv_api_url=f"{base}/api/query",
        exchange_rate_url=f"{base}/fx",
        stock_quote_url=f"{base}/q/l/",
        timeout_seconds=5,
    )


@pytest.fixture
async def services(recorded: Recorded) -> AsyncIterator[Services]:
    async with tool_services() as (found, _events):
        found.settings[PublicDataSettings] = settings_for(recorded.base)
        found.settings[HttpSettings] = HttpSettings(in_process(recorded.handle, recorded.base))
        yield found


@pytest.fixture
async def served(services: Services, recorded: Recorded) -> AsyncIterator[Recorded]:
    """`recorded` on a real socket of 127.0.0.1, and `services` sending to it there."""
    del services.settings[HttpSettings]
    async with serving_handler(recorded.handle) as recorded.base:
        services.settings[PublicDataSettings] = settings_for(recorded.base)
        yield recorded


async def call(services: Services, tool: Tool, **arguments: Any) -> ToolResult:
    ctx = ToolContext(session="s", call_id="c1", tool_name=tool.name, services=services)
    return await tool.run(arguments, ctx)


async def fails(services: Services, tool: Tool, **arguments: Any) -> str:
    with pytest.raises(ToolError) as caught:
        await call(services, tool, **arguments)
    return str(caught.value)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


# --- the standard --------------------------------------------------------------------------------


def test_every_tool_meets_the_description_standard() -> None:
    assert [t.name for t in PUBLIC_DATA_TOOLS] == [
        "get_weather",
        "wikipedia_search",
        "wikipedia_page",
        "arxiv_search",
        "exchange_rate",
        "stock_quote",
    ]
    for t in PUBLIC_DATA_TOOLS:
        assert lint_tool(t) == [], t.name
        assert t.spec.annotations.read_only and t.spec.annotations.open_world


def test_defaults_point_at_the_real_services() -> None:
    defaults = PublicDataSettings()
    assert defaults.open_meteo_forecast_url == "https://api.open-meteo.com/v1/forecast"
    assert defaults.arxiv_api_url == "http://export.arxiv.org/api/query"
    assert defaults.exchange_rate_url == "https://api.frankfurter.app"


# --- get_weather ---------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_get_weather_geocodes_a_city_then_forecasts(
    services: Services, served: Recorded
) -> None:
    """Over a real socket, so the whole network path is covered once."""
    served.routes["/v1/search"] = lambda q: fixture("open_meteo_geocoding_berlin.json")
    served.routes["/v1/forecast"] = lambda q: fixture("open_meteo_forecast_berlin.json")
    result = await call(services, get_weather, city="Berlin, Germany", days=3)
    assert result.content.startswith("Weather for Berlin, Land Berlin, Germany (time zone ")
    assert "Now (2024-05-17T14:00): partly cloudy, 21.4 °C, humidity 48%" in result.content
    assert "2024-05-18: light rain, 13.4–19.8 °C, 4.2 mm (70% chance)" in result.content
    assert result.structured["daily"][2]["conditions"] == "thunderstorm"
    forecast = served.requests[-1][1]
    assert forecast["latitude"] == "52.52437" and forecast["forecast_days"] == "3"
    assert served.requests[0][1]["name"] == "Berlin"


@pytest.mark.anyio
async def test_get_weather_takes_coordinates_without_geocoding(
    services: Services, recorded: Recorded
) -> None:
    recorded.routes["/v1/forecast"] = lambda q: fixture("open_meteo_forecast_berlin.json")
    result = await call(services, get_weather, latitude=52.52, longitude=13.41, days=1)
    assert result.structured["place"] == "52.5200, 13.4100"
    assert [r[0] for r in recorded.requests] == ["/v1/forecast"]


@pytest.mark.anyio
async def test_get_weather_rejects_unknown_cities_and_bad_places(
    services: Services, recorded: Recorded
) -> None:
    recorded.routes["/v1/search"] = lambda q: answer(200, '{"generationtime_ms": 0.3}')
    assert "No place called 'Atlantis'" in await fails(services, get_weather, city="Atlantis")
    recorded.routes["/v1/search"] = lambda q: fixture("open_meteo_geocoding_berlin.json")
    assert "in 'France'" in await fails(services, get_weather, city="Berlin, France")
    assert "needs a place" in await fails(services, get_weather)
    assert "needs a place" in await fails(services, get_weather, latitude=1.0)
    assert "not both" in await fails(services, get_weather, city="Berlin", latitude=1.0)
    assert "`latitude`" in await fails(services, get_weather, latitude=91, longitude=0)
    assert "`days`" in await fails(services, get_weather, city="Berlin", days=10_000)
    assert "`city`" in await fails(services, get_weather, city=["Berlin"])
    assert "not a parameter" in await fails(services, get_weather, town="Berlin")


@pytest.mark.anyio
async def test_get_weather_reports_service_errors(services: Services, recorded: Recorded) -> None:
    recorded.routes["/v1/forecast"] = lambda q: answer(
        400, '{"error": true, "reason": "Latitude must be in range of -90 to 90°."}'
    )
    message = await fails(services, get_weather, latitude=1.0, longitude=2.0)
    assert "Latitude must be in range" in message
    recorded.routes["/v1/forecast"] = lambda q: answer(500, "boom", "text/plain")
    message = await fails(services, get_weather, latitude=1.0, longitude=2.0)
    assert "HTTP 500" in message and "Try again in a minute" in message
    recorded.routes["/v1/forecast"] = lambda q: answer(200, "<html>not json</html>", "text/html")
    assert "not JSON" in await fails(services, get_weather, latitude=1.0, longitude=2.0)
    recorded.routes["/v1/forecast"] = lambda q: answer(200, '{"current": {}}')
    assert "lacks the expected field" in await fails(
        services, get_weather, latitude=1.0, longitude=2.0
    )


@pytest.mark.anyio
async def test_an_unreachable_host_is_named(services: Services) -> None:
    del services.settings[HttpSettings]  # a real connection to a closed port
    port = closed_port()
    services.settings[PublicDataSettings] = PublicDataSettings(
        open_meteo_forecast_url=f"http://127.0.0.1:{port}/v1/forecast"
    )
    message = await fails(services, get_weather, latitude=1.0, longitude=2.0)
    assert f"Could not connect to Open-Meteo at 127.0.0.1:{port}" in message
    services.settings[PublicDataSettings] = PublicDataSettings(stock_quote_url="ftp://x/")
    assert "No request can be sent to Stooq" in await fails(services, stock_quote, symbol="AAPL")


# --- Wikipedia -----------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_wikipedia_search_pages_with_a_cursor(services: Services, recorded: Recorded) -> None:
    recorded.routes["/en/w/api.php"] = lambda q: fixture("wikipedia_search_lovelace.json")
    first = await call(services, wikipedia_search, query="Ada Lovelace", limit=2)
    assert first.content.startswith("1532 Wikipedia (en) articles match 'Ada Lovelace'; 1–2")
    hit = first.structured["results"][0]
    assert hit["title"] == "Ada Lovelace"
    assert hit["url"] == "https://en.wikipedia.org/wiki/Ada_Lovelace"
    assert "<span" not in hit["snippet"] and "1815 – 27 November" in hit["snippet"]
    assert "& designed" in first.structured["results"][1]["snippet"]
    cursor = first.structured["next_cursor"]
    await call(services, wikipedia_search, query="Ada Lovelace", limit=2, cursor=cursor)
    assert recorded.requests[-1][1]["sroffset"] == "2"
    assert "User-Agent" in recorded.requests[-1][2] or "user-agent" in recorded.requests[-1][2]
    message = await fails(services, wikipedia_search, query="Babbage", cursor=cursor)
    assert "different wikipedia_search call" in message
    assert "not a cursor" in await fails(services, wikipedia_search, query="x", cursor="@@@")


@pytest.mark.anyio
async def test_wikipedia_search_handles_no_hits_and_bad_input(
    services: Services, recorded: Recorded
) -> None:
    recorded.routes["/de/w/api.php"] = lambda q: answer(
        200, '{"query": {"searchinfo": {"totalhits": 0}, "search": []}}'
    )
    result = await call(services, wikipedia_search, query="qwxz", language="de")
    assert result.content.startswith("No Wikipedia (de) article matches 'qwxz'.")
    assert result.structured == {"results": [], "total": 0, "next_cursor": None}
    assert "HTTP 404" in await fails(services, wikipedia_search, query="x", language="xx")
    assert "`language`" in await fails(services, wikipedia_search, query="x", language="../etc")
    assert "`limit`" in await fails(services, wikipedia_search, query="x", limit=10**9)
    assert "`query`" in await fails(services, wikipedia_search, query="")
    assert "`query` is required" in await fails(services, wikipedia_search)
    recorded.routes["/en/w/api.php"] = lambda q: answer(
        200, '{"error": {"code": "badvalue", "info": "Unrecognized value for srwhat."}}'
    )
    assert "Unrecognized value" in await fails(services, wikipedia_search, query="x")


@pytest.mark.anyio
async def test_wikipedia_page_reads_windows_and_follows_redirects(
    services: Services, recorded: Recorded
) -> None:
    recorded.routes["/en/w/api.php"] = lambda q: fixture("wikipedia_page_lovelace.json")
    first = await call(services, wikipedia_page, title="ada lovelace", limit=100)
    assert first.content.startswith(
        "Ada Lovelace (https://en.wikipedia.org/wiki/Ada_Lovelace): characters 1–100 of "
    )
    assert "(redirected from 'Ada lovelace')" in first.content
    assert "More: pass offset=100" in first.content
    total = first.structured["total_chars"]
    rest = await call(services, wikipedia_page, title="ada lovelace", offset=100, limit=9000)
    assert rest.structured["next_offset"] is None
    assert rest.content.rstrip().endswith("gave birth to a girl.")
    assert recorded.requests[-1][1]["titles"] == "ada lovelace"
    assert "past the end" in await fails(services, wikipedia_page, title="x", offset=total + 5)
    assert "`offset`" in await fails(services, wikipedia_page, title="x", offset=-1)
    assert "`limit`" in await fails(services, wikipedia_page, title="x", limit=1_000_000)


@pytest.mark.anyio
async def test_wikipedia_page_names_missing_and_invalid_titles(
    services: Services, recorded: Recorded
) -> None:
    recorded.routes["/en/w/api.php"] = lambda q: answer(
        200, '{"query": {"pages": [{"ns": 0, "title": "Nope Nope", "missing": true}]}}'
    )
    assert "no article titled 'Nope Nope'" in await fails(
        services, wikipedia_page, title="Nope Nope"
    )
    recorded.routes["/en/w/api.php"] = lambda q: answer(
        200,
        '{"query": {"pages": [{"title": "a|b", "invalidreason": "The requested page title '
        'contains invalid characters: \\"|\\".", "invalid": true}]}}',
    )
    assert "not a valid Wikipedia title" in await fails(services, wikipedia_page, title="a|b")
    recorded.routes["/en/w/api.php"] = lambda q: answer(503, "down", "text/plain")
    assert "HTTP 503" in await fails(services, wikipedia_page, title="Ada Lovelace")


# --- arXiv ---------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_arxiv_search_parses_the_atom_feed(services: Services, recorded: Recorded) -> None:
    recorded.routes["/api/query"] = lambda q: fixture("arxiv_search_transformers.xml")
    result = await call(services, arxiv_search, query="attention translation", max_results=2)
    assert recorded.requests[-1][1]["search_query"] == "all:attention AND all:translation"
    papers = result.structured["papers"]
    assert papers[0]["id"] == "1706.03762v7"
    assert papers[0]["title"] == "Attention Is All You Need"
    assert papers[0]["authors"][:2] == ["Ashish Vaswani", "Noam Shazeer"]
    assert papers[0]["pdf_url"] == "http://arxiv.org/pdf/1706.03762v7"
    assert papers[0]["published"] == "2017-06-12T17:57:34Z"
    assert len(papers[0]["summary"]) <= 600 and papers[0]["summary"].endswith("…")
    assert (
        papers[1]["title"]
        == "Neural Machine Translation by Jointly Learning to Align and Translate"
    )
    assert result.content.startswith("5 arXiv papers match")
    cursor = result.structured["next_cursor"]
    await call(services, arxiv_search, query="attention translation", max_results=2, cursor=cursor)
    assert recorded.requests[-1][1]["start"] == "2"
    await call(services, arxiv_search, query="au:bengio AND ti:translation")
    assert recorded.requests[-1][1]["search_query"] == "au:bengio AND ti:translation"
    assert "different arxiv_search call" in await fails(
        services, arxiv_search, query="other", cursor=cursor
    )


@pytest.mark.anyio
async def test_arxiv_search_reports_errors(services: Services, recorded: Recorded) -> None:
    recorded.routes["/api/query"] = lambda q: fixture("arxiv_error.xml", 400)
    assert "HTTP 400" in await fails(services, arxiv_search, query="id:1234")
    recorded.routes["/api/query"] = lambda q: fixture("arxiv_error.xml")
    assert "incorrect id format" in await fails(services, arxiv_search, query="id:1234")
    recorded.routes["/api/query"] = lambda q: answer(200, "<feed", "application/atom+xml")
    assert "does not parse" in await fails(services, arxiv_search, query="x")
    recorded.routes["/api/query"] = lambda q: answer(
        200, '<feed xmlns="http://www.w3.org/2005/Atom"></feed>', "application/atom+xml"
    )
    result = await call(services, arxiv_search, query="nothing here")
    assert result.structured == {"papers": [], "total": 0, "next_cursor": None}
    assert "`max_results`" in await fails(services, arxiv_search, query="x", max_results=0)
    assert "`query`" in await fails(services, arxiv_search, query="x" * 501)


# --- exchange_rate -------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_exchange_rate_latest_and_on_a_date(services: Services, recorded: Recorded) -> None:
    recorded.routes["/fx/latest"] = lambda q: fixture("frankfurter_latest_eur.json")
    recorded.routes["/fx/2024-05-17"] = lambda q: fixture("frankfurter_latest_eur.json")
    result = await call(services, exchange_rate, base="eur", symbols=["usd", "GBP"])
    assert result.structured == {
        "base": "EUR",
        "date": "2024-05-17",
        "rates": {"GBP": 0.85553, "USD": 1.0866},
    }
    assert recorded.requests[-1][1] == {"from": "EUR", "to": "GBP,USD"}
    assert "USD\t1.0866" in result.content
    await call(services, exchange_rate, base="EUR", date="2024-05-17")
    assert recorded.requests[-1][0] == "/fx/2024-05-17"


@pytest.mark.anyio
async def test_exchange_rate_rejects_bad_codes_and_dates(
    services: Services, recorded: Recorded
) -> None:
    recorded.routes["/fx/latest"] = lambda q: answer(404, '{"message": "not found"}')
    assert "does not know one of the currency codes XYZ" in await fails(
        services, exchange_rate, base="XYZ"
    )
    recorded.routes["/fx/latest"] = lambda q: fixture("frankfurter_latest_eur.json")
    assert "no rate for JPY" in await fails(services, exchange_rate, base="EUR", symbols=["JPY"])
    assert "`base`" in await fails(services, exchange_rate, base="EURO")
    assert "`base`" in await fails(services, exchange_rate, base=5)
    assert "`symbols" in await fails(services, exchange_rate, base="EUR", symbols=["US"])
    assert "start on 1999-01-04" in await fails(
        services, exchange_rate, base="EUR", date="1990-01-01"
    )
    assert "in the future" in await fails(services, exchange_rate, base="EUR", date="2999-01-01")
    assert "`date`" in await fails(services, exchange_rate, base="EUR", date="yesterday")
    recorded.routes["/fx/latest"] = lambda q: answer(500, "oops", "text/plain")
    assert "HTTP 500" in await fails(services, exchange_rate, base="EUR")


# --- stock_quote ---------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_stock_quote_reads_the_csv_row(services: Services, recorded: Recorded) -> None:
    recorded.routes["/q/l/"] = lambda q: fixture("stooq_aapl.csv")
    result = await call(services, stock_quote, symbol="AAPL")
    assert recorded.requests[-1][1]["s"] == "aapl.us"
    assert result.structured == {
        "symbol": "AAPL.US",
        "date": "2024-05-17",
        "time": "22:00:09",
        "open": 189.51,
        "high": 190.81,
        "low": 189.18,
        "close": 189.87,
        "volume": 41282925,
    }
    assert "close 189.87" in result.content and "41,282,925" in result.content
    await call(services, stock_quote, symbol="SAP.DE")
    assert recorded.requests[-1][1]["s"] == "sap.de"


@pytest.mark.anyio
async def test_stock_quote_rejects_unknown_symbols(services: Services, recorded: Recorded) -> None:
    recorded.routes["/q/l/"] = lambda q: fixture("stooq_unknown.csv")
    assert "knows no symbol 'nope.us'" in await fails(services, stock_quote, symbol="NOPE")
    recorded.routes["/q/l/"] = lambda q: answer(200, "Exceeded the daily hits limit", "text/plain")
    assert "not a quote table" in await fails(services, stock_quote, symbol="AAPL")
    assert "`symbol`" in await fails(services, stock_quote, symbol="AAPL; DROP")
    assert "`symbol`" in await fails(services, stock_quote, symbol="A" * 100)
    assert "`symbol` is required" in await fails(services, stock_quote)
    recorded.routes.clear()
    assert "HTTP 404" in await fails(services, stock_quote, symbol="AAPL")
