"""ocr_image on real images drawn with Pillow, read by the real tesseract program."""

from __future__ import annotations

import base64
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from PIL import Image, ImageDraw, ImageFont

from tool_services import tool_services
from wakeful.errors import ToolError
from wakeful.services import Services
from wakeful.toolkits.perception.ocr import OCR_TOOLS, OcrSettings, ocr_image
from wakeful.tools.lint import lint_tool
from wakeful.tools.spec import ToolContext, ToolResult

needs_tesseract = pytest.mark.skipif(
    shutil.which("tesseract") is None,
    reason="tesseract is not installed (apt-get install tesseract-ocr tesseract-ocr-chi-sim)",
)


def _cjk_font() -> str | None:
    if shutil.which("fc-list") is None:
        return None
    listed = subprocess.run(
        ["fc-list", ":lang=zh", "file"], capture_output=True, text=True, check=False
    ).stdout
    files = [line.split(":")[0].strip() for line in listed.splitlines() if line.strip()]
    return sorted(files)[0] if files else None


CJK_FONT = _cjk_font()


def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    if CJK_FONT is not None:
        return ImageFont.truetype(CJK_FONT, size)
    return ImageFont.load_default(size)


def draw_text(lines: list[str], *, size: tuple[int, int] = (700, 260)) -> Image.Image:
    image = Image.new("L", size, 255)
    draw = ImageDraw.Draw(image)
    for number, line in enumerate(lines):
        draw.text((24, 24 + number * 60), line, font=_font(34), fill=0)
    return image


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    (root / "scans").mkdir(parents=True)
    draw_text(["Invoice 4711", "Total due 93 EUR"]).save(root / "scans" / "invoice.png")
    draw_text(["Invoice 4711"]).convert("RGB").save(root / "scans" / "invoice.jpg", quality=95)
    draw_text(["Hello PNM"]).save(root / "scans" / "hello.pgm")
    (root / "notes.txt").write_text("scans/invoice.png\n")
    (root / "empty.png").write_bytes(b"")
    (root / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 64)
    (tmp_path / "outside.png").write_bytes((root / "scans" / "invoice.png").read_bytes())
    return root


async def call(services: Services, **arguments: Any) -> ToolResult:
    ctx = ToolContext("main", "call_1", "ocr_image", services)
    return await ocr_image.run(arguments, ctx)


def test_the_description_meets_the_standard() -> None:
    assert (ocr_image,) == OCR_TOOLS
    assert lint_tool(ocr_image) == []


@needs_tesseract
@pytest.mark.anyio
async def test_english_text_comes_back_line_by_line(services: Services) -> None:
    result = await call(services, path="scans/invoice.png", languages="eng")
    header, *lines = result.content.splitlines()
    assert header == "scans/invoice.png: 2 lines of text (image/png, eng)"
    assert lines == ["Invoice 4711", "Total due 93 EUR"]
    assert result.structured["mime_type"] == "image/png"
    assert result.structured["truncated"] is False
    assert "images" not in result.structured


@needs_tesseract
@pytest.mark.anyio
async def test_jpeg_and_pnm_images_are_read(services: Services) -> None:
    jpeg = await call(services, path="scans/invoice.jpg", languages="eng")
    assert "Invoice 4711" in jpeg.content
    assert jpeg.structured["mime_type"] == "image/jpeg"
    pnm = await call(services, path="scans/hello.pgm", languages="eng", page_segmentation="sparse")
    assert "Hello PNM" in pnm.content


@needs_tesseract
@pytest.mark.anyio
async def test_tsv_gives_each_word_a_box(services: Services) -> None:
    result = await call(services, path="scans/invoice.png", languages="eng", layout="tsv")
    header, columns, *rows = result.content.splitlines()
    assert header.startswith("scans/invoice.png: 6 words")
    assert columns == "block\tline\tleft\ttop\twidth\theight\tconfidence\ttext"
    words = [row.split("\t") for row in rows]
    assert [w[-1] for w in words] == ["Invoice", "4711", "Total", "due", "93", "EUR"]
    assert all(0 <= int(w[6]) <= 100 for w in words)
    assert int(words[2][3]) > int(words[0][3])  # the second line lies below the first


@needs_tesseract
@pytest.mark.skipif(CJK_FONT is None, reason="no font with Chinese glyphs (fc-list :lang=zh)")
@pytest.mark.anyio
async def test_chinese_and_english_together(services: Services, root: Path) -> None:
    draw_text(["Hello Wakeful", "你好世界"]).save(root / "scans" / "mixed.png")
    result = await call(services, path="scans/mixed.png")
    assert result.structured["languages"] == "eng+chi_sim"
    assert "Hello Wakeful" in result.content
    assert "你好世界" in result.content  # no spaces between the characters


