"""Public data tools: weather, Wikipedia, arXiv, exchange rates and stock quotes.

Each asks one keyless public service (see :class:`PublicDataSettings` for which, and how to point
it elsewhere) and turns the answer into a short text for the model plus the same facts as
structured data. Nothing here needs an account or a key.
"""

from __future__ import annotations

import csv
import datetime as dt
import html
import io
import re
import xml.etree.ElementTree as ET
from typing import Annotated, Any
from urllib.parse import quote

from pydantic import Field

from ...errors import ToolError
from ...services import settings_of
from ...tools.spec import Tool, ToolAnnotations, ToolContext, ToolResult, tool
from .cursors import make_cursor, query_digest, read_cursor
from .public_http import PublicDataSettings, check_status, fetch, json_body
from .shown_text import OUTPUT_LIMIT, cut_visibly

_READS_THE_WORLD = ToolAnnotations(read_only=True, idempotent=True, open_world=True)

# WMO weather interpretation codes, as Open-Meteo reports them.
_WEATHER_CODES = {
    0: "clear sky",
    1: "mainly clear",
    2: "partly cloudy",
    3: "overcast",
    45: "fog",
    48: "depositing rime fog",
    51: "light drizzle",
    53: "drizzle",
    55: "dense drizzle",
    56: "light freezing drizzle",
    57: "freezing drizzle",
    61: "light rain",
    63: "rain",
    65: "heavy rain",
    66: "light freezing rain",
    67: "freezing rain",
    71: "light snow",
    73: "snow",
    75: "heavy snow",
    77: "snow grains",
    80: "light rain showers",
    81: "rain showers",
    82: "violent rain showers",
    85: "light snow showers",
    86: "heavy snow showers",
    95: "thunderstorm",
    96: "thunderstorm with light hail",
    99: "thunderstorm with heavy hail",
}
_CURRENT = "temperature_2m,relative_humidity_2m,weather_code,wind_speed_10m"
_DAILY = (
    "weather_code,temperature_2m_max,temperature_2m_min,precipitation_sum,"
    "precipitation_probability_max"
)


# --- get_weather ---------------------------------------------------------------------------------


