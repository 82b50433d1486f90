"""wikipedia_search and wikipedia_page: find Wikipedia articles and read their text."""

from __future__ import annotations

import html
import re
from typing import Annotated, Any
from urllib.parse import quote

from pydantic import Field

from ...errors import ToolError
from ...services import settings_of
from ...tools.spec import ToolAnnotations, ToolContext, ToolResult, tool
from .cursors import make_cursor, query_digest, read_cursor
from .public_http import PublicDataSettings, check_status, fetch, json_body
from .shown_text import OUTPUT_LIMIT, cut_visibly

_READS_THE_WORLD = ToolAnnotations(read_only=True, idempotent=True, open_world=True)

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
        services=ctx.services,
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
        services=ctx.services,
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
