"""The web tools: `web_search`, `fetch_url` and `get_page_metadata`.

They read the web and change nothing. Search goes to the backend in :class:`WebSettings`
(DuckDuckGo through `ddgs` by default, or SearXNG, or Brave); pages are fetched over HTTP with
the limits of those settings and read as the text trafilatura extracts from them.
"""

from __future__ import annotations

from typing import Annotated

import anyio
from pydantic import Field

from ...errors import ToolError
from ...services import settings_of
from ...tools.spec import Tool, ToolAnnotations, ToolContext, ToolResult, tool
from .cursors import make_cursor, query_digest, read_cursor
from .shown_text import OUTPUT_LIMIT, cut_visibly
from .web_extract import page_metadata, readable_markdown
from .web_http import FetchedPage, checked_url, fetch_page
from .web_search_backends import MAX_PAGES, PAGE_SIZE, SearchHit, search
from .web_settings import WebSettings

DEFAULT_LIMIT = 7_500
MAX_LIMIT = 7_500
"""Characters of page text in one fetch_url result; the header and notes fit in the rest."""
_SNIPPET_CHARS = 400
_BACKEND_NAMES = {
    "ddgs": "DuckDuckGo via ddgs",
    "searxng": "SearXNG",
    "brave": "Brave Search",
}

_URL = Field(
    min_length=1,
    max_length=2000,
    description="The page's full http or https URL, e.g. 'https://docs.python.org/3/library/"
    "asyncio.html'.",
)


@tool(
    annotations=ToolAnnotations(read_only=True, idempotent=False, open_world=True),
    examples=(
        {"query": "anyio memory object streams"},
        {"query": "python 3.13 release notes", "cursor": "eyJxIjoiYTFiMmMzZDRlNWY2IiwiYXQiOjF9"},
    ),
)
async def web_search(
    ctx: ToolContext,
    query: Annotated[
        str,
        Field(
            min_length=1,
            max_length=500,
            description="What to search for, as words you would type into a search engine, "
            "e.g. 'httpx timeout configuration'.",
        ),
    ],
    cursor: Annotated[
        str | None,
        Field(
            max_length=500,
            description="The next_cursor of the previous result, for the next page of the "
            "same query, e.g. 'eyJxIjoiYTFiMmMzZDRlNWY2IiwiYXQiOjF9'.",
        ),
    ] = None,
) -> ToolResult:
    """Search the web and list matching pages: title, URL and a short snippet each.

    Use it to find pages about something before reading one with fetch_url, or to find the
    current address of a page. About 10 results come per page; pass the cursor a result gives
    for the next page (up to 10 pages).

    It does not open the pages (use fetch_url) and cannot search inside one site's private
    content. Results come from the search backend the user configured (DuckDuckGo by default)
    and can differ between calls.

    Result: a header such as "web_search 'httpx timeout' (DuckDuckGo via ddgs), page 1: 10
    results", then one numbered entry per result: title, URL and snippet on three lines; then,
    when there are more, "More: pass cursor='…'". structuredContent: {"results": [{"title",
    "url", "snippet"}], "total" (when the backend says, else null), "next_cursor", "page"}.

    Cost: usually 1-3 s (a network request); about 2,000-4,000 characters per page.
    """
    settings = settings_of(ctx.services, WebSettings)
    words = " ".join(query.split())
    if not words:
        raise ToolError("The query is blank. Pass the words to search for, e.g. 'httpx timeout'.")
    digest = query_digest("web_search", query=words, backend=settings.search_backend)
    page = 0 if cursor is None else read_cursor(cursor, digest, "web_search")
    if page >= MAX_PAGES:
        raise ToolError(
            f"The cursor points to page {page + 1}, past the last page ({MAX_PAGES}) web_search "
            "follows. Refine the query instead, or leave cursor out to start again."
        )
    found = await search(settings, words, page, ctx.services)
    next_cursor = make_cursor(digest, page + 1) if found.more and found.hits else None

    backend = _BACKEND_NAMES[settings.search_backend]
    header = f"web_search {words!r} ({backend}), page {page + 1}: "
    if not found.hits:
        header += "no results."
        advice = (
            "Try fewer or other words."
            if page == 0
            else "There are no more results for this query; refine it for others."
        )
        text = f"{header} {advice}"
    else:
        header += f"{len(found.hits)} result{'' if len(found.hits) == 1 else 's'}"
        if found.total is not None:
            header += f" (about {found.total:,} in all)"
        entries = [_entry(page * PAGE_SIZE + i + 1, hit) for i, hit in enumerate(found.hits)]
        text = header + "\n\n" + "\n\n".join(entries)
        if next_cursor is not None:
            text += f"\n\nMore: pass cursor={next_cursor!r} for the next results."
        text = cut_visibly(text, "ask for fewer results by refining the query", OUTPUT_LIMIT)
    structured = {
        "query": words,
        "backend": settings.search_backend,
        "page": page + 1,
        "results": [{"title": h.title, "url": h.url, "snippet": h.snippet} for h in found.hits],
        "total": found.total,
        "next_cursor": next_cursor,
    }
    return ToolResult(text, structured=structured)


