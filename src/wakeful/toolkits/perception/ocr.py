"""`ocr_image`: the text in an image under the root, read by Tesseract, and the image itself on
request for a vision model.

Tesseract runs as a subprocess (Debian's `tesseract-ocr`, plus `tesseract-ocr-chi-sim` for
Chinese), so there is no Python dependency. The image goes to it on stdin after its format has been
checked from its first bytes: given a path, tesseract reads a file that is not an image as a list
of further image paths, which could reach outside the root.
"""

from __future__ import annotations

import base64
import os
import stat
import subprocess
from dataclasses import dataclass
from typing import Annotated, Literal

import anyio
from pydantic import BaseModel, ConfigDict, Field

from ...errors import ToolError
from ...mcp.results import describe_size
from ...safety.beneath import Opened
from ...services import settings_of
from ...tools.spec import ToolAnnotations, ToolContext, ToolResult, tool
from .workspace import open_workspace

Languages = Literal["eng", "chi_sim", "eng+chi_sim"]
Segmentation = Literal["auto", "single_column", "single_block", "single_line", "sparse"]
Layout = Literal["text", "tsv"]

# Tesseract's --psm numbers for the choices offered to the model.
PAGE_SEGMENTATION_MODES: dict[Segmentation, int] = {
    "auto": 3,
    "single_column": 4,
    "single_block": 6,
    "single_line": 7,
    "sparse": 11,
}
LANGUAGE_PACKAGES = {"eng": "tesseract-ocr-eng", "chi_sim": "tesseract-ocr-chi-sim"}
BODY_LIMIT = 9_000
"""Characters of recognised text in one result; the header and notes fit in the rest of 10,000."""


