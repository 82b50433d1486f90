"""The scripted agent of `wakeful demo web`: the web console without a model or API key.

It answers by keywords, so a person can try each part of the console: plain replies, a card
with buttons (a press comes back as a `user.action` event it answers), an urgent notification,
a background task with progress, and a command the safety gate stops for approval.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final

from ..messages import Message, ToolMessage, UserMessage
from ..models import FunctionModel, Turn, call, say, use
from ..models.base import ToolDefinition

__all__ = ["HELP", "console_demo_model"]

HELP: Final = (
    "I am the scripted demo agent (no model behind me). Try: 'card' (a card with buttons), "
    "'urgent' (a notification), 'task' (a background task), 'clean' (a command that needs your "
    "approval), or anything else to hear it back."
)

DEPLOY_CARD: Final[dict[str, Any]] = {
    "title": "Deploy v2.4 to production?",
    "text": "The build is green; 3 migrations are pending.",
    "fields": [{"label": "Commit", "value": "a41f9c2"}, {"label": "Tests", "value": "412 passed"}],
    "items": ["api: ready", "web: ready", "worker: ready"],
    "actions": [
        {"id": "deploy", "label": "Deploy", "style": "primary"},
        {"id": "wait", "label": "Not now"},
    ],
}


def _answer(messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> Turn:
    last = messages[-1]
    if isinstance(last, ToolMessage):
        if last.name == "run_shell" and last.status == "error":
            return use(call("reply_to_user", text=f"The command did not run: {last.content}"))
        return say("")
    if not isinstance(last, UserMessage):
        return say("")
    text = last.content.strip()
    pressed = _pressed(text)
    if pressed is not None:
        verdict = "Deploying v2.4 now." if pressed == "deploy" else "OK, not now."
        return use(call("reply_to_user", text=f"You pressed '{pressed}'. {verdict}"))
    lowered = text.lower()
    if "card" in lowered:
        return use(call("send_card_to_user", card=DEPLOY_CARD))
    if "urgent" in lowered:
        return use(
            call(
                "send_user_notification",
                text="The nightly backup failed on db-2.",
                urgency="urgent",
                title="Backup",
            )
        )
    if "task" in lowered:
        return use(
            call(
                "run_shell",
                command="for i in 1 2 3 4 5; do echo step $i; sleep 1; done",
                background=True,
            ),
            call("reply_to_user", text="Started a five-second task; watch it under Tasks."),
        )
    if "clean" in lowered:
        return use(call("run_shell", command="rm -rf build"))
    return use(call("reply_to_user", text=f"You said: {text}\n\n{HELP}"))


def _pressed(text: str) -> str | None:
    """The action id of a card button press (a user.action event's JSON), or None."""
    if '"action_id"' not in text:
        return None
    try:
        start = text.index("{")
        content = json.loads(text[start:])
    except (ValueError, json.JSONDecodeError):
        return None
    action = content.get("action_id") if isinstance(content, dict) else None
    return action if isinstance(action, str) else None


def console_demo_model() -> FunctionModel:
    return FunctionModel(_answer, name="demo")
