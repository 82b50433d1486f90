"""The llm strategy: one model call writes a structured context; an invalid reply is retried
once, then the automatic strategy takes over; forbidden fields and private values never pass."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest
from delegation_views import leaked

from wakeful.collab import (
    CallContextSettings,
    ContextSettings,
    GeneratedContext,
    ParentView,
    RedactionSettings,
    prepare_child_context,
)
from wakeful.errors import ModelConnectionError
from wakeful.messages import AssistantMessage, Message, SystemMessage, UserMessage
from wakeful.models import FunctionModel, ScriptedModel, Turn
from wakeful.models.base import ToolDefinition

pytestmark = pytest.mark.anyio

SETTINGS = ContextSettings(
    strategy="llm",
    redaction=RedactionSettings(fields=("profile.payment",)),
    generated={"business_rules": ("Never pass payment details.",)},  # type: ignore[arg-type]
)
GOOD = {
    "facts": ["The user flies Porto to Lisbon on May 3.", "Chosen flight: TP1943 at 09:05."],
    "constraints": ["Aisle seat.", "Budget 400 EUR."],
    "open_questions": ["Checked luggage?"],
    "history_summary": "The user searched flights and picked TP1943.",
}


def replies(*texts: str) -> ScriptedModel:
    return ScriptedModel([Turn(text=t) for t in texts])


async def test_the_model_writes_a_structured_context(view: ParentView) -> None:
    model = replies(json.dumps(GOOD))
    context = await prepare_child_context(view, SETTINGS, model=model)
    assert [b.label for b in context.blocks] == [
        "facts",
        "constraints",
        "open questions",
        "history summary",
    ]
    assert all(b.source == "main_agent" for b in context.blocks)
    assert context.blocks[0].text == (
        "- The user flies Porto to Lisbon on May 3.\n- Chosen flight: TP1943 at 09:05."
    )
    assert context.text.startswith("[FROM_MAIN_AGENT] facts\n")
    assert context.record.strategy == "llm"
    assert context.record.model_calls == 1
    assert context.record.fallback is None
    assert len(model.requests) == 1


async def test_the_context_writer_reads_rules_and_task_but_no_private_value(
    view: ParentView,
) -> None:
    model = replies(json.dumps(GOOD))
    call = CallContextSettings(forbidden_fields=("health",))
    await prepare_child_context(view, SETTINGS, call=call, model=model)
    (request,) = model.requests
    system, prompt = request.messages
    assert isinstance(system, SystemMessage) and isinstance(prompt, UserMessage)
    assert "Business rule: Never pass payment details." in system.content
    assert "Never include these kinds of data, not even in part: health." in system.content
    assert "# Task for the subagent\nBook the flight we discussed earlier" in prompt.content
    assert "TP1943 09:05 OPO-LIS 89 EUR" in prompt.content
    assert "- loyalty.tier: gold" in prompt.content
    assert "payment.card" not in prompt.content
    assert leaked(system.content + prompt.content) == []
    assert "You are a travel assistant" not in prompt.content
    # The tool result's fake instruction reaches the writer as quoted data, not as a tag.
    assert "(quoted FROM_MAIN_AGENT) New instruction" in prompt.content


async def test_a_fenced_reply_is_read() -> None:
    model = replies("```json\n" + json.dumps({"facts": ["a fact"]}) + "\n```")
    view = ParentView(task="Do it", messages=[UserMessage(content="hello")])
    context = await prepare_child_context(view, ContextSettings(strategy="llm"), model=model)
    assert context.blocks[0].text == "- a fact"


async def test_an_invalid_reply_is_sent_back_once_with_its_error(view: ParentView) -> None:
    model = replies('{"facts": "not a list"', json.dumps(GOOD))
    context = await prepare_child_context(view, SETTINGS, model=model)
    assert context.record.strategy == "llm"
    assert context.record.model_calls == 2
    retry = model.requests[1].messages
    assert list(retry[:2]) == list(model.requests[0].messages)
    assert retry[2] == AssistantMessage(content='{"facts": "not a list"')
    assert isinstance(retry[3], UserMessage)
    assert retry[3].content.startswith("That reply is not a valid context object (")
    assert '"facts": []' in retry[3].content


async def test_two_invalid_replies_fall_back_to_automatic_and_say_so(view: ParentView) -> None:
    model = replies("Sure! Here is the context: facts...", '{"facts": [1, 2}')
    context = await prepare_child_context(view, SETTINGS, model=model)
    record = context.record
    assert record.requested == "llm"
    assert record.strategy == "automatic"
    assert record.model_calls == 2
    assert record.fallback is not None
    assert record.fallback.startswith("The context model's reply was not a valid context object")
    assert record.fallback.endswith("so the automatic strategy was used instead.")
    assert record.fallback in record.summary()
    assert context.blocks[0].label == "user profile"
    assert leaked(context.text) == []


async def test_a_failing_provider_falls_back_to_automatic(view: ParentView) -> None:
    def fail(messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> Turn:
        return Turn(error=ModelConnectionError("connection reset", provider="test"))

    context = await prepare_child_context(view, SETTINGS, model=FunctionModel(fail))
    assert context.record.strategy == "automatic"
    assert context.record.fallback == (
        "The context model failed (connection reset), so the automatic strategy was used instead."
    )


async def test_items_naming_a_forbidden_field_are_dropped(view: ParentView) -> None:
    generated = {
        "facts": [
            "The user flies on May 3.",
            "Payment: the user's Visa, expiry 09/28.",
            "Health note: needs assistance at the gate.",
        ],
        "constraints": ["Use the saved payment method."],
        "history_summary": "Chose TP1943.",
        "payment": {"card": "4111 1111 1111 1111"},  # a field the schema does not have
    }
    model = replies(json.dumps(generated))
    call = CallContextSettings(forbidden_fields=("payment", "health"))
    context = await prepare_child_context(view, SETTINGS, call=call, model=model)
    assert context.blocks[0].text == "- The user flies on May 3."
    assert [b.label for b in context.blocks] == ["facts", "history summary"]
    assert context.record.withheld == [
        "a generated fact naming forbidden field 'payment'",
        "a generated fact naming forbidden field 'health'",
        "a generated constraint naming forbidden field 'payment'",
    ]
    assert "09/28" not in context.text and leaked(context.text) == []


async def test_private_values_the_model_writes_anyway_are_scrubbed(view: ParentView) -> None:
    generated = {
        "facts": [
            "Card on file: 4111 1111\n1111 1111, CVV 737.",
            "Refund to DE89 3704 0044 0532 0130 00.",
            "Their saved card is a VISA ending 4242.",
        ],
        "history_summary": "Login password: hunter2-Blue",
    }
    context = await prepare_child_context(view, SETTINGS, model=replies(json.dumps(generated)))
    assert leaked(context.text) == []
    assert context.record.redacted.keys() >= {
        "card_number",
        "card_security_code",
        "iban",
        "profile.payment",
        "password",
    }
    assert "[FROM_USER]" not in context.text


async def test_a_long_history_is_summarised_and_cut_to_the_input_limit() -> None:
    messages: list[Message] = []
    for turn in range(1, 31):
        messages.append(UserMessage(content=f"Question {turn}: " + "words " * 30))
        messages.append(AssistantMessage(content=f"Answer {turn}."))
    view = ParentView(task="Write the report", messages=messages)
    model = replies(json.dumps({"history_summary": "Thirty questions about the report."}))
    settings = ContextSettings(
        strategy="llm",
        generated={"summarize_after_turns": 10, "max_input_tokens": 400},  # type: ignore[arg-type]
    )
    context = await prepare_child_context(view, settings, model=model)
    system, prompt = model.requests[0].messages
    assert (
        "The conversation has 30 turns, more than 10: give only a short history_summary"
        in system.content
    )
    assert "Answer 30." in prompt.content
    assert "Question 1:" not in prompt.content
    assert "older messages left out]" in prompt.content
    assert context.blocks[0].text == "Thirty questions about the report."


async def test_the_budget_holds_for_a_generated_context(view: ParentView) -> None:
    generated = GeneratedContext(facts=[f"Fact number {i}: " + "detail " * 20 for i in range(40)])
    model = replies(generated.model_dump_json())
    settings = SETTINGS.model_copy(update={"budget_tokens": 150})
    context = await prepare_child_context(view, settings, model=model)
    assert context.context_tokens <= 150
    assert context.record.trimmed == ["generated facts"]
    assert "Fact number 0:" in context.text
