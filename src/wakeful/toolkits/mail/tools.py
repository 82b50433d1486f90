"""Every mail tool, in the order they are offered: find, read, draft, file."""

from __future__ import annotations

from ...tools.spec import Tool
from .filing import FILING_TOOLS
from .reading import READING_TOOLS

__all__ = ["MAIL_TOOLS"]

MAIL_TOOLS: tuple[Tool, ...] = (*READING_TOOLS, *FILING_TOOLS)