@tool(
    annotations=_READS_THE_WORLD,
    examples=(
        {"city": "Berlin"},
        {"city": "Paris, France", "days": 7},
        {"latitude": 52.52, "longitude": 13.41, "days": 1},
    ),
)
async def get_weather(
    ctx: ToolContext,
    city: Annotated[
        str | None,
        Field(
            min_length=1,
            max_length=200,
            description="A place name, optionally with its country after a comma; the best "
            "match is used. Give it or latitude and longitude, e.g. 'Lyon, France'.",
        ),
    ] = None,
    latitude: Annotated[
        float | None,
        Field(ge=-90, le=90, description="Latitude in degrees, with longitude, e.g. 52.52."),
    ] = None,
    longitude: Annotated[
        float | None,
        Field(ge=-180, le=180, description="Longitude in degrees, with latitude, e.g. 13.41."),
    ] = None,
    days: Annotated[
        int,
        Field(ge=1, le=16, description="Days of daily forecast, today first (1-16), e.g. 3."),
    ] = 3,
) -> ToolResult:
    """Current weather and a daily forecast for a city or coordinates, from Open-Meteo.

    Use it when the user asks about the weather, temperature, rain or wind somewhere, now or in
    the next days. Give a city name, or latitude and longitude when the place is not a town.

    It does not give past weather, hourly detail or weather warnings, and cannot tell which of
    two towns of the same name is meant unless the country follows the name.

    Result: a header with the place and its time zone, a line of current conditions (°C,
    humidity, wind km/h), then one line per day: date, conditions, min/max °C, precipitation mm
    and its chance. structuredContent: {"place", "latitude", "longitude", "timezone", "current",
    "daily": [{"date", "conditions", "min_c", "max_c", "precipitation_mm",
    "precipitation_chance"}]}.

    Cost: one or two requests, usually under 1 s; about 100 characters per day.
    """
    settings = settings_of(ctx.services, PublicDataSettings)
    if city is not None and (latitude is not None or longitude is not None):
        raise ToolError(
            "get_weather got both city and coordinates. Pass a city, or latitude and "
            "longitude, not both."
        )
    if city is None:
        if latitude is None or longitude is None:
            raise ToolError(
                "get_weather needs a place: pass city (e.g. 'Berlin'), or both latitude and "
                "longitude (e.g. 52.52 and 13.41)."
            )
        place = f"{latitude:.4f}, {longitude:.4f}"
    else:
        place, latitude, longitude = await _geocode(settings, city)
    response = await fetch(
        settings,
        "get_weather",
        "Open-Meteo",
        settings.open_meteo_forecast_url,
        params={
            "latitude": latitude,
            "longitude": longitude,
            "current": _CURRENT,
            "daily": _DAILY,
            "timezone": "auto",
            "forecast_days": days,
        },
    )
    if response.status_code == 400:
        reason = _reason(response)
        raise ToolError(
            f"Open-Meteo refused the forecast request: {reason}. Check the coordinates and days."
        )
    check_status(response, "Open-Meteo")
    data = json_body(response, "Open-Meteo")
    try:
        current = data["current"]
        daily = data["daily"]
        now = {
            "time": current["time"],
            "temperature_c": current["temperature_2m"],
            "humidity_percent": current.get("relative_humidity_2m"),
            "wind_kmh": current.get("wind_speed_10m"),
            "conditions": _conditions(current.get("weather_code")),
        }
        forecast = [
            {
                "date": day,
                "conditions": _conditions(daily["weather_code"][i]),
                "min_c": daily["temperature_2m_min"][i],
                "max_c": daily["temperature_2m_max"][i],
                "precipitation_mm": daily["precipitation_sum"][i],
                "precipitation_chance": daily.get("precipitation_probability_max", [None] * 99)[i],
            }
            for i, day in enumerate(daily["time"])
        ]
    except (KeyError, IndexError, TypeError) as exc:
        raise ToolError(
            f"Open-Meteo's answer lacks the expected field {exc}; its format may have changed. "
            "Try again later."
        ) from exc
    timezone = data.get("timezone", "UTC")
    lines = [
        f"Weather for {place} (time zone {timezone})",
        f"Now ({now['time']}): {now['conditions']}, {now['temperature_c']} °C, humidity "
        f"{now['humidity_percent']}%, wind {now['wind_kmh']} km/h",
    ]
    for day in forecast:
        chance = day["precipitation_chance"]
        lines.append(
            f"{day['date']}: {day['conditions']}, {day['min_c']}–{day['max_c']} °C, "
            f"{day['precipitation_mm']} mm" + (f" ({chance}% chance)" if chance is not None else "")
        )
    structured = {
        "place": place,
        "latitude": latitude,
        "longitude": longitude,
        "timezone": timezone,
        "current": now,
        "daily": forecast,
    }
    return ToolResult("\n".join(lines), structured=structured)


async def _geocode(settings: PublicDataSettings, city: str) -> tuple[str, float, float]:
    name, _, country = (part.strip() for part in city.partition(","))
    response = await fetch(
        settings,
        "get_weather",
        "Open-Meteo geocoding",
        settings.open_meteo_geocoding_url,
        params={"name": name, "count": 10, "language": "en", "format": "json"},
    )
    check_status(response, "Open-Meteo geocoding")
    results = json_body(response, "Open-Meteo geocoding").get("results") or []
    if country:
        wanted = country.casefold()
        results = [
            r
            for r in results
            if wanted
            in (str(r.get("country", "")).casefold(), str(r.get("country_code", "")).casefold())
        ]
    if not results:
        where = f" in {country!r}" if country else ""
        raise ToolError(
            f"No place called {name!r}{where} is known to Open-Meteo's geocoder. Check the "
            "spelling, try the English or local name, or pass latitude and longitude."
        )
    best = results[0]
    parts = [best.get("name", name), best.get("admin1"), best.get("country")]
    label = ", ".join(str(p) for p in parts if p)
    return label, float(best["latitude"]), float(best["longitude"])


def _conditions(code: object) -> str:
    if isinstance(code, int):
        return _WEATHER_CODES.get(code, f"weather code {code}")
    return "unknown conditions"


def _reason(response: Any) -> str:
    try:
        return str(response.json().get("reason", response.text))
    except ValueError:
        return str(response.text)[:200]


# --- Wikipedia -----------------------------------------------------------------------------------

_LANGUAGE = Field(
    pattern=r"^[a-z]{2,3}(-[a-z]{2,8})*$",
    description="The Wikipedia edition by language code; the configured one (normally 'en') "
    "when left out, e.g. 'de'.",
)
_TAG = re.compile(r"<[^>]+>")


