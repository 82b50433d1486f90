"""The perception server assembled: tools that gather information and change nothing.

Files under one root (`FILE_TOOLS`), documents (`DOCUMENT_TOOLS`), a searchable knowledge
folder (`KNOWLEDGE_TOOLS`), images and audio (`OCR_TOOLS`, `AUDIO_TOOLS`), the web
(`WEB_TOOLS`), public data (`PUBLIC_DATA_TOOLS`) and calendars (`CALENDAR_TOOLS`). They are
ordinary wakeful tools working under `ctx.services.workdir` with their settings from
`ctx.services.settings`, so the same tuples serve an agent directly or, through
:func:`perception_server`, any MCP client.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ...errors import UserError
from ...mcp.bridge import BridgeServer, build_server
from ...mcp.prompts import builtin_skill_prompts
from ...mcp.resources import FileResources
from ...tools.spec import Tool
from .audio import AUDIO_TOOLS
from .calendar import CALENDAR_TOOLS
from .documents import DOCUMENT_TOOLS
from .find_file import find_file
from .grep_file import grep_file
from .knowledge import KNOWLEDGE_TOOLS
from .list_dir import list_dir
from .ocr import OCR_TOOLS
from .public_data import PUBLIC_DATA_TOOLS
from .read_file import read_file
from .web import WEB_TOOLS

FILE_TOOLS: tuple[Tool, ...] = (find_file, grep_file, read_file, list_dir)
"""find_file, grep_file, read_file and list_dir: look at files, change nothing."""

PERCEPTION_TOOLS: tuple[Tool, ...] = (
    *FILE_TOOLS,
    *DOCUMENT_TOOLS,
    *KNOWLEDGE_TOOLS,
    *OCR_TOOLS,
    *AUDIO_TOOLS,
    *WEB_TOOLS,
    *PUBLIC_DATA_TOOLS,
    *CALENDAR_TOOLS,
)
"""Every tool of the perception server."""

INSTRUCTIONS = """\
Tools that gather information and change nothing. Files: read-only access under one root
directory (every path is relative to it; nothing outside can be read): find_file by name,
grep_file by content, read_file (numbered lines, a page at a time), list_dir, read_document
(PDF, DOCX, PPTX, XLSX, HTML, EPUB, CSV), knowledge_base_search, ocr_image (English and
Chinese) and transcribe_audio (needs a configured Whisper model). Web: web_search, fetch_url,
get_page_metadata. Public data: get_weather, wikipedia_search, wikipedia_page, arxiv_search,
exchange_rate, stock_quote; calendar_events. Long results come in pages: pass the offset or
cursor a result gives to get the next one."""


def perception_server(root: Path, *, settings: Sequence[object] = ()) -> BridgeServer:
    """An MCP server named "wakeful-perception" offering PERCEPTION_TOOLS under `root`, the
    root's files as resources (read-only, confined like the file tools) and the built-in skills
    as prompts.

    `settings` are the tool families' settings objects (e.g. `WebSettings(...)`); a family
    without one uses its defaults."""
    if not root.is_dir():
        raise UserError(
            f"The root {str(root)!r} is not an existing directory. Give the directory the file "
            "tools may read, e.g. --root ."
        )
    return build_server(
        "wakeful-perception",
        PERCEPTION_TOOLS,
        instructions=INSTRUCTIONS,
        workdir=root.resolve(),
        settings=settings,
        resources=FileResources(root.resolve()),
        prompts=builtin_skill_prompts(),
    )


__all__ = [
    "AUDIO_TOOLS",
    "CALENDAR_TOOLS",
    "DOCUMENT_TOOLS",
    "FILE_TOOLS",
    "INSTRUCTIONS",
    "KNOWLEDGE_TOOLS",
    "OCR_TOOLS",
    "PERCEPTION_TOOLS",
    "PUBLIC_DATA_TOOLS",
    "WEB_TOOLS",
    "find_file",
    "grep_file",
    "list_dir",
    "perception_server",
    "read_file",
]
