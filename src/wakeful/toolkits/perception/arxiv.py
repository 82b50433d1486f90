"""arxiv_search: search arXiv preprints through its Atom API."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Annotated, Any

from pydantic import Field

from ...errors import ToolError
from ...services import settings_of
from ...tools.spec import ToolAnnotations, ToolContext, ToolResult, tool
from .cursors import make_cursor, query_digest, read_cursor
from .public_http import PublicDataSettings, check_status, fetch
from .shown_text import cut_visibly

_READS_THE_WORLD = ToolAnnotations(read_only=True, idempotent=True, open_world=True)

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
        services=ctx.services,
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