@tool(
    annotations=ToolAnnotations(read_only=True, idempotent=True, open_world=True),
    examples=(
        {"url": "https://docs.python.org/3/library/asyncio-task.html"},
        {"url": "https://en.wikipedia.org/wiki/HTTP", "offset": 7500},
        {"url": "https://example.com/", "limit": 2000},
    ),
)
async def fetch_url(
    ctx: ToolContext,
    url: Annotated[str, _URL],
    offset: Annotated[
        int,
        Field(
            ge=0,
            le=1_000_000_000,
            description="Characters of the extracted text to skip; the result says the offset "
            "of the next part, e.g. 7500.",
        ),
    ] = 0,
    limit: Annotated[
        int,
        Field(
            ge=1,
            le=MAX_LIMIT,
            description=f"Most characters of text to show (1-{MAX_LIMIT:,}), e.g. 2000.",
        ),
    ] = DEFAULT_LIMIT,
) -> ToolResult:
    """Fetch a web page and show its readable text as Markdown, a window of characters a call.

    Use it to read a page that web_search found or the user named. The text is extracted from
    the HTML by trafilatura: the main content (headings, paragraphs, lists, tables) without
    menus, ads and boilerplate, so it is not the raw HTML and links are dropped. Start at
    offset=0; the result gives the offset for the next part.

    It does not run JavaScript (a page built by scripts may come back empty), cannot log in,
    and does not read non-HTML content: a PDF or image is an error that names its type. Pages
    over the size limit (10 MB by default) are cut there, and the result says so.

    Result: a header such as "https://example.com/a: characters 0–7,500 of 54,321 shown
    (extracted text as Markdown)", the title, the text, then "More: pass offset=7500" while
    text remains. structuredContent: {"url", "final_url", "title", "offset", "end",
    "total_chars", "next_offset", "cut_at_max_bytes"}.

    Cost: one download, usually 0.5-3 s, plus up to 1 s to extract a big page; at most about
    8,000 characters per call. Each call downloads the page again.
    """
    page = await _fetch(ctx, url)
    html = page.text()
    text, metadata = await anyio.to_thread.run_sync(_text_and_title, html, page.url)
    total = len(text)
    if offset > total or (offset == total and total > 0):
        raise ToolError(
            f"offset={offset} is past the end of the text of {page.url}, which has {total:,} "
            f"characters. Pass an offset below {total}, or 0 to start from the beginning."
        )
    end = min(total, offset + limit)
    next_offset = end if end < total else None
    header = f"{page.url}: characters {offset:,}–{end:,} of {total:,} shown (extracted text as "
    header += "Markdown)"
    lines = [header]
    if page.redirected:
        lines.append(f"(redirected from {url.strip()})")
    if metadata:
        lines.append(f"Title: {metadata[:300]}")
    notes: list[str] = []
    if total == 0:
        notes.append(
            "No readable text was found: the page may be built by JavaScript, be a login or "
            "consent page, or hold only media. Use get_page_metadata for its title and "
            "description, or try another source."
        )
    if next_offset is not None:
        notes.append(f"More: pass offset={next_offset} for the next characters.")
    if page.cut_at_max_bytes:
        notes.append(_cut_note(len(page.body)))
    body = text[offset:end]
    result = "\n".join(lines) + ("\n\n" + body if body else "")
    if notes:
        result += "\n\n" + "\n".join(notes)
    structured = {
        "url": url.strip(),
        "final_url": page.url,
        "title": metadata,
        "offset": offset,
        "end": end,
        "total_chars": total,
        "next_offset": next_offset,
        "cut_at_max_bytes": page.cut_at_max_bytes,
    }
    return ToolResult(result, structured=structured)


