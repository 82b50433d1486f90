"""Splitting a need into the requests it makes."""

from __future__ import annotations

import pytest

from wakeful.discovery.need_parts import need_parts


@pytest.mark.parametrize(
    ("need", "parts"),
    [
        ("get the weather in Paris", ("get the weather in Paris",)),
        (
            "Provide the battery level of car hXQ7. Calculate the drag of a car at 20 m/s.",
            ("Provide the battery level of car hXQ7.", "Calculate the drag of a car at 20 m/s."),
        ),
        (
            "Find flights to Rome and then book a hotel near the station",
            ("Find flights to Rome", "book a hotel near the station"),
        ),
        (
            "list my open issues, and send a summary to the team",
            ("list my open issues", "send a summary to the team"),
        ),
        # "and" joins two objects of one request, not two requests: no split.
        ("compare the price and rating of phones", ("compare the price and rating of phones",)),
        ("查询北京的天气，然后预订一家酒店", ("查询北京的天气，", "预订一家酒店")),
    ],
)  # fmt: skip
def test_a_need_splits_into_its_requests(need: str, parts: tuple[str, ...]) -> None:
    assert need_parts(need) == parts


def test_a_fragment_too_short_to_name_a_tool_joins_its_neighbour() -> None:
    assert need_parts("I need a stylized PDF of our notes. Can you?") == (
        "I need a stylized PDF of our notes. Can you?",
    )
    assert need_parts("Hi. Convert this audio file to text please") == (
        "Hi. Convert this audio file to text please",
    )


@pytest.mark.parametrize("need", ["", "   ", "\n\n"])
def test_an_empty_need_is_one_empty_part(need: str) -> None:
    assert need_parts(need) == ("",)