@tool(
    annotations=_READS_THE_WORLD,
    examples=(
        {"query": "Ada Lovelace"},
        {"query": "photosynthesis light reactions", "limit": 5},
        {"query": "Berliner Mauer", "language": "de"},
    ),
)
async def wikipedia_search(
    ctx: ToolContext,
    query: Annotated[
        str,
        Field(
            min_length=1, max_length=300, description="Words to search for, e.g. 'Ada Lovelace'."
        ),
    ],
    limit: Annotated[
        int, Field(ge=1, le=50, description="Most results per page (1-50), e.g. 5.")
    ] = 10,
    language: Annotated[str | None, _LANGUAGE] = None,
    cursor: Annotated[
        str | None,
        Field(
            max_length=500,
            description="The next_cursor of the previous result, for the next page of the same "
            "search, e.g. 'eyJxIjoiYTFiMmMzIiwiYXQiOjEwfQ'.",
        ),
    ] = None,
) -> ToolResult:
    """Search Wikipedia articles by words; titles, matching snippets and links, best match first.

    Use it to find which article covers a topic before reading it with wikipedia_page, or to
    check that a person, place or thing has an article.

    It does not return article text (use wikipedia_page) and cannot search other wikis.

    Result: a header "N articles match 'query'; 1–10 shown", then per article its title, URL
    and a snippet with the matched words, then "More: pass cursor='…'" when there are more.
    structuredContent: {"results": [{"title", "snippet", "url"}], "total", "next_cursor"}.

    Cost: one request, usually under 1 s; about 250 characters per result.
    """
    settings = settings_of(ctx.services, PublicDataSettings)
    lang = language or settings.wikipedia_language
    digest = query_digest("wikipedia_search", query=query, language=lang)
    start = 0 if cursor is None else read_cursor(cursor, digest, "wikipedia_search")
    response = await fetch(
        settings,
        "wikipedia_search",
        "Wikipedia",
        settings.wikipedia_api_url.format(language=lang),
        params={
            "action": "query",
            "list": "search",
            "srsearch": query,
            "srlimit": limit,
            "sroffset": start,
            "srprop": "snippet",
            "format": "json",
            "formatversion": 2,
        },
    )
    check_status(response, "Wikipedia", f"Check that {lang!r} is a Wikipedia language code.")
    data = _mediawiki(json_body(response, "Wikipedia"))
    query_part = data.get("query", {})
    found = query_part.get("search", [])
    total = int(query_part.get("searchinfo", {}).get("totalhits", len(found)))
    results = [
        {
            "title": hit["title"],
            "snippet": html.unescape(_TAG.sub("", hit.get("snippet", ""))),
            "url": _article_url(settings, lang, hit["title"]),
        }
        for hit in found
    ]
    next_offset = data.get("continue", {}).get("sroffset")
    next_cursor = make_cursor(digest, int(next_offset)) if next_offset is not None else None
    if not results:
        text = f"No Wikipedia ({lang}) article matches {query!r}."
        if start:
            text = f"No more Wikipedia ({lang}) articles match {query!r} after {start}."
        else:
            text += " Try other or fewer words, or another language."
    else:
        header = (
            f"{total} Wikipedia ({lang}) articles match {query!r}; "
            f"{start + 1}–{start + len(results)} shown"
        )
        blocks = [f"{r['title']} — {r['url']}\n  {r['snippet']}" for r in results]
        text = header + "\n\n" + "\n".join(blocks)
        if next_cursor:
            text += f"\n\nMore: pass cursor={next_cursor!r} for the next results."
    text = cut_visibly(text, "ask for a smaller limit")
    return ToolResult(
        text, structured={"results": results, "total": total, "next_cursor": next_cursor}
    )


_PAGE_LIMIT = OUTPUT_LIMIT - 1_000


