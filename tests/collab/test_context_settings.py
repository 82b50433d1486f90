"""Context settings: defaults, per-call overrides, and the errors bad values produce."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from wakeful.collab import (
    CallContextSettings,
    ContextSettings,
    ManualShare,
    ParentView,
    RedactionSettings,
    prepare_child_context,
)
from wakeful.errors import UserError
from wakeful.messages import UserMessage

pytestmark = pytest.mark.anyio


def error_text(exc: pytest.ExceptionInfo[ValidationError]) -> str:
    return str(exc.value)


def test_defaults_work_without_configuration() -> None:
    settings = ContextSettings()
    assert settings.strategy == "adaptive"
    assert settings.automatic.last_turns == 3
    assert settings.automatic.profile is True
    assert settings.automatic.tool_results is None
    assert settings.generated.summarize_after_turns == 10
    assert "card_number" in settings.redaction.builtin


def test_an_unknown_strategy_names_the_four() -> None:
    with pytest.raises(ValidationError) as exc:
        ContextSettings.model_validate({"strategy": "everything"})
    text = error_text(exc)
    assert "unknown context strategy 'everything'" in text
    for name in ("minimal", "manual", "automatic", "llm", "adaptive"):
        assert name in text
    with pytest.raises(ValidationError, match="unknown context strategy 'smart'"):
        CallContextSettings.model_validate({"strategy": "smart"})


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"automatic": {"last_turns": -1}}, "greater than or equal to 0"),
        ({"budget_tokens": -5}, "greater than or equal to 0"),
        ({"automatic": {"item_tokens": 0}}, "greater than 0"),
        ({"strategy": "minimal", "turns": 3}, "Extra inputs are not permitted"),
        ({"redaction": {"builtin": ["visa"]}}, "unknown built-in detector(s) 'visa'"),
        ({"redaction": {"patterns": {"pin": "PIN-(\\d"}}}, "pattern 'pin' is not a valid"),
        ({"redaction": {"patterns": {"any": "x*"}}}, "matches the empty string"),
        ({"redaction": {"fields": ["profile..card"]}}, "is not a dotted key"),
        ({"redaction": {"fields": ["tool.a.b"]}}, "write `tool.<name>`"),
    ],
)
def test_bad_settings_say_what_is_wrong(data: dict[str, object], expected: str) -> None:
    with pytest.raises(ValidationError) as exc:
        ContextSettings.model_validate(data)
    assert expected in error_text(exc)


def test_a_call_narrows_its_agent_settings_but_cannot_unmark_private_fields() -> None:
    agent = ContextSettings(
        strategy="automatic",
        redaction=RedactionSettings(fields=("profile.payment",)),
    )
    call = CallContextSettings(
        strategy="llm",
        last_turns=1,
        budget_tokens=300,
        private_fields=("profile.address",),
        forbidden_fields=("health",),
    )
    merged = agent.with_call(call)
    assert merged.strategy == "llm"
    assert merged.automatic.last_turns == 1
    assert merged.budget_tokens == 300
    assert merged.redaction.fields == ("profile.payment", "profile.address")
    assert merged.generated.forbidden_fields == ("health",)
    assert agent.with_call(CallContextSettings()) == agent
    assert agent.with_call(None) is agent
    with pytest.raises(ValidationError, match="is not a dotted key"):
        CallContextSettings(private_fields=("profile.",))


async def test_a_blank_task_is_refused() -> None:
    with pytest.raises(UserError, match="A delegation needs a task"):
        ParentView(task="  ")


async def test_manual_without_a_list_and_llm_without_a_model_are_refused() -> None:
    view = ParentView(task="Summarise the thread", messages=[UserMessage(content="hello")])
    with pytest.raises(UserError, match="needs a list of what to share"):
        await prepare_child_context(view, ContextSettings(strategy="manual"))
    with pytest.raises(UserError, match="needs a list of what to share"):
        await prepare_child_context(view, ContextSettings(strategy="manual"), share=ManualShare())
    with pytest.raises(UserError, match="llm context strategy needs a model"):
        await prepare_child_context(view, ContextSettings(strategy="llm"))
