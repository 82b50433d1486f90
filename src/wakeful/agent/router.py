"""The router: for each event, cancel what runs now, queue it, or answer it in parallel.

Rules decide first (an explicit route in the event, its kind, its urgency); free user text that
the rules leave open may go to an optional classifier, a small model with a timeout that falls
back to the rules. The router only decides; the session carries the decision out.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import StrEnum

import anyio

from ..errors import ModelAPIError
from ..events import (
    AGENT_INTERRUPT,
    SUBAGENT_PROGRESS,
    SUPERVISOR_INSTRUCTION,
    TOOL_PROGRESS,
    USER_INPUT,
    USER_INTERRUPT,
    Event,
)
from ..messages import SystemMessage, UserMessage
from ..models.base import Model, ModelRequest

log = logging.getLogger(__name__)


class Strategy(StrEnum):
    CANCEL = "cancel"
    QUEUE = "queue"
    PARALLEL = "parallel"


@dataclass(frozen=True, slots=True)
class Decision:
    """How to handle one event.

    `stop` means: cancel running work, do not move it to the background. `wake` False means the
    event rides along with the next batch but does not by itself start a model turn (progress
    updates: the agent sees the latest one when something else wakes it).
    """

    strategy: Strategy
    stop: bool = False
    reason: str = ""
    wake: bool = True


DEFAULT_STOP_WORDS = frozenset(
    {"stop", "stop!", "cancel", "abort", "halt", "/stop", "停", "停止", "停下", "取消", "別做了"}
)

CLASSIFIER_PROMPT = """\
You route messages a user sends to an assistant that is busy with a task.
Answer with exactly one word:
- cancel: the user wants the current work stopped or changed now ("stop!", "wait, wrong file").
- parallel: an independent quick question unrelated to the current task ("what's the weather?").
- queue: an extra instruction or information for the current task ("reply in Japanese").
"""


class Classifier:
    """Decides free user text with a small model; any failure or timeout means "no opinion"."""

    def __init__(self, model: Model, *, timeout: float = 2.0) -> None:
        self.model = model
        self.timeout = timeout

    async def classify(self, text: str, *, task_summary: str) -> Strategy | None:
        request = ModelRequest(
            messages=[
                SystemMessage(content=CLASSIFIER_PROMPT),
                UserMessage(content=f"Current task: {task_summary}\nUser message: {text}"),
            ]
        )
        with anyio.move_on_after(self.timeout):
            try:
                end = await self.model.complete(request)
            except ModelAPIError as exc:
                log.warning("router classifier failed, falling back to rules: %s", exc)
                return None
            words = end.message.content.strip().lower().split()
            word = words[0].strip(".,:;!\"'") if words else ""
            try:
                return Strategy(word)
            except ValueError:
                log.warning("router classifier answered %r; falling back to rules", word)
                return None
        log.warning("router classifier timed out after %.1fs; falling back to rules", self.timeout)
        return None


class Router:
    """Rules first, then the optional classifier for free user text while the agent is busy."""

    def __init__(
        self,
        *,
        classifier: Classifier | None = None,
        stop_words: frozenset[str] = DEFAULT_STOP_WORDS,
    ) -> None:
        self.classifier = classifier
        self.stop_words = frozenset(w.lower() for w in stop_words)

    def decide_by_rules(self, event: Event) -> Decision | None:
        route = event.context.get("route")
        if isinstance(route, str) and route in Strategy.__members__.values():
            stop = bool(event.context.get("stop", event.kind == USER_INTERRUPT))
            return Decision(Strategy(route), stop=stop, reason=f"the event carries route={route!r}")
        if event.kind == USER_INTERRUPT:
            return Decision(Strategy.CANCEL, stop=True, reason="the user interrupted")
        if event.kind == AGENT_INTERRUPT:
            return Decision(Strategy.CANCEL, stop=True, reason="another agent interrupted")
        if event.kind == SUPERVISOR_INSTRUCTION:
            return Decision(Strategy.CANCEL, reason="a supervisor instruction arrived")
        if event.urgency == "urgent":
            return Decision(Strategy.CANCEL, reason=f"an urgent {event.kind} event arrived")
        if event.kind == USER_INPUT and event.text.strip().lower() in self.stop_words:
            return Decision(Strategy.CANCEL, stop=True, reason="the user asked to stop")
        if event.kind in (TOOL_PROGRESS, SUBAGENT_PROGRESS):
            return Decision(Strategy.QUEUE, reason="progress waits for the next batch", wake=False)
        if event.kind != USER_INPUT or event.source.type != "user":
            return Decision(Strategy.QUEUE, reason=f"{event.kind} is not urgent")
        return None

    async def decide(self, event: Event, *, busy: bool, task_summary: str = "") -> Decision:
        decision = self.decide_by_rules(event)
        if decision is not None:
            return decision
        if busy and self.classifier is not None:
            strategy = await self.classifier.classify(event.text, task_summary=task_summary)
            if strategy is not None:
                reason = f"the router classified the user's message as {strategy.value}"
                return Decision(strategy, stop=strategy is Strategy.CANCEL, reason=reason)
        return Decision(Strategy.QUEUE, reason="user text defaults to the queue")
