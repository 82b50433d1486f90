"""Router rules: kinds and explicit routes first, the classifier only for free user text."""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import pytest

from wakeful.agent.router import Classifier, Router, Strategy
from wakeful.errors import ModelConnectionError
from wakeful.events import Event, Source, user_input, user_interrupt
from wakeful.messages import Message
from wakeful.models import FunctionModel, Turn, say
from wakeful.models.base import ToolDefinition

pytestmark = pytest.mark.anyio


def event(kind: str, source: str = "system", **kw: object) -> Event:
    return Event(kind=kind, source=Source(type=source, id="x"), **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("ev", "strategy", "stop"),
    [
        (user_interrupt(), Strategy.CANCEL, True),
        (event("agent.interrupt", "agent"), Strategy.CANCEL, True),
        (event("supervisor.instruction", "supervisor"), Strategy.CANCEL, False),
        (event("system.alert", urgency="urgent"), Strategy.CANCEL, False),
        (event("system.alert"), Strategy.QUEUE, False),
        (event("tool.result", "tool"), Strategy.QUEUE, False),
        (event("timer.trigger"), Strategy.QUEUE, False),
        (user_input("STOP"), Strategy.CANCEL, True),
        (user_input("停止"), Strategy.CANCEL, True),
        (user_input("stop the music playlist when it ends"), Strategy.QUEUE, False),
        (
            event("user.input", "user", content="x", context={"route": "parallel"}),
            Strategy.PARALLEL,
            False,
        ),
    ],
)
async def test_rules(ev: Event, strategy: Strategy, stop: bool) -> None:
    decision = await Router().decide(ev, busy=True)
    assert (decision.strategy, decision.stop) == (strategy, stop)
    assert decision.reason


async def test_classifier_decides_free_text_while_busy() -> None:
    answers = {"stop!": "cancel", "what's the weather?": "Parallel.", "reply in Japanese": "queue"}

    def classify(msgs: Sequence[Message], tools: Sequence[ToolDefinition]) -> str:
        text = msgs[-1].content.split("User message: ", 1)[1]
        assert "Current task: writing the report" in msgs[-1].content
        return answers[text]

    router = Router(classifier=Classifier(FunctionModel(classify)), stop_words=frozenset())
    results = {
        text: await router.decide(user_input(text), busy=True, task_summary="writing the report")
        for text in answers
    }
    assert results["stop!"].strategy == Strategy.CANCEL and results["stop!"].stop
    assert results["what's the weather?"].strategy == Strategy.PARALLEL
    assert results["reply in Japanese"].strategy == Strategy.QUEUE


async def test_classifier_is_not_asked_when_the_agent_is_idle() -> None:
    model = FunctionModel(lambda m, t: "parallel")
    decision = await Router(classifier=Classifier(model)).decide(user_input("hi"), busy=False)
    assert decision.strategy == Strategy.QUEUE and model.requests == []


@pytest.mark.parametrize("answer", ["maybe", "", "I think you should cancel"])
async def test_unreadable_classifier_answers_fall_back_to_the_rules(answer: str) -> None:
    router = Router(classifier=Classifier(FunctionModel(lambda m, t: answer)))
    decision = await router.decide(user_input("hmm"), busy=True)
    assert decision.strategy == Strategy.QUEUE


async def test_classifier_errors_fall_back_to_the_rules() -> None:
    def broken(msgs: Sequence[Message], tools: Sequence[ToolDefinition]) -> Turn:
        return Turn(text="x", error=ModelConnectionError("down", provider="t"))

    router = Router(classifier=Classifier(FunctionModel(broken), timeout=1))
    with anyio.fail_after(2):
        decision = await router.decide(user_input("hmm"), busy=True)
    assert decision.strategy == Strategy.QUEUE


async def test_rules_win_over_the_classifier() -> None:
    model = FunctionModel(lambda m, t: say("parallel"))
    router = Router(classifier=Classifier(model))
    decision = await router.decide(user_interrupt(), busy=True)
    assert decision.strategy == Strategy.CANCEL and model.requests == []