class OcrSettings(BaseModel):
    """Settings of ocr_image."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tesseract_path: str = "tesseract"
    """The tesseract executable: a name looked up on PATH, or a full path."""

    default_languages: Languages = "eng+chi_sim"
    """The languages used when a call names none."""

    timeout_seconds: float = Field(default=60.0, gt=0, le=600)
    """How long one recognition may take before it is stopped."""

    max_image_bytes: int = Field(default=50 * 1024 * 1024, ge=1024)
    """The largest image file that is read at all."""

    max_returned_image_bytes: int = Field(default=5 * 1024 * 1024, ge=1024)
    """The largest image file that `return_image=True` puts into the result."""


@dataclass(frozen=True)
class ImageFormat:
    mime_type: str
    magic: tuple[bytes, ...]


# Formats tesseract (through leptonica) reads, known by their first bytes.
IMAGE_FORMATS: tuple[ImageFormat, ...] = (
    ImageFormat("image/png", (b"\x89PNG\r\n\x1a\n",)),
    ImageFormat("image/jpeg", (b"\xff\xd8\xff",)),
    ImageFormat("image/gif", (b"GIF87a", b"GIF89a")),
    ImageFormat("image/bmp", (b"BM",)),
    ImageFormat("image/tiff", (b"II*\x00", b"MM\x00*")),
    ImageFormat("image/x-portable-anymap", tuple(f"P{n}".encode() for n in range(1, 7))),
)
_WEBP = "image/webp"


@tool(
    annotations=ToolAnnotations(read_only=True, idempotent=True),
    examples=(
        {"path": "scans/receipt.png"},
        {"path": "screenshots/error.png", "languages": "eng"},
        {"path": "photos/sign.jpg", "languages": "chi_sim", "page_segmentation": "sparse"},
        {"path": "scans/table.png", "layout": "tsv"},
        {"path": "charts/q3.png", "return_image": True},
    ),
)
async def ocr_image(
    ctx: ToolContext,
    path: Annotated[
        str,
        Field(
            min_length=1,
            max_length=4096,
            description="The image (PNG, JPEG, GIF, BMP, TIFF, WebP or PNM), relative to the "
            "root (or absolute inside it), e.g. 'scans/receipt.png'.",
        ),
    ],
    languages: Annotated[
        Languages | None,
        Field(
            description="The languages of the text: 'eng', 'chi_sim' (simplified Chinese) or "
            "both; omitted, the configured default (normally both), e.g. 'eng'.",
        ),
    ] = None,
    page_segmentation: Annotated[
        Segmentation,
        Field(
            description="How the page is split into text: 'auto' (documents, columns), "
            "'single_column', 'single_block' (one uniform block), 'single_line', or 'sparse' "
            "(scattered text such as screenshots and signs), e.g. 'sparse'.",
        ),
    ] = "auto",
    layout: Annotated[
        Layout,
        Field(
            description="'text': the text with its line breaks, blank lines between blocks and "
            "spacing kept; 'tsv': one row per word with its box and confidence, e.g. 'tsv'.",
        ),
    ] = "text",
    return_image: Annotated[
        bool,
        Field(
            description="Also put the image itself into the result for a model that can see "
            "images (files up to 5 MB), e.g. true.",
        ),
    ] = False,
) -> ToolResult:
    """Read the text in an image file under the root with Tesseract OCR (English and simplified
    Chinese), optionally returning the image itself for a vision model.

    Use it for screenshots, scanned pages, photos of signs or receipts and charts with labels:
    anything where the words are pixels. Use page_segmentation='sparse' for scattered text and
    layout='tsv' when word positions matter (tables, forms). Use return_image=True when the
    picture matters beyond its words and the model can see images.

    It cannot read PDFs or other documents (use read_document), does not describe pictures
    without text, and cannot read outside the root. Handwriting and small or skewed text come
    back with errors; languages other than English and simplified Chinese are not installed.

    Result: a header such as "scans/receipt.png: 12 lines of text (image/png, eng+chi_sim)", then
    the recognised text (layout='text': lines as in the image, a blank line between blocks;
    layout='tsv': a header row and one row per word: block, line, left, top, width, height,
    confidence 0-100, text), cut at 9,000 characters with a note. With return_image=True a last
    line "[image: image/png, 12 KB]" and structured["images"] = [{"mime_type", "data"}]
    (base64). structuredContent also holds path, mime_type, languages, characters and truncated.

    Cost: about 0.5-2 s for a screenshot or page (longer for large scans, stopped after 60 s);
    up to 10,000 characters of text, plus the image (up to 5 MB) when asked for.
    """
    settings = settings_of(ctx.services, OcrSettings)
    chosen: Languages = languages or settings.default_languages
    limit = settings.max_returned_image_bytes if return_image else settings.max_image_bytes

    def read() -> tuple[str, bytes]:
        with open_workspace(ctx) as root, root.open(path) as found:
            return found.shown, _read_image(found, settings, limit)

    shown_path, data = await anyio.to_thread.run_sync(read)
    mime_type = _mime_type_of(data, shown_path)
    await _check_languages(settings, chosen)
    output = await _run_tesseract(
        settings, data, shown_path, chosen, PAGE_SEGMENTATION_MODES[page_segmentation], layout
    )
    body = _tsv_words(output) if layout == "tsv" else _tidy_text(output)
    truncated = len(body) > BODY_LIMIT
    if truncated:
        cut = body.rfind("\n", 0, BODY_LIMIT)
        body = body[: cut if cut > 0 else BODY_LIMIT]
    lines = body.count("\n") + 1 if body else 0
    if layout == "tsv":
        what = f"{max(lines - 1, 0)} word{'' if lines == 2 else 's'}"
    else:
        what = f"{lines} line{'' if lines == 1 else 's'} of text"
    header = f"{shown_path}: {what} ({mime_type}, {chosen})"
    parts = [header, body if body else "(no text was recognised in the image)"]
    if truncated:
        parts.append(
            f"(the text was cut at {len(body):,} characters; pass page_segmentation or a "
            "cropped image to read the rest)"
        )
    structured: dict[str, object] = {
        "path": shown_path,
        "mime_type": mime_type,
        "image_bytes": len(data),
        "languages": chosen,
        "layout": layout,
        "characters": len(body),
        "truncated": truncated,
    }
    if return_image:
        encoded = base64.b64encode(data).decode("ascii")
        structured["images"] = [{"mime_type": mime_type, "data": encoded}]
        parts.append(f"[image: {mime_type}, {describe_size(encoded)}]")
    return ToolResult("\n".join(parts), structured=structured)


def _read_image(found: Opened, settings: OcrSettings, limit: int) -> bytes:
    shown_path = found.shown
    try:
        with os.fdopen(found.fd, "rb", closefd=False) as file:
            info = os.fstat(found.fd)
            if not stat.S_ISREG(info.st_mode):
                raise ToolError(
                    f"{shown_path!r} is not a regular file; ocr_image reads image files. Use "
                    "list_dir to see what it holds."
                )
            if info.st_size == 0:
                raise ToolError(f"{shown_path!r} is empty (0 bytes), so it holds no image.")
            if info.st_size > limit:
                why = (
                    "the most return_image=True puts into a result"
                    if limit == settings.max_returned_image_bytes
                    else "the largest image ocr_image reads"
                )
                raise ToolError(
                    f"{shown_path!r} has {info.st_size:,} bytes, over {limit:,} bytes, {why}. "
                    "Use a smaller or cropped image"
                    + (", or call without return_image." if "return_image" in why else ".")
                )
            return file.read(limit + 1)
    except IsADirectoryError as exc:
        raise ToolError(
            f"{shown_path!r} is a directory; ocr_image reads image files. Use list_dir to see "
            "what it holds."
        ) from exc
    except PermissionError as exc:
        raise ToolError(f"{shown_path!r} cannot be read: permission denied.") from exc


def _mime_type_of(data: bytes, shown_path: str) -> str:
    for image_format in IMAGE_FORMATS:
        if data.startswith(image_format.magic):
            return image_format.mime_type
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return _WEBP
    raise ToolError(
        f"{shown_path!r} is not an image ocr_image can read: its first bytes are not those of "
        "PNG, JPEG, GIF, BMP, TIFF, WebP or PNM. For text files use read_file; for PDF and "
        "office documents use read_document."
    )


_known_languages: dict[str, frozenset[str]] = {}


async def _check_languages(settings: OcrSettings, chosen: Languages) -> None:
    installed = _known_languages.get(settings.tesseract_path)
    if installed is None:
        output = await _tesseract(settings, ["--list-langs"], b"")
        # The first line names the data directory; each further line is one language.
        names = output.stdout.decode("utf-8", "replace").splitlines()[1:]
        installed = frozenset(name.strip() for name in names if name.strip())
        _known_languages[settings.tesseract_path] = installed
    missing = [lang for lang in chosen.split("+") if lang not in installed]
    if missing:
        packages = " ".join(LANGUAGE_PACKAGES[lang] for lang in missing)
        have = ", ".join(sorted(installed)) or "none"
        raise ToolError(
            f"Tesseract has no data for {', '.join(missing)} (installed: {have}). Install it "
            f"(on Debian: apt-get install {packages}), or pass languages set to an installed "
            "one."
        )


async def _run_tesseract(
    settings: OcrSettings, data: bytes, shown_path: str, languages: str, psm: int, layout: Layout
) -> str:
    arguments = ["stdin", "stdout", "-l", languages, "--psm", str(psm)]
    # Keep runs of spaces (column alignment) and do not put spaces between Chinese characters.
    arguments += ["-c", "preserve_interword_spaces=1"]
    if layout == "tsv":
        arguments.append("tsv")
    result = await _tesseract(settings, arguments, data)
    if result.returncode != 0:
        reason = " ".join(result.stderr.decode("utf-8", "replace").split())[-300:]
        raise ToolError(
            f"Tesseract could not read {shown_path!r} as an image (exit status "
            f"{result.returncode}: {reason or 'no message'}). The file may be corrupt or "
            "truncated; open it in an image viewer, or convert it to PNG."
        )
    return result.stdout.decode("utf-8", "replace")


async def _tesseract(
    settings: OcrSettings, arguments: list[str], data: bytes
) -> subprocess.CompletedProcess[bytes]:
    command = [settings.tesseract_path, *arguments]
    try:
        with anyio.fail_after(settings.timeout_seconds):
            return await anyio.run_process(command, input=data, check=False)
    except FileNotFoundError as exc:
        raise ToolError(
            f"The Tesseract OCR program {settings.tesseract_path!r} is not installed, so "
            "ocr_image cannot run. Install it (on Debian: apt-get install tesseract-ocr "
            "tesseract-ocr-chi-sim for Chinese too), or set OcrSettings.tesseract_path to its "
            "full path."
        ) from exc
    except PermissionError as exc:
        raise ToolError(
            f"The Tesseract OCR program {settings.tesseract_path!r} cannot be run: permission "
            "denied. Set OcrSettings.tesseract_path to an executable tesseract."
        ) from exc
    except TimeoutError as exc:
        raise ToolError(
            f"Tesseract took longer than {settings.timeout_seconds:g} s and was stopped. Use a "
            "smaller or cropped image, or raise OcrSettings.timeout_seconds."
        ) from exc


def _tidy_text(output: str) -> str:
    """Tesseract's text without trailing spaces, form feeds or more than one blank line in a row."""
    lines = [line.rstrip() for line in output.replace("\f", "").splitlines()]
    tidy: list[str] = []
    for line in lines:
        if line or (tidy and tidy[-1]):
            tidy.append(line)
    return "\n".join(tidy).strip("\n")


def _tsv_words(output: str) -> str:
    """The word rows of tesseract's TSV (level 5), with the columns a reader needs."""
    rows = ["block\tline\tleft\ttop\twidth\theight\tconfidence\ttext"]
    for line in output.splitlines()[1:]:
        cells = line.split("\t")
        if len(cells) < 12 or cells[0] != "5" or not cells[11].strip():
            continue
        block, line_number = cells[2], cells[4]
        left, top, width, height = cells[6:10]
        confidence = str(round(float(cells[10])))
        rows.append(
            "\t".join((block, line_number, left, top, width, height, confidence, cells[11]))
        )
    return "\n".join(rows) if len(rows) > 1 else ""


OCR_TOOLS = (ocr_image,)
"""ocr_image: the text in an image file, by Tesseract."""
