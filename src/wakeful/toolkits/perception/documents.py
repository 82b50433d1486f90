"""`read_document`: the text of a PDF, Word, PowerPoint, Excel, HTML, EPUB or CSV file under the
root, converted to Markdown by markitdown, a window of characters at a time.

Each format goes to its own markitdown converter, chosen by the file's extension or the `format`
argument, never guessed from content: a file that is not what its name says fails with an error
instead of being read as something else. Conversions are remembered (a few, keyed by path, size
and mtime) so paging through a long document converts it once.
"""

from __future__ import annotations

import io
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import anyio
from pydantic import Field

from ...errors import ToolError
from ...safety.beneath import Opened
from ...tools.spec import ToolAnnotations, ToolContext, ToolResult, tool
from .workspace import open_workspace

Format = Literal["pdf", "docx", "pptx", "xlsx", "html", "epub", "csv"]

FORMAT_OF_EXTENSION: dict[str, Format] = {
    ".pdf": "pdf",
    ".docx": "docx",
    ".pptx": "pptx",
    ".xlsx": "xlsx",
    ".html": "html",
    ".htm": "html",
    ".xhtml": "html",
    ".epub": "epub",
    ".csv": "csv",
}
FORMAT_NAMES: dict[Format, str] = {
    "pdf": "PDF",
    "docx": "Word (DOCX)",
    "pptx": "PowerPoint (PPTX)",
    "xlsx": "Excel (XLSX)",
    "html": "HTML",
    "epub": "EPUB",
    "csv": "CSV",
}
BODY_LIMIT = 9_000
"""Characters of document text in one result; the header and notes fit in the rest of 10,000."""
MAX_DOCUMENT_BYTES = 200 * 1024 * 1024
_CACHED_CONVERSIONS = 8
_SLIDE_MARK = re.compile(r"^<!-- Slide number: (\d+) -->$", re.MULTILINE)
_SHEET_HEADING = re.compile(r"^## (.+)$", re.MULTILINE)


