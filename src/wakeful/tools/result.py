"""What a tool returns, apart from what a tool is.

:class:`ToolResult` is the one type that background tasks, processes, safety layers and the store
exchange about a tool call's outcome; it lives here, importing nothing of the package, so that
they need not import :mod:`wakeful.tools.spec` (whose context refers back to the runtime's
services and tasks). :mod:`wakeful.tools.spec` re-exports it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

__all__ = ["ToolResult"]


@dataclass(slots=True)
class ToolResult:
    """What a tool returns: text for the model, optional structured data, and whether it failed."""

    content: str
    is_error: bool = False
    structured: Any = None

    @classmethod
    def of(cls, value: Any) -> ToolResult:
        if isinstance(value, ToolResult):
            return value
        if value is None:
            return cls("done")
        if isinstance(value, str):
            return cls(value)
        if isinstance(value, BaseModel):
            value = value.model_dump(mode="json")
        return cls(json.dumps(value, ensure_ascii=False, default=str), structured=value)

    @classmethod
    def error(cls, message: str) -> ToolResult:
        return cls(message, is_error=True)