@tool(
    annotations=_READS_THE_WORLD,
    examples=(
        {"title": "Ada Lovelace"},
        {"title": "Photosynthesis", "offset": 6000},
        {"title": "Berliner Mauer", "language": "de", "limit": 2000},
    ),
)
async def wikipedia_page(
    ctx: ToolContext,
    title: Annotated[
        str,
        Field(
            min_length=1,
            max_length=300,
            description="The article title as wikipedia_search shows it; redirects are "
            "followed, e.g. 'Ada Lovelace'.",
        ),
    ],
    offset: Annotated[
        int,
        Field(
            ge=0,
            le=10_000_000,
            description="Characters of the article text to skip, to read on, e.g. 6000.",
        ),
    ] = 0,
    limit: Annotated[
        int,
        Field(
            ge=1,
            le=_PAGE_LIMIT,
            description=f"Most characters of text to show (1-{_PAGE_LIMIT}), e.g. 3000.",
        ),
    ] = 6_000,
    language: Annotated[str | None, _LANGUAGE] = None,
) -> ToolResult:
    """Read a Wikipedia article as plain text, a window of characters at a time.

    Use it to read what an article says once you know its title (find it with
    wikipedia_search). Start at offset=0; the result gives the offset of the next window.

    It does not show tables, infoboxes, images or references (the text is the article's prose
    with section headings as "== Heading =="), and cannot read talk or user pages.

    Result: a header "Title (url): characters 1–6000 of 41234 shown", the text, then "More:
    pass offset=6000" when there is more. structuredContent: {"title", "url", "total_chars",
    "offset", "next_offset", "redirected_from"}.

    Cost: one request, usually under 1 s; up to `limit` characters (6,000 by default).
    """
    settings = settings_of(ctx.services, PublicDataSettings)
    lang = language or settings.wikipedia_language
    response = await fetch(
        settings,
        "wikipedia_page",
        "Wikipedia",
        settings.wikipedia_api_url.format(language=lang),
        params={
            "action": "query",
            "prop": "extracts",
            "explaintext": 1,
            "redirects": 1,
            "titles": title,
            "format": "json",
            "formatversion": 2,
        },
    )
    check_status(response, "Wikipedia", f"Check that {lang!r} is a Wikipedia language code.")
    data = _mediawiki(json_body(response, "Wikipedia"))
    pages = data.get("query", {}).get("pages") or [{}]
    page = pages[0]
    if page.get("invalid"):
        raise ToolError(
            f"{title!r} is not a valid Wikipedia title ({page.get('invalidreason', 'invalid')}). "
            "Pass a title as wikipedia_search shows it."
        )
    if page.get("missing") or "extract" not in page:
        raise ToolError(
            f"Wikipedia ({lang}) has no article titled {title!r}. Find the exact title with "
            "wikipedia_search."
        )
    shown_title = str(page.get("title", title))
    redirects = data.get("query", {}).get("redirects") or []
    redirected_from = redirects[0].get("from") if redirects else None
    text = str(page["extract"])
    total = len(text)
    if offset and offset >= total:
        raise ToolError(
            f"offset={offset} is past the end of {shown_title!r}, which has {total:,} "
            f"characters. Pass an offset below {total}."
        )
    window = text[offset : offset + limit]
    end = offset + len(window)
    next_offset = end if end < total else None
    url = _article_url(settings, lang, shown_title)
    header = f"{shown_title} ({url}): characters {offset + 1:,}–{end:,} of {total:,} shown"
    if redirected_from:
        header += f" (redirected from {redirected_from!r})"
    body = header + "\n\n" + window
    if next_offset is not None:
        body += f"\n\nMore: pass offset={next_offset} for the next characters."
    return ToolResult(
        body,
        structured={
            "title": shown_title,
            "url": url,
            "total_chars": total,
            "offset": offset,
            "next_offset": next_offset,
            "redirected_from": redirected_from,
        },
    )