@tool(
    annotations=ToolAnnotations(read_only=True, idempotent=True),
    examples=(
        {"path": "docs/report.pdf"},
        {"path": "docs/report.pdf", "pages": "3-5"},
        {"path": "data/budget.xlsx", "sheets": ["Summary"]},
        {"path": "notes/page.html", "offset": 9000},
        {"path": "exports/table.txt", "format": "csv"},
    ),
)
async def read_document(
    ctx: ToolContext,
    path: Annotated[
        str,
        Field(
            min_length=1,
            max_length=4096,
            description="The document, relative to the root (or absolute inside it), "
            "e.g. 'docs/report.pdf'.",
        ),
    ],
    format: Annotated[
        Format | None,
        Field(
            description="The format, when the extension does not say it (pdf, docx, pptx, xlsx, "
            "html, epub or csv); by default it comes from the extension, e.g. 'csv'.",
        ),
    ] = None,
    pages: Annotated[
        str | None,
        Field(
            min_length=1,
            max_length=200,
            description="PDF pages or PPTX slides to read, 1-based: numbers and ranges "
            "separated by commas, e.g. '1-3,7'.",
        ),
    ] = None,
    sheets: Annotated[
        list[Annotated[str, Field(min_length=1, max_length=200)]] | None,
        Field(
            min_length=1,
            max_length=50,
            description="XLSX sheets to read, by name, e.g. ['Summary', 'Q3'].",
        ),
    ] = None,
    offset: Annotated[
        int,
        Field(
            ge=0,
            le=1_000_000_000,
            description="Characters of the converted text to skip, from the previous result's "
            "'pass offset=…', e.g. 9000.",
        ),
    ] = 0,
    limit: Annotated[
        int,
        Field(
            ge=1,
            le=BODY_LIMIT,
            description=f"Most characters of text to show (1-{BODY_LIMIT:,}), e.g. 4000.",
        ),
    ] = BODY_LIMIT,
) -> ToolResult:
    """Show the text of a PDF, DOCX, PPTX, XLSX, HTML, EPUB or CSV file as Markdown.

    Use it to read office documents, web pages saved as files, e-books and spreadsheets under
    the root; for plain text and source code use read_file, which numbers lines. The format
    comes from the extension (.pdf .docx .pptx .xlsx .html .htm .xhtml .epub .csv) or from
    `format`. Long documents come in windows of characters: the result says which characters it
    shows and the offset for the next ones. Select PDF pages or PPTX slides with `pages`, and
    XLSX sheets with `sheets`.

    It cannot read scanned PDFs (images of text give no text), old binary formats (.doc, .xls,
    .ppt), images or audio, and does not read outside the root. Tables become Markdown tables;
    images, charts and layout are dropped. PDF text comes from pdfminer (markitdown's PDF
    backend) as plain text split at page breaks, without Markdown tables. `pages` does not work
    on formats other than PDF and PPTX, nor `sheets` on any but XLSX.

    Result: a header such as "report.pdf (PDF, pages 3–5 of 12): characters 0–9,000 of 23,456
    shown", the Markdown text, then "More: pass offset=9000 for the next characters." when
    there is more. PDF pages are marked "--- page 3 ---". structuredContent: {"path", "format",
    "total_chars", "start", "end", "next_offset", "pages" or "sheets" (what there is)}.

    Cost: 50 ms to a few seconds for the first call on a document (about 1 s per 100 PDF pages),
    a few milliseconds for later windows of the same one; at most 10,000 characters.
    """

    def convert() -> tuple[str, Converted, list[int] | None]:
        with open_workspace(ctx) as root, root.open(path) as found:
            shown_path = found.shown
            suffix = found.relative.suffix
            chosen = format or FORMAT_OF_EXTENSION.get(suffix.lower())
            if chosen is None:
                known = " ".join(sorted(FORMAT_OF_EXTENSION))
                raise ToolError(
                    f"read_document cannot tell the format of {shown_path!r} from its extension "
                    f"{suffix or '(none)'!r}; it reads {known}. Pass format='pdf' (or docx, "
                    "pptx, xlsx, html, epub, csv) if it is one of those, or use read_file for "
                    "plain text."
                )
            if pages is not None and chosen not in ("pdf", "pptx"):
                raise ToolError(
                    f"pages={pages!r} selects PDF pages or PPTX slides, and {shown_path!r} is "
                    f"read as {FORMAT_NAMES[chosen]}. Leave pages out, and page through it with "
                    "offset."
                )
            if sheets is not None and chosen != "xlsx":
                raise ToolError(
                    f"sheets selects XLSX sheets, and {shown_path!r} is read as "
                    f"{FORMAT_NAMES[chosen]}. Leave sheets out, and page through it with offset."
                )
            wanted_pages = None if pages is None else parse_pages(pages)
            key = f"{root.path}/{shown_path}"
            return shown_path, _converted(found, key, chosen), wanted_pages

    shown_path, converted, wanted_pages = await anyio.to_thread.run_sync(convert)
    return _window(converted, shown_path, wanted_pages, sheets, offset, limit)


@dataclass(frozen=True)
class Converted:
    """A document's text, and its parts (pages, slides or sheets) where the format has them."""

    format: Format
    text: str
    parts: tuple[tuple[str, str], ...] = ()  # (label, text) per page, slide or sheet


def parse_pages(pages: str) -> list[int]:
    """'1-3,7' as [1, 2, 3, 7]; ToolError for anything else."""
    chosen: list[int] = []
    for piece in pages.split(","):
        match = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", piece)
        first = int(match.group(1)) if match else 0
        last = int(match.group(2) or first) if match else 0
        if match is None or first < 1 or last < first or last - first > 10_000:
            raise ToolError(
                f"pages={pages!r} is not a list of 1-based page numbers and ranges. Write it "
                "like '3' or '1-3,7'."
            )
        chosen.extend(n for n in range(first, last + 1) if n not in chosen)
    return chosen


# --- conversion (in a worker thread) -------------------------------------------------------------

_cache: OrderedDict[tuple[str, int, int, str], Converted] = OrderedDict()
_cache_lock = threading.Lock()