@tool(
    annotations=ToolAnnotations(read_only=True, idempotent=True, open_world=True),
    examples=({"url": "https://docs.python.org/3/library/asyncio.html"},),
)
async def get_page_metadata(ctx: ToolContext, url: Annotated[str, _URL]) -> ToolResult:
    """Show a web page's title, description, language and length, without its text.

    Use it to check what a page is and how long it is before reading it with fetch_url, or to
    tell several search results apart cheaply in tokens.

    It does not return the page's text (use fetch_url) and does not read non-HTML content. The
    language is the one the page declares (<html lang> or Content-Language); a page that
    declares none has none.

    Result: lines "Title: …", "Description: …", "Language: en" and "Length: 120,000 bytes of
    HTML; 14,200 characters of extracted text (2 fetch_url calls)"; a missing value is shown as
    "(none)". structuredContent: {"url", "final_url", "title", "description", "language",
    "html_bytes", "text_chars", "cut_at_max_bytes"}.

    Cost: one download, usually 0.5-3 s, plus up to 1 s to extract a big page; about 300
    characters.
    """
    page = await _fetch(ctx, url)
    html = page.text()
    text = await anyio.to_thread.run_sync(readable_markdown, html, page.url)
    meta = await anyio.to_thread.run_sync(page_metadata, html, page.url, page.content_language)
    calls = max(1, -(-len(text) // MAX_LIMIT))
    lines = [
        f"{page.url}: page metadata",
        f"Title: {meta.title or '(none)'}",
        f"Description: {meta.description or '(none)'}",
        f"Language: {meta.language or '(none declared)'}",
        f"Length: {len(page.body):,} bytes of HTML; {len(text):,} characters of extracted text "
        f"({calls} fetch_url call{'' if calls == 1 else 's'})",
    ]
    if page.cut_at_max_bytes:
        lines.append(_cut_note(len(page.body)))
    structured = {
        "url": url.strip(),
        "final_url": page.url,
        "title": meta.title,
        "description": meta.description,
        "language": meta.language,
        "html_bytes": len(page.body),
        "text_chars": len(text),
        "cut_at_max_bytes": page.cut_at_max_bytes,
    }
    return ToolResult(
        cut_visibly("\n".join(lines), "use fetch_url for the text"), structured=structured
    )


WEB_TOOLS: tuple[Tool, ...] = (web_search, fetch_url, get_page_metadata)
"""web_search, fetch_url and get_page_metadata: read the web, change nothing."""


async def _fetch(ctx: ToolContext, url: str) -> FetchedPage:
    settings = settings_of(ctx.services, WebSettings)
    return await fetch_page(checked_url(url), settings, services=ctx.services)


def _text_and_title(html: str, url: str) -> tuple[str, str | None]:
    return readable_markdown(html, url), page_metadata(html, url, None).title


def _entry(number: int, hit: SearchHit) -> str:
    snippet = hit.snippet
    if len(snippet) > _SNIPPET_CHARS:
        snippet = snippet[: _SNIPPET_CHARS - 1] + "…"
    return f"{number}. {hit.title or '(no title)'}\n   {hit.url}\n   {snippet or '(no snippet)'}"


def _cut_note(size: int) -> str:
    return (
        f"Note: the page is longer than the {size:,}-byte download limit; only its first "
        f"{size:,} bytes were read, so the text may end early."
    )


__all__ = ["WEB_TOOLS", "WebSettings", "fetch_url", "get_page_metadata", "web_search"]
