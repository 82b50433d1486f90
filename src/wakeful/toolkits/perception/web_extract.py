"""What the web tools take from an HTML page: its readable text as Markdown, and its metadata.

Text extraction is trafilatura's: it drops navigation, ads and boilerplate and keeps the main
text, headings, lists and tables, so what a model reads is the article, not the raw HTML. The
language comes from the page's own `<html lang>` (or its Content-Language), not a guess.
"""

from __future__ import annotations

from dataclasses import dataclass
from html.parser import HTMLParser

import trafilatura

# The language is declared near the start of a page; a page is not parsed further for it.
_LANGUAGE_SCAN_CHARS = 200_000


@dataclass(frozen=True, slots=True)
class PageMetadata:
    title: str | None
    description: str | None
    language: str | None


def readable_markdown(html: str, url: str) -> str:
    """The main text of the page as Markdown, as trafilatura extracts it ('' when it finds none)."""
    text = trafilatura.extract(html, url=url, output_format="markdown", include_comments=False)
    return text.strip() if text else ""


def page_metadata(html: str, url: str, content_language: str | None) -> PageMetadata:
    """Title and description as trafilatura finds them (meta, Open Graph, `<title>`), and the
    declared language."""
    found = trafilatura.extract_metadata(html, default_url=url, extensive=False)
    language = _declared_language(html) or _first_language(content_language)
    return PageMetadata(
        title=_clean(found.title) if found else None,
        description=_clean(found.description) if found else None,
        language=language,
    )


def _clean(value: str | None) -> str | None:
    text = " ".join(value.split()) if value else ""
    return text or None


def _first_language(header: str | None) -> str | None:
    """The first tag of a Content-Language header ("de-DE, en" → "de-DE")."""
    if not header:
        return None
    return header.split(",", 1)[0].strip() or None


class _LanguageFinder(HTMLParser):
    """Finds `<html lang=…>` (or `xml:lang`) and `<meta http-equiv="content-language">`."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.html_lang: str | None = None
        self.meta_lang: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name.lower(): value for name, value in attrs if value}
        if tag == "html" and self.html_lang is None:
            self.html_lang = values.get("lang") or values.get("xml:lang")
        elif tag == "meta" and values.get("http-equiv", "").lower() == "content-language":
            self.meta_lang = self.meta_lang or values.get("content")


def _declared_language(html: str) -> str | None:
    finder = _LanguageFinder()
    finder.feed(html[:_LANGUAGE_SCAN_CHARS])
    return _clean(finder.html_lang) or _first_language(finder.meta_lang)
