"""Model providers behind one streaming interface, plus scripted models for tests and demos.

The real providers (`OpenAIChatModel`, `AnthropicModel`) are imported on first use, so importing
`wakeful.models` stays cheap and does not load the SDKs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy_exports import lazy_exports
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

__getattr__ = lazy_exports(__name__, {"AnthropicModel": ".anthropic", "OpenAIChatModel": ".openai"})


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
