"""Model output the session cannot use as it came: duplicate call ids, deep arguments, text the
store cannot encode."""

from __future__ import annotations

import json

import pytest

from wakeful.agent.trajectory import Trajectory, storable
from wakeful.agent.turn_repair import repair_turn, safe_call
from wakeful.messages import (
    MAX_ARGUMENT_DEPTH,
    AssistantMessage,
    ToolCall,
    ToolMessage,
    check_trajectory,
    json_depth,
)
from wakeful.storable_text import replace_lone_surrogates

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("text", "depth"),
    [
        ("{}", 1),
        ('{"a": [[1], {"b": 2}]}', 3),
        ('{"a": "[[[{{{"}', 1),  # brackets inside strings do not count
        ('{"a": "\\"[[", "b": [[]]}', 3),  # nor do they after an escaped quote
        ('{"a": "\\\\", "b": [[]]}', 3),  # an escaped backslash ends nothing
        ("[" * 5000 + "]" * 5000, 5000),
        ("", 0),
    ],
)
def test_json_depth_counts_nesting_without_parsing(text: str, depth: int) -> None:
    assert json_depth(text) == depth


def test_duplicate_and_missing_call_ids_are_made_unique() -> None:
    turn = AssistantMessage(
        tool_calls=[
            ToolCall(id="c1", name="a"),
            ToolCall(id="c1", name="b"),
            ToolCall(id="c1_2", name="c"),  # the name a renaming would pick first
            ToolCall(id="", name="d"),
        ]
    )
    repaired = repair_turn(turn)
    ids = [c.id for c in repaired.message.tool_calls]
    assert ids[0] == "c1" and len(set(ids)) == 4 and all(ids)
    assert repaired.refused == {}
    assert "reused id 'c1'" in repaired.notes[0]
    assert repaired.message.provider_data["wakeful"]["repaired_calls"] == repaired.notes
    answered = [
        repaired.message,
        *(ToolMessage(tool_call_id=i, name="x", content="ok") for i in ids),
    ]
    assert check_trajectory(answered) == []


def test_deep_arguments_are_not_kept_and_the_call_is_refused() -> None:
    deep = ToolCall(id="c1", name="search", arguments='{"q": ' + "[" * 200 + "]" * 200 + "}")
    flat = ToolCall(id="c2", name="search", arguments='{"q": [[["fine"]]]}')
    repaired = repair_turn(AssistantMessage(tool_calls=[deep, flat]))
    kept_deep, kept_flat = repaired.message.tool_calls
    assert json.loads(kept_deep.arguments)  # storable and parseable now
    assert kept_flat == flat
    assert f"more than the {MAX_ARGUMENT_DEPTH} allowed" in repaired.refused["c1"]
    assert safe_call(deep).arguments == kept_deep.arguments
    assert safe_call(flat) is flat


def test_a_turn_with_nothing_wrong_is_left_alone() -> None:
    turn = AssistantMessage(content="hi", tool_calls=[ToolCall(id="c1", name="a")])
    assert repair_turn(turn).message is turn


def test_lone_surrogates_are_replaced_and_pairs_joined() -> None:
    assert replace_lone_surrogates("a\ud83d b \ude00 \ud83d\ude00") == "a\ufffd b \ufffd \U0001f600"
    assert replace_lone_surrogates("plain") == "plain"


async def test_the_trajectory_stores_repaired_text_and_notes_the_repair() -> None:
    trajectory = Trajectory("s")
    broken = AssistantMessage(content="x\ud83d", tool_calls=[ToolCall(id="c", name="n\udc80")])
    (stored,) = await trajectory.append(broken)
    assert isinstance(stored, AssistantMessage)
    assert stored.content == "x\ufffd" and stored.tool_calls[0].name == "n\ufffd"
    assert "lone UTF-16 surrogates" in stored.provider_data["wakeful"]["repaired"]
    stored.model_dump_json()  # encodes now
    fine = AssistantMessage(content="fine")
    assert storable(fine) is fine
