"""Adaptive selection: each documented rule, with the reasons it records for the parent."""

from __future__ import annotations

import json

import pytest
from delegation_views import travel_view

from wakeful.collab import (
    AdaptiveSettings,
    ContextSettings,
    ManualShare,
    ParentView,
    RedactionSettings,
    choose_strategy,
    prepare_child_context,
)
from wakeful.messages import AssistantMessage, UserMessage
from wakeful.models import ScriptedModel

pytestmark = pytest.mark.anyio

PRIVATE = RedactionSettings(fields=("profile.payment",))


def clean_view(task: str) -> ParentView:
    """A conversation without private data."""
    return ParentView(
        task=task,
        messages=[
            UserMessage(content="Let's plan the team offsite in Porto."),
            AssistantMessage(content="Sure. Which dates?"),
            UserMessage(content="June 12 to 14, twelve people."),
        ],
        profile={"name": "Rui", "team": "platform"},
    )


def choose(
    view: ParentView, *, has_model: bool = True, share: ManualShare | None = None
) -> tuple[str, tuple[str, ...]]:
    choice = choose_strategy(view, AdaptiveSettings(), PRIVATE, share=share, has_model=has_model)
    return choice.strategy, choice.reasons


def test_an_explicit_sharing_list_means_manual() -> None:
    share = ManualShare(messages=(0, 2), notes=("twelve people",))
    assert choose(clean_view("Book a venue"), share=share) == (
        "manual",
        ("the parent named what to share (2 messages, 1 note)",),
    )


def test_nothing_to_share_means_minimal() -> None:
    assert choose(ParentView(task="Write a long report on everything we discussed")) == (
        "minimal",
        ("the parent has no conversation, profile or results",),
    )


@pytest.mark.parametrize(
    "task",
    ["What is the weather in Porto tomorrow?", "Compute 17.5% of 2,340 EUR.", "明天波爾圖天氣如何"],
)
def test_a_short_self_contained_task_means_minimal(task: str) -> None:
    strategy, reasons = choose(clean_view(task))
    assert strategy == "minimal"
    assert reasons[0].startswith("a short self-contained task (")
    assert reasons[0].endswith("words, no reference to earlier conversation)")


def test_a_short_task_beside_private_data_says_both() -> None:
    strategy, reasons = choose(travel_view("What time is it in Lisbon now?"))
    assert strategy == "minimal"
    assert reasons[1] == (
        "the parent's context holds private data (card_number, card_security_code, iban, "
        "password, profile.payment)"
    )


def test_a_long_self_contained_task_with_private_data_around_means_minimal() -> None:
    task = (
        "Convert the following list of twelve airport codes into city names and countries, "
        "one per line, in alphabetical order of the city: OPO, LIS, FAO, MAD, BCN, CDG, "
        "ORY, LHR, LGW, FRA, MUC, AMS."
    )
    strategy, reasons = choose(travel_view(task))
    assert strategy == "minimal"
    assert reasons[1] == "the task is self-contained, so nothing needs to cross"


@pytest.mark.parametrize(
    ("task", "phrase"),
    [
        ("Fix the bug in the file above and run the tests again", "the file above"),
        ("Book the venue as discussed", "as discussed"),
        ("Email the caterer the menu for the people we talked about", "we talked about"),
    ],
)
def test_a_reference_to_earlier_conversation_means_automatic(task: str, phrase: str) -> None:
    assert choose(clean_view(task)) == (
        "automatic",
        (f"the task refers to earlier conversation ('{phrase}')",),
    )


def test_a_complex_task_means_llm_when_a_model_is_given() -> None:
    task = "Write a report comparing three venues"
    assert choose(clean_view(task)) == ("llm", ("the task is complex ('report')",))
    assert choose(clean_view(task), has_model=False) == (
        "automatic",
        (
            "the task is complex ('report')",
            "no context model was given, so automatic trimming with redaction",
        ),
    )


def test_private_data_and_a_task_needing_the_conversation_means_llm_with_forbidden_fields() -> None:
    strategy, reasons = choose(travel_view("Book the flight we discussed earlier"))
    assert strategy == "llm"
    assert reasons == (
        "the task refers to earlier conversation ('we discussed', 'discussed earlier')",
        "the parent's context holds private data (card_number, card_security_code, iban, "
        "password, profile.payment)",
        "the context model reads the conversation with private values scrubbed",
        "the context model is told to leave out payment",
    )


def test_a_task_sharing_words_with_the_conversation_builds_on_it() -> None:
    task = (
        "Find three hotels in Porto with a meeting room for twelve people, close to the "
        "metro, with breakfast included and a late checkout, under 150 EUR a night."
    )
    assert choose(clean_view(task)) == (
        "automatic",
        ("the task builds on the conversation (shared words: people, porto, twelve)",),
    )


def test_a_medium_task_without_references_gets_the_default() -> None:
    task = (
        "Find three hotels in Madrid with a meeting room for forty guests, close to the "
        "metro, with breakfast included and a late checkout, under 150 EUR a night."
    )
    strategy, reasons = choose(clean_view(task))
    assert strategy == "automatic"
    assert reasons == ("a self-contained task of medium size (28 words): the default",)
    # With the shared-words rule off, a task about the same offsite is "medium" too.
    porto = task.replace("Madrid", "Porto").replace("forty guests", "twelve people")
    off = choose_strategy(
        clean_view(porto),
        AdaptiveSettings(shared_words=0),
        PRIVATE,
        share=None,
        has_model=True,
    )
    assert off.strategy == "automatic"
    assert off.reasons[0].startswith("a self-contained task of medium size")


async def test_the_choice_and_its_reasons_are_recorded_for_the_parent() -> None:
    view = travel_view("Book the flight we discussed earlier")
    model = ScriptedModel([json.dumps({"facts": ["Flight TP1943 on May 3."]})])
    settings = ContextSettings(redaction=PRIVATE)
    context = await prepare_child_context(view, settings, model=model)
    record = context.record
    assert (record.requested, record.strategy) == ("adaptive", "llm")
    assert record.reasons[0] == (
        "the task refers to earlier conversation ('we discussed', 'discussed earlier')"
    )
    assert record.summary().startswith(
        "Context strategy: llm (asked: adaptive), because the task refers to earlier "
        "conversation ('we discussed', 'discussed earlier'); the parent's context holds private "
        "data"
    )
    # The private field the choice named is forbidden to the context writer.
    (request,) = model.requests
    assert "Never include these kinds of data, not even in part: payment." in (
        request.messages[0].content
    )
    short = await prepare_child_context(travel_view("What time is it?"), settings)
    assert (short.record.strategy, short.blocks) == ("minimal", [])


async def test_adaptive_without_a_model_never_asks_for_one() -> None:
    context = await prepare_child_context(
        travel_view("Write a summary of the customer's complaint"),
        ContextSettings(redaction=PRIVATE),
    )
    assert context.record.strategy == "automatic"
    assert context.record.model_calls == 0