def _converted(found: Opened, key_path: str, chosen: Format) -> Converted:
    shown_path = found.shown
    info = found.regular_file(
        limit=MAX_DOCUMENT_BYTES,
        not_regular="{shown!r} is not a regular file; read_document reads document files. Use "
        "list_dir to see what a directory holds.",
        too_big="{shown!r} has {size:,} bytes, more than the {limit:,} read_document converts. "
        "Split it, or read a text form of it.",
    )
    key = (key_path, info.st_mtime_ns, info.st_size, chosen)
    with _cache_lock:
        if key in _cache:
            _cache.move_to_end(key)
            return _cache[key]
    if info.st_size == 0:
        converted = Converted(chosen, "")
    else:
        try:
            data = found.read_bytes()
        except OSError as exc:
            raise ToolError(f"{shown_path!r} cannot be read: {exc.strerror or exc}.") from exc
        converted = _convert(data, shown_path, chosen)
    with _cache_lock:
        _cache[key] = converted
        while len(_cache) > _CACHED_CONVERSIONS:
            _cache.popitem(last=False)
    return converted


def _convert(data: bytes, shown_path: str, chosen: Format) -> Converted:
    if chosen == "pdf":
        return Converted(chosen, "", _pdf_pages(data, shown_path))
    text = _markitdown(data, shown_path, chosen)
    if chosen == "pptx":
        return Converted(chosen, text, _split_at(_SLIDE_MARK, text, "slide"))
    if chosen == "xlsx":
        return Converted(chosen, text, _split_at(_SHEET_HEADING, text, None))
    return Converted(chosen, text)


def _markitdown(data: bytes, shown_path: str, chosen: Format) -> str:
    from markitdown import StreamInfo
    from markitdown.converters import (
        CsvConverter,
        DocxConverter,
        EpubConverter,
        HtmlConverter,
        PptxConverter,
        XlsxConverter,
    )

    converters: dict[Format, Any] = {
        "docx": DocxConverter,
        "pptx": PptxConverter,
        "xlsx": XlsxConverter,
        "html": HtmlConverter,
        "epub": EpubConverter,
        "csv": CsvConverter,
    }
    extension = next(e for e, f in FORMAT_OF_EXTENSION.items() if f == chosen)
    info = StreamInfo(extension=extension, charset="utf-8" if chosen == "html" else None)
    try:
        # strict=True: on HTML too deeply nested to convert, fail instead of warning.
        result = converters[chosen]().convert(io.BytesIO(data), info, strict=True)
    except Exception as exc:  # the converters raise whatever their parsers raise
        raise _unreadable(shown_path, chosen, exc) from exc
    text = result.markdown
    assert isinstance(text, str)
    return text


def _pdf_pages(data: bytes, shown_path: str) -> tuple[tuple[str, str], ...]:
    from pdfminer.high_level import extract_text

    try:
        text = extract_text(io.BytesIO(data))
    except Exception as exc:  # pdfminer raises many parser errors
        raise _unreadable(shown_path, "pdf", exc) from exc
    pages = text.split("\f")
    if len(pages) > 1 and not pages[-1].strip():
        pages.pop()  # the form feed after the last page
    return tuple((str(n), page.strip()) for n, page in enumerate(pages, 1))


def _unreadable(shown_path: str, chosen: Format, exc: Exception) -> ToolError:
    reason = f"{type(exc).__name__}: {exc}".strip().splitlines()[0][:300]
    return ToolError(
        f"{shown_path!r} could not be read as {FORMAT_NAMES[chosen]} ({reason}). It may be "
        "damaged or another format under this name: pass the right format=…, or look at it "
        "with read_file."
    )


def _split_at(mark: re.Pattern[str], text: str, label: str | None) -> tuple[tuple[str, str], ...]:
    """The parts of `text` that start at each match of `mark`, labelled by its group."""
    starts = list(mark.finditer(text))
    parts = []
    for i, match in enumerate(starts):
        end = starts[i + 1].start() if i + 1 < len(starts) else len(text)
        parts.append((match.group(1).strip(), text[match.start() : end].strip()))
    return tuple(parts)


# --- the window ----------------------------------------------------------------------------------


