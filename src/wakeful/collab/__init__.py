"""Collaboration: what a child agent reads when its parent delegates a task.

The four context strategies of the chapter (minimal, manual, automatic trimming, LLM-generated)
and adaptive selection among them, with redaction that keeps private fields from every child.
Subagents themselves (spawning, messages, cancellation) are built on top of this package.
"""

from __future__ import annotations

from .adaptive import StrategyChoice, choose_strategy
from .child_context import (
    TAGS,
    ChildContext,
    ContextBlock,
    ContextRecord,
    estimate_tokens,
)
from .context import prepare_child_context
from .generated_context import GeneratedContext
from .parent_view import ManualShare, ParentView, latest_tool_results
from .redaction import Redactor
from .settings import (
    STRATEGIES,
    AdaptiveSettings,
    AutomaticSettings,
    CallContextSettings,
    ContextSettings,
    GeneratedContextSettings,
    RedactionSettings,
)

__all__ = [
    "STRATEGIES",
    "TAGS",
    "AdaptiveSettings",
    "AutomaticSettings",
    "CallContextSettings",
    "ChildContext",
    "ContextBlock",
    "ContextRecord",
    "ContextSettings",
    "GeneratedContext",
    "GeneratedContextSettings",
    "ManualShare",
    "ParentView",
    "RedactionSettings",
    "Redactor",
    "StrategyChoice",
    "choose_strategy",
    "estimate_tokens",
    "latest_tool_results",
    "prepare_child_context",
]
