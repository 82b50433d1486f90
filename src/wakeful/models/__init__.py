"""Model providers behind one streaming interface, plus scripted models for tests and demos."""

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
from .scripted import FunctionModel, ScriptedModel, Turn, call, say, use

__all__ = [
    "FunctionModel",
    "Model",
    "ModelRequest",
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