def _window(
    converted: Converted,
    shown_path: str,
    pages: list[int] | None,
    sheets: list[str] | None,
    offset: int,
    limit: int,
) -> ToolResult:
    kind = FORMAT_NAMES[converted.format]
    described = kind
    structured: dict[str, Any] = {"path": shown_path, "format": converted.format}
    text = converted.text
    # An empty file (or a PDF without pages) has no pages to show: said below, as no text.
    if converted.format == "pdf" and (converted.parts or pages is not None):
        count = len(converted.parts)
        chosen = pages or list(range(1, count + 1))
        past = [n for n in chosen if n > count]
        if past:
            raise ToolError(
                f"{shown_path} has {count} page{'' if count == 1 else 's'}, so page {past[0]} "
                f"does not exist. Pass pages within 1-{count}."
            )
        text = "\n\n".join(f"--- page {n} ---\n{converted.parts[n - 1][1]}" for n in chosen)
        described = f"{kind}, {_span('page', chosen)} of {count}"
        structured["pages"] = {"shown": chosen, "total": count}
        if not any(converted.parts[n - 1][1] for n in chosen):
            text += "\n\n(No text on these pages: a scanned PDF holds images of text, which "
            text += "read_document cannot read.)"
    elif converted.format == "pptx" and pages is not None:
        numbers = {int(label): part for label, part in converted.parts if label.isdigit()}
        missing = [n for n in pages if n not in numbers]
        if missing:
            raise ToolError(
                f"{shown_path} has {len(numbers)} slides, and slide {missing[0]} is not one of "
                f"them. Pass slides within 1-{max(numbers, default=0)}."
            )
        text = "\n\n".join(numbers[n] for n in pages)
        described = f"{kind}, {_span('slide', pages)} of {len(numbers)}"
        structured["pages"] = {"shown": pages, "total": len(numbers)}
    elif converted.format == "xlsx":
        names = [label for label, _ in converted.parts]
        structured["sheets"] = {"all": names}
        if sheets is not None:
            by_name = dict(converted.parts)
            unknown = [s for s in sheets if s not in by_name]
            if unknown:
                listed = ", ".join(repr(n) for n in names) or "none"
                raise ToolError(
                    f"{shown_path} has no sheet {unknown[0]!r}; its sheets are {listed}. Pass "
                    "names from that list (they are case-sensitive)."
                )
            text = "\n\n".join(by_name[s] for s in sheets)
            described = f"{kind}, sheet{'' if len(sheets) == 1 else 's'} {', '.join(sheets)}"
            structured["sheets"]["shown"] = sheets

    total = len(text)
    structured["total_chars"] = total
    if total == 0:
        structured.update(start=0, end=0, next_offset=None)
        return ToolResult(
            f"{shown_path} ({described}) has no text to show: the file is empty or holds no "
            "text that read_document can extract.",
            structured=structured,
        )
    if offset >= total:
        raise ToolError(
            f"offset={offset:,} is past the end of the text of {shown_path} ({described}), which "
            f"has {total:,} characters. Pass an offset below {total}, or leave it out to start "
            "at the beginning."
        )
    end = min(total, offset + limit)
    next_offset = end if end < total else None
    structured.update(start=offset, end=end, next_offset=next_offset)
    header = f"{shown_path} ({described}): characters {offset:,}–{end:,} of {total:,} shown"
    body = text[offset:end]
    footer = f"\n\nMore: pass offset={end} for the next characters." if next_offset else ""
    return ToolResult(f"{header}\n{body}{footer}", structured=structured)


def _span(noun: str, numbers: list[int]) -> str:
    if len(numbers) == 1:
        return f"{noun} {numbers[0]}"
    if numbers == list(range(numbers[0], numbers[-1] + 1)):
        return f"{noun}s {numbers[0]}–{numbers[-1]}"
    return f"{noun}s {','.join(map(str, numbers))}"


DOCUMENT_TOOLS = (read_document,)
"""read_document: the text of office documents, web pages, e-books and CSV files."""

__all__ = ["DOCUMENT_TOOLS", "FORMAT_OF_EXTENSION", "Format", "read_document"]