def _mediawiki(data: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise ToolError("Wikipedia answered with JSON that is not an object. Try again later.")
    error = data.get("error")
    if isinstance(error, dict):
        raise ToolError(
            f"Wikipedia refused the request: {error.get('info', error.get('code', 'an error'))}. "
            "Change the arguments and call again."
        )
    return data


def _article_url(settings: PublicDataSettings, language: str, title: str) -> str:
    return settings.wikipedia_article_url.format(
        language=language, title=quote(title.replace(" ", "_"), safe="/:(),'")
    )


# --- arXiv ---------------------------------------------------------------------------------------

_ATOM = "{http://www.w3.org/2005/Atom}"
_OPENSEARCH = "{http://a9.com/-/spec/opensearch/1.1/}"
_FIELD_PREFIX = re.compile(r"\b(?:ti|au|abs|co|jr|cat|rn|id|all):", re.IGNORECASE)
_SUMMARY_CHARS = 600


@tool(
    annotations=_READS_THE_WORLD,
    examples=(
        {"query": "diffusion models protein design"},
        {"query": "au:hinton AND ti:capsule", "max_results": 5},
        {"query": 'cat:cs.LG AND abs:"in-context learning"', "max_results": 20},
    ),
)
async def arxiv_search(
    ctx: ToolContext,
    query: Annotated[
        str,
        Field(
            min_length=1,
            max_length=500,
            description="Words that must all occur anywhere in a paper, or arXiv query syntax "
            "with field prefixes (ti:, au:, abs:, cat:) and AND/OR/ANDNOT, e.g. 'au:lecun AND "
            "ti:convolutional'.",
        ),
    ],
    max_results: Annotated[
        int, Field(ge=1, le=50, description="Most papers per page (1-50), e.g. 10.")
    ] = 10,
    cursor: Annotated[
        str | None,
        Field(
            max_length=500,
            description="The next_cursor of the previous result, for the next page of the same "
            "search, e.g. 'eyJxIjoiYTFiMmMzIiwiYXQiOjEwfQ'.",
        ),
    ] = None,
) -> ToolResult:
    """Search arXiv preprints; id, title, authors, abstract, date and PDF link of each, best first.

    Use it to find research papers on a topic, by an author or in a category (cs.LG, hep-th…),
    and to get a paper's abstract and PDF link.

    It does not read the papers' full text and cannot search journals outside arXiv. Abstracts
    are cut after 600 characters.

    Result: a header "N papers match …; 1–10 shown", then per paper: its arXiv id and title,
    the authors, the publication date, the PDF URL and the abstract. structuredContent:
    {"papers": [{"id", "title", "authors", "summary", "published", "pdf_url"}], "total",
    "next_cursor"}.

    Cost: one request, 1-3 s (arXiv is slow); about 900 characters per paper.
    """
    settings = settings_of(ctx.services, PublicDataSettings)
    digest = query_digest("arxiv_search", query=query)
    start = 0 if cursor is None else read_cursor(cursor, digest, "arxiv_search")
    search = (
        query
        if _FIELD_PREFIX.search(query)
        else " AND ".join(f"all:{word}" for word in query.split())
    )
    response = await fetch(
        settings,
        "arxiv_search",
        "arXiv",
        settings.arxiv_api_url,
        params={"search_query": search, "start": start, "max_results": max_results},
    )
    check_status(response, "arXiv", "Check the query syntax, e.g. 'au:lecun AND ti:convolutional'.")
    try:
        feed = ET.fromstring(response.content)
    except ET.ParseError as exc:
        raise ToolError(
            f"arXiv answered with XML that does not parse ({exc}). Try again later."
        ) from exc
    papers: list[dict[str, Any]] = []
    for entry in feed.findall(f"{_ATOM}entry"):
        entry_id = _text(entry, "id")
        if "/api/errors" in entry_id:
            raise ToolError(
                f"arXiv refused the query {search!r}: {_text(entry, 'summary')}. Fix the query "
                "syntax, e.g. 'au:lecun AND ti:convolutional', or pass plain words."
            )
        summary = " ".join(_text(entry, "summary").split())
        if len(summary) > _SUMMARY_CHARS:
            summary = summary[: _SUMMARY_CHARS - 1] + "…"
        pdf = next(
            (
                link.get("href", "")
                for link in entry.findall(f"{_ATOM}link")
                if link.get("title") == "pdf" or link.get("type") == "application/pdf"
            ),
            None,
        )
        papers.append(
            {
                "id": entry_id.rsplit("/abs/", 1)[-1],
                "title": " ".join(_text(entry, "title").split()),
                "authors": [_text(author, "name") for author in entry.findall(f"{_ATOM}author")],
                "summary": summary,
                "published": _text(entry, "published"),
                "pdf_url": pdf,
            }
        )
    total_text = feed.findtext(f"{_OPENSEARCH}totalResults")
    total = int(total_text) if total_text and total_text.isdigit() else start + len(papers)
    end = start + len(papers)
    next_cursor = make_cursor(digest, end) if papers and end < total else None
    if not papers:
        text = f"No arXiv papers match {search!r}" + (
            f" after the first {start}." if start else ". Try other or fewer words."
        )
    else:
        blocks = []
        for p in papers:
            authors = ", ".join(p["authors"][:6]) + (" et al." if len(p["authors"]) > 6 else "")
            blocks.append(
                f"[{p['id']}] {p['title']}\n  {authors}; published {p['published'][:10]}\n"
                f"  PDF: {p['pdf_url']}\n  {p['summary']}"
            )
        text = f"{total} arXiv papers match {search!r}; {start + 1}–{end} shown\n\n"
        text += "\n\n".join(blocks)
        if next_cursor:
            text += f"\n\nMore: pass cursor={next_cursor!r} for the next papers."
    text = cut_visibly(text, "ask for fewer max_results")
    return ToolResult(
        text, structured={"papers": papers, "total": total, "next_cursor": next_cursor}
    )


def _text(element: ET.Element, name: str) -> str:
    return (element.findtext(f"{_ATOM}{name}") or "").strip()


# --- exchange_rate -------------------------------------------------------------------------------

_CURRENCY = r"^[A-Za-z]{3}$"
_FIRST_RATE_DATE = dt.date(1999, 1, 4)


@tool(
    annotations=_READS_THE_WORLD,
    examples=(
        {"base": "EUR", "symbols": ["USD", "GBP"]},
        {"base": "USD"},
        {"base": "CHF", "symbols": ["JPY"], "date": "2020-03-02"},
    ),
)
async def exchange_rate(
    ctx: ToolContext,
    base: Annotated[
        str,
        Field(pattern=_CURRENCY, description="The ISO 4217 code to convert from, e.g. 'EUR'."),
    ],
    symbols: Annotated[
        list[Annotated[str, Field(pattern=_CURRENCY)]] | None,
        Field(
            min_length=1,
            max_length=40,
            description="ISO 4217 codes to convert to; all available ones when left out, "
            "e.g. ['USD', 'JPY'].",
        ),
    ] = None,
    date: Annotated[
        dt.date | None,
        Field(
            description="The day of the rates (YYYY-MM-DD, 1999-01-04 or later); the latest "
            "when left out. A weekend or holiday gives the working day before, e.g. "
            "'2024-05-17'.",
        ),
    ] = None,
) -> ToolResult:
    """Currency exchange rates: what one unit of `base` is worth in other currencies.

    Use it to convert amounts between currencies or to answer what a currency was worth on a
    past day. Multiply an amount by the rate to convert it.

    It does not cover cryptocurrencies or intraday rates: the rates are the European Central
    Bank's reference rates (about 30 currencies), set once per working day, via Frankfurter.

    Result: a header "1 EUR on 2024-05-17 (ECB reference rates)", then one line per currency:
    code and rate. structuredContent: {"base", "date", "rates": {"USD": 1.0866, …}}.

    Cost: one request, usually under 1 s; about 20 characters per currency.
    """
    settings = settings_of(ctx.services, PublicDataSettings)
    base = base.upper()
    wanted = sorted({s.upper() for s in symbols}) if symbols else None
    if date is not None:
        if date < _FIRST_RATE_DATE:
            raise ToolError(
                f"There are no reference rates for {date.isoformat()}: they start on "
                f"{_FIRST_RATE_DATE.isoformat()}. Pass that day or a later one."
            )
        if date > dt.date.today() + dt.timedelta(days=1):
            raise ToolError(
                f"{date.isoformat()} is in the future; there are no rates for it yet. Leave "
                "date out for the latest rates."
            )
    params: dict[str, str] = {"from": base}
    if wanted:
        params["to"] = ",".join(c for c in wanted if c != base) or base
    path = date.isoformat() if date is not None else "latest"
    response = await fetch(
        settings,
        "exchange_rate",
        "Frankfurter",
        f"{settings.exchange_rate_url.rstrip('/')}/{path}",
        params=params,
    )
    if response.status_code in (404, 422):
        codes = ", ".join([base, *(wanted or [])])
        raise ToolError(
            f"Frankfurter does not know one of the currency codes {codes} (HTTP "
            f"{response.status_code}). It has about 30 currencies, e.g. EUR, USD, GBP, JPY, "
            "CHF, CNY; call exchange_rate with only base to list them."
        )
    check_status(response, "Frankfurter")
    data = json_body(response, "Frankfurter")
    rates = dict(data.get("rates") or {}) if isinstance(data, dict) else {}
    if wanted and base in wanted:
        rates[base] = 1.0
    missing = [c for c in (wanted or []) if c not in rates]
    if missing:
        raise ToolError(
            f"Frankfurter has no rate for {', '.join(missing)}: not a currency it knows. Call "
            "exchange_rate with only base to list the codes it has."
        )
    day = str(data.get("date", path))
    lines = [f"1 {base} on {day} (ECB reference rates, via Frankfurter)"]
    lines += [f"{code}\t{rate}" for code, rate in sorted(rates.items())]
    return ToolResult("\n".join(lines), structured={"base": base, "date": day, "rates": rates})


# --- stock_quote ---------------------------------------------------------------------------------


@tool(
    annotations=_READS_THE_WORLD,
    examples=({"symbol": "AAPL"}, {"symbol": "sap.de"}, {"symbol": "^spx"}),
)
async def stock_quote(
    ctx: ToolContext,
    symbol: Annotated[
        str,
        Field(
            pattern=r"^\^?[A-Za-z0-9][A-Za-z0-9._-]{0,19}$",
            description="A ticker; a bare one is a US stock, other markets take Stooq's "
            "suffix (.de, .uk, .jp) and indices start with ^, e.g. 'MSFT'.",
        ),
    ],
) -> ToolResult:
    """The latest quote of a stock, ETF or index: open, high, low, close and volume, from Stooq.

    Use it when the user asks what a share or index is trading at, or how it moved today.

    It does not give real-time prices (quotes are delayed 15 minutes or more), history, or
    fundamentals, and cannot search for a company's ticker by its name.

    Result: a line "AAPL.US on 2024-05-17 22:00:09: close 189.87 (open 189.51, high 190.81,
    low 189.18), volume 41,282,925". structuredContent: {"symbol", "date", "time", "open",
    "high", "low", "close", "volume"}.

    Cost: one request, usually under 1 s; about 120 characters.
    """
    settings = settings_of(ctx.services, PublicDataSettings)
    asked = symbol.lower() if "." in symbol or symbol.startswith("^") else f"{symbol.lower()}.us"
    response = await fetch(
        settings,
        "stock_quote",
        "Stooq",
        settings.stock_quote_url,
        params={"s": asked, "f": "sd2t2ohlcv", "h": "", "e": "csv"},
    )
    check_status(response, "Stooq")
    rows = list(csv.DictReader(io.StringIO(response.text)))
    if not rows or "Close" not in rows[0]:
        raise ToolError(
            f"Stooq answered with something that is not a quote table "
            f"({response.text[:120]!r}). Try again later."
        )
    row = rows[0]
    if row.get("Close") in (None, "", "N/D"):
        raise ToolError(
            f"Stooq knows no symbol {asked!r}. Check the ticker; for markets outside the US add "
            "Stooq's suffix (e.g. 'sap.de', 'vod.uk'), and start indices with ^ (e.g. '^spx')."
        )
    quote_data: dict[str, Any] = {
        "symbol": row.get("Symbol", asked.upper()),
        "date": row.get("Date"),
        "time": row.get("Time"),
    }
    for key in ("Open", "High", "Low", "Close"):
        quote_data[key.lower()] = _number(row.get(key))
    volume = _number(row.get("Volume"))
    quote_data["volume"] = int(volume) if volume is not None else None
    shown_volume = f"{quote_data['volume']:,}" if quote_data["volume"] is not None else "unknown"
    text = (
        f"{quote_data['symbol']} on {quote_data['date']} {quote_data['time']}: close "
        f"{quote_data['close']} (open {quote_data['open']}, high {quote_data['high']}, low "
        f"{quote_data['low']}), volume {shown_volume}. Delayed quote from Stooq."
    )
    return ToolResult(text, structured=quote_data)


def _number(value: str | None) -> float | None:
    try:
        return float(value) if value not in (None, "", "N/D") else None
    except ValueError:
        return None


PUBLIC_DATA_TOOLS: tuple[Tool, ...] = (
    get_weather,
    wikipedia_search,
    wikipedia_page,
    arxiv_search,
    exchange_rate,
    stock_quote,
)
"""Weather, Wikipedia, arXiv, exchange rates and stock quotes from keyless public services."""

__all__ = [
    "PUBLIC_DATA_TOOLS",
    "PublicDataSettings",
    "arxiv_search",
    "exchange_rate",
    "get_weather",
    "stock_quote",
    "wikipedia_page",
    "wikipedia_search",
]
