"""Model providers behind one streaming interface, plus scripted models for tests and demos.

The real providers (`OpenAIChatModel`, `AnthropicModel`) are imported on first use, so importing
`wakeful.models` stays cheap and does not load the SDKs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .base import (
    Model,
    ModelRequest,
    StreamPart,
    TextDelta,
    ThinkingDelta,
    ToolCallPart,
    ToolDefinition,
    TurnEnd,
    Usage,
)
from .retry import Backoff
from .scripted import FunctionModel, ScriptedModel, Turn, call, say, use

if TYPE_CHECKING:
    from .anthropic import AnthropicModel
    from .openai import OpenAIChatModel

_PROVIDER_MODULES = {"AnthropicModel": ".anthropic", "OpenAIChatModel": ".openai"}


def __getattr__(name: str) -> Any:
    module = _PROVIDER_MODULES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module, __name__), name)


__all__ = [
    "AnthropicModel",
    "Backoff",
    "FunctionModel",
    "Model",
    "ModelRequest",
    "OpenAIChatModel",
    "ScriptedModel",
    "StreamPart",
    "TextDelta",
    "ThinkingDelta",
    "ToolCallPart",
    "ToolDefinition",
    "Turn",
    "TurnEnd",
    "Usage",
    "call",
    "say",
    "use",
]