@needs_tesseract
@pytest.mark.anyio
async def test_return_image_puts_the_picture_in_the_result(services: Services, root: Path) -> None:
    result = await call(services, path="scans/invoice.png", languages="eng", return_image=True)
    data = (root / "scans" / "invoice.png").read_bytes()
    assert result.structured["images"] == [
        {"mime_type": "image/png", "data": base64.b64encode(data).decode("ascii")}
    ]
    size = f"{round(len(data) / 1024)} KB" if len(data) >= 1024 else f"{len(data)} bytes"
    assert result.content.splitlines()[-1] == f"[image: image/png, {size}]"


@needs_tesseract
@pytest.mark.anyio
async def test_an_image_without_text_says_so(services: Services, root: Path) -> None:
    Image.new("L", (200, 100), 255).save(root / "blank.png")
    result = await call(services, path="blank.png", languages="eng")
    assert result.content.splitlines()[1] == "(no text was recognised in the image)"
    assert result.structured["characters"] == 0


@pytest.mark.anyio
async def test_files_that_are_not_images_are_refused(services: Services) -> None:
    # tesseract would read this file as a list of image paths; it must never get it.
    with pytest.raises(ToolError, match=r"'notes.txt' is not an image.*read_file"):
        await call(services, path="notes.txt")
    with pytest.raises(ToolError, match=r"'empty.png' is empty \(0 bytes\)"):
        await call(services, path="empty.png")
    with pytest.raises(ToolError, match=r"'scans' is a directory.*list_dir"):
        await call(services, path="scans")


@needs_tesseract
@pytest.mark.anyio
async def test_a_corrupt_image_is_an_error(services: Services) -> None:
    with pytest.raises(ToolError, match=r"could not read 'broken.png' as an image.*corrupt"):
        await call(services, path="broken.png", languages="eng")


@pytest.mark.anyio
async def test_paths_stay_under_the_root(services: Services) -> None:
    with pytest.raises(ToolError, match="leads outside the root"):
        await call(services, path="../outside.png")
    with pytest.raises(ToolError, match="no file or directory"):
        await call(services, path="scans/missing.png")


@pytest.mark.anyio
async def test_bad_arguments_are_refused_before_running(services: Services) -> None:
    for arguments in (
        {"path": ""},
        {"path": 42},
        {"path": "x" * 5000},
        {"path": "scans/invoice.png", "languages": "fra"},
        {"path": "scans/invoice.png", "page_segmentation": 99},
        {"path": "scans/invoice.png", "layout": "html"},
        {"path": "scans/invoice.png", "return_image": "maybe"},
    ):
        with pytest.raises(ToolError):
            await call(services, **arguments)


@pytest.mark.anyio
async def test_size_limits_name_the_way_out(root: Path) -> None:
    big = Image.effect_noise((800, 800), 100)
    big.save(root / "noise.png")
    settings = OcrSettings(max_returned_image_bytes=1024, max_image_bytes=2048)
    async with tool_services(root) as (services, _events):
        services.settings[OcrSettings] = settings
        with pytest.raises(ToolError, match=r"over 1,024 bytes.*without return_image"):
            await call(services, path="noise.png", return_image=True)
        with pytest.raises(ToolError, match=r"over 2,048 bytes, the largest image"):
            await call(services, path="noise.png")


@pytest.mark.anyio
async def test_a_missing_tesseract_names_the_package(root: Path) -> None:
    async with tool_services(root) as (services, _events):
        services.settings[OcrSettings] = OcrSettings(tesseract_path="/nonexistent/tesseract")
        with pytest.raises(ToolError, match=r"not installed.*apt-get install tesseract-ocr"):
            await call(services, path="scans/invoice.png")


@pytest.mark.anyio
async def test_a_slow_tesseract_is_stopped(root: Path, tmp_path: Path) -> None:
    slow = tmp_path / "slow-tesseract"
    slow.write_text(
        "#!/bin/sh\nif [ \"$1\" = --list-langs ]; then printf 'x\\neng\\n'; exit; fi\nsleep 5\n"
    )
    slow.chmod(0o755)
    async with tool_services(root) as (services, _events):
        settings = OcrSettings(tesseract_path=str(slow), timeout_seconds=0.3)
        services.settings[OcrSettings] = settings
        with pytest.raises(ToolError, match=r"longer than 0.3 s.*timeout_seconds"):
            await call(services, path="scans/invoice.png", languages="eng")


@pytest.mark.anyio
async def test_a_missing_language_names_its_package(root: Path, tmp_path: Path) -> None:
    english_only = tmp_path / "english-only-tesseract"
    english_only.write_text("#!/bin/sh\nprintf 'List of available languages (2):\\neng\\nosd\\n'\n")
    english_only.chmod(0o755)
    async with tool_services(root) as (services, _events):
        services.settings[OcrSettings] = OcrSettings(tesseract_path=str(english_only))
        with pytest.raises(ToolError, match=r"no data for chi_sim.*tesseract-ocr-chi-sim"):
            await call(services, path="scans/invoice.png")
