"""read_document on real files of each format, written into a temporary root."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path
from typing import Any

import openpyxl
import pytest
from pptx import Presentation
from pptx.util import Inches

from wakeful.errors import ToolError
from wakeful.services import Services
from wakeful.toolkits.perception.documents import DOCUMENT_TOOLS, read_document
from wakeful.tools.lint import lint_tool
from wakeful.tools.spec import ToolContext, ToolResult


def tiny_pdf(pages: list[str]) -> bytes:
    """A valid PDF with one line of Helvetica text per page, offsets computed exactly."""
    count = len(pages)
    objects = [
        "<< /Type /Catalog /Pages 2 0 R >>",
        "<< /Type /Pages /Kids ["
        + " ".join(f"{4 + 2 * i} 0 R" for i in range(count))
        + f"] /Count {count} >>",
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    for i, text in enumerate(pages):
        stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET"
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            f"/Resources << /Font << /F1 3 0 R >> >> /Contents {5 + 2 * i} 0 R >>"
        )
        objects.append(f"<< /Length {len(stream)} >>\nstream\n{stream}\nendstream")
    out = b"%PDF-1.4\n"
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n{body}\nendobj\n".encode()
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{o:010d} 00000 n \n".encode() for o in offsets)
    out += (
        f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    )
    return out


def tiny_docx(paragraphs: list[str]) -> bytes:
    """A minimal DOCX (WordprocessingML in a zip), enough for mammoth."""
    body = "".join(f"<w:p><w:r><w:t>{p}</w:t></w:r></w:p>" for p in paragraphs)
    ns = "http://schemas.openxmlformats.org"
    files = {
        "[Content_Types].xml": (
            f'<?xml version="1.0"?><Types xmlns="{ns}/package/2006/content-types">'
            f'<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.'
            f'relationships+xml"/><Default Extension="xml" ContentType="application/xml"/>'
            f'<Override PartName="/word/document.xml" ContentType="application/vnd.'
            f'openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>'
        ),
        "_rels/.rels": (
            f'<?xml version="1.0"?><Relationships xmlns="{ns}/package/2006/relationships">'
            f'<Relationship Id="rId1" Type="{ns}/officeDocument/2006/relationships/'
            f'officeDocument" Target="word/document.xml"/></Relationships>'
        ),
        "word/document.xml": (
            f'<?xml version="1.0"?><w:document xmlns:w="{ns}/wordprocessingml/2006/main">'
            f"<w:body>{body}</w:body></w:document>"
        ),
    }
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return buffer.getvalue()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "page.html").write_text(
        "<html><head><title>T</title><script>var x=1;</script></head>"
        "<body><h1>Release notes</h1><p>Fixed the <b>login</b> bug.</p></body></html>"
    )
    (root / "docs" / "table.csv").write_text("name,qty\napple,3\npear,5\n")
    (root / "docs" / "report.pdf").write_bytes(
        tiny_pdf(["First page text", "Second page text", "Third page text"])
    )
    (root / "docs" / "letter.docx").write_bytes(tiny_docx(["Dear reader,", "Thanks."]))
    workbook = openpyxl.Workbook()
    sheet = workbook.active
    assert sheet is not None
    sheet.title = "Summary"
    sheet.append(["region", "total"])
    sheet.append(["north", 10])
    other = workbook.create_sheet("Detail")
    other.append(["item"])
    other.append(["bolt"])
    workbook.save(root / "docs" / "budget.xlsx")
    deck = Presentation()
    for title in ("Intro", "Plan"):
        slide = deck.slides.add_slide(deck.slide_layouts[5])
        assert slide.shapes.title is not None
        slide.shapes.title.text = title
        box = slide.shapes.add_textbox(Inches(1), Inches(2), Inches(4), Inches(1))
        box.text_frame.text = f"{title} body"
    deck.save(str(root / "docs" / "deck.pptx"))
    (root / "docs" / "long.html").write_text(
        "<html><body>" + "".join(f"<p>paragraph {i:05d}</p>" for i in range(2000)) + "</body>"
    )
    (root / "docs" / "blob.pdf").write_bytes(bytes(range(256)) * 40)
    (root / "docs" / "empty.csv").write_bytes(b"")
    (root / "docs" / "notes.txt").write_text("name,qty\nfig,1\n")
    (tmp_path / "outside.csv").write_text("a,b\n")
    return root


async def call(services: Services, **arguments: Any) -> ToolResult:
    ctx = ToolContext("main", "call_1", "read_document", services)
    return await read_document.run(arguments, ctx)


def test_the_description_meets_the_standard() -> None:
    assert (read_document,) == DOCUMENT_TOOLS
    assert lint_tool(read_document) == []


@pytest.mark.anyio
async def test_html_is_markdown_without_scripts(services: Services) -> None:
    result = await call(services, path="docs/page.html")
    assert result.content.startswith("docs/page.html (HTML): characters 0–")
    assert "# Release notes" in result.content
    assert "**login**" in result.content
    assert "var x" not in result.content
    assert result.structured["next_offset"] is None


@pytest.mark.anyio
async def test_csv_becomes_a_table_and_format_overrides_the_extension(
    services: Services,
) -> None:
    result = await call(services, path="docs/table.csv")
    assert "| apple | 3 |" in result.content
    forced = await call(services, path="docs/notes.txt", format="csv")
    assert "| fig | 1 |" in forced.content


@pytest.mark.anyio
async def test_xlsx_sheets_can_be_chosen(services: Services) -> None:
    whole = await call(services, path="docs/budget.xlsx")
    assert "## Summary" in whole.content and "## Detail" in whole.content
    assert whole.structured["sheets"]["all"] == ["Summary", "Detail"]
    one = await call(services, path="docs/budget.xlsx", sheets=["Detail"])
    assert "bolt" in one.content and "north" not in one.content
    assert "(Excel (XLSX), sheet Detail)" in one.content
    with pytest.raises(ToolError, match="no sheet 'Nope'; its sheets are 'Summary', 'Detail'"):
        await call(services, path="docs/budget.xlsx", sheets=["Nope"])


@pytest.mark.anyio
async def test_pdf_pages_are_marked_and_selectable(services: Services) -> None:
    whole = await call(services, path="docs/report.pdf")
    assert "(PDF, pages 1–3 of 3)" in whole.content
    assert "--- page 2 ---\nSecond page text" in whole.content
    some = await call(services, path="docs/report.pdf", pages="3,1")
    assert "First page text" in some.content and "Second" not in some.content
    assert some.structured["pages"] == {"shown": [3, 1], "total": 3}
    with pytest.raises(ToolError, match="has 3 pages, so page 4 does not exist"):
        await call(services, path="docs/report.pdf", pages="2-9")
    with pytest.raises(ToolError, match="is not a list of 1-based page numbers"):
        await call(services, path="docs/report.pdf", pages="0-x")


@pytest.mark.anyio
async def test_pptx_slides_and_docx_paragraphs(services: Services) -> None:
    deck = await call(services, path="docs/deck.pptx", pages="2")
    assert "Plan body" in deck.content and "Intro" not in deck.content
    letter = await call(services, path="docs/letter.docx")
    assert "Dear reader," in letter.content and "Thanks." in letter.content


@pytest.mark.anyio
async def test_long_text_comes_in_windows(services: Services) -> None:
    first = await call(services, path="docs/long.html", limit=1000)
    total = first.structured["total_chars"]
    assert first.content.startswith(f"docs/long.html (HTML): characters 0–1,000 of {total:,}")
    assert first.content.endswith("More: pass offset=1000 for the next characters.")
    second = await call(services, path="docs/long.html", offset=1000, limit=1000)
    assert second.structured["start"] == 1000
    full = await call(services, path="docs/long.html")
    assert len(full.content) <= 10_000
    with pytest.raises(ToolError, match=f"offset=10,000,000 is past the end.*{total:,} char"):
        await call(services, path="docs/long.html", offset=10_000_000)


@pytest.mark.anyio
async def test_bad_documents_and_paths_are_errors(services: Services) -> None:
    with pytest.raises(ToolError, match=r"could not be read as PDF .*read_file"):
        await call(services, path="docs/blob.pdf")
    with pytest.raises(ToolError, match=r"cannot tell the format.*'\.txt'.*read_file"):
        await call(services, path="docs/notes.txt")
    with pytest.raises(ToolError, match="leads outside the root"):
        await call(services, path="../outside.csv")
    with pytest.raises(ToolError, match="no file or directory"):
        await call(services, path="docs/missing.pdf")
    with pytest.raises(ToolError, match="not a regular file"):
        await call(services, path="docs", format="pdf")
    with pytest.raises(ToolError, match=r"pages=.*selects PDF pages"):
        await call(services, path="docs/table.csv", pages="1")
    with pytest.raises(ToolError, match="sheets selects XLSX sheets"):
        await call(services, path="docs/report.pdf", sheets=["A"])
    empty = await call(services, path="docs/empty.csv")
    assert "has no text to show" in empty.content


@pytest.mark.anyio
async def test_an_empty_pdf_has_no_text_to_show(services: Services, root: Path) -> None:
    # Found by test_every_tool's edge values: an empty .pdf raised IndexError (no pages).
    (root / "docs" / "empty.pdf").write_bytes(b"")
    result = await call(services, path="docs/empty.pdf")
    assert "docs/empty.pdf (PDF) has no text to show" in result.content
    with pytest.raises(ToolError, match="has 0 pages, so page 1 does not exist"):
        await call(services, path="docs/empty.pdf", pages="1")


@pytest.mark.anyio
@pytest.mark.parametrize(
    "arguments",
    [
        {},
        {"path": 3},
        {"path": "docs/page.html", "format": "doc"},
        {"path": "docs/page.html", "offset": -1},
        {"path": "docs/page.html", "limit": 0},
        {"path": "docs/page.html", "sheets": []},
    ],
)
async def test_invalid_arguments_are_refused(services: Services, arguments: dict[str, Any]) -> None:
    with pytest.raises(ToolError):
        await call(services, **arguments)
