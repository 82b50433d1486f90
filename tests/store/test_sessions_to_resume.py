"""The store's query for the sessions a start-up must load agrees with the trajectory's own rule
(`Trajectory.needs_model`, `Trajectory.unanswered_calls`) for every way a trajectory can end."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from wakeful.agent.trajectory import Trajectory
from wakeful.errors import StoreError
from wakeful.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from wakeful.store.sqlite import Store

pytestmark = pytest.mark.anyio

CALL = ToolCall.make("run_shell", call_id="call_1", command="make")
CALL_2 = ToolCall.make("run_shell", call_id="call_2", command="make test")
START: list[Message] = [SystemMessage(content="You help."), UserMessage(content="hi", mark="event")]

ENDINGS: dict[str, list[Message]] = {
    "system_only": [SystemMessage(content="You help.")],
    "answered": [*START, AssistantMessage(content="hello")],
    "event_awaiting_model": START,
    "events_awaiting_model": [*START[:1], UserMessage(content="a\nb", mark="events")],
    "note_awaiting_model": [*START, AssistantMessage(content="ok"), UserMessage(content="n")],
    "parallel_answer": [
        *START,
        AssistantMessage(content="ok"),
        UserMessage(content="p", mark="parallel"),
    ],
    "unanswered_call": [*START, AssistantMessage(tool_calls=[CALL])],
    "half_answered_calls": [
        *START,
        AssistantMessage(tool_calls=[CALL, CALL_2]),
        ToolMessage(tool_call_id="call_1", name="run_shell", content="built"),
    ],
    "result_awaiting_model": [
        *START,
        AssistantMessage(tool_calls=[CALL]),
        ToolMessage(tool_call_id="call_1", name="run_shell", content="built"),
    ],
}


def needs_work(messages: list[Message]) -> bool:
    trajectory = Trajectory("s", messages)
    return trajectory.needs_model or bool(trajectory.unanswered_calls())


async def test_the_query_agrees_with_the_trajectory_for_every_ending(tmp_path: Path) -> None:
    async with await Store.open(tmp_path / "wakeful.db") as store:
        for session, messages in ENDINGS.items():
            await store.append_messages(session, messages)
        # Another session's later messages do not hide where this one ends.
        await store.append_messages("answered_later", [*START, AssistantMessage(tool_calls=[CALL])])
        await store.append_messages(
            "answered_later",
            [
                ToolMessage(tool_call_id="call_1", name="run_shell", content="ok"),
                AssistantMessage(content="done"),
            ],
        )
        expected = sorted(s for s, messages in ENDINGS.items() if needs_work(messages))
        assert await store.sessions_to_resume() == expected
        assert expected == [
            "event_awaiting_model",
            "events_awaiting_model",
            "half_answered_calls",
            "note_awaiting_model",
            "result_awaiting_model",
            "unanswered_call",
        ]


async def test_a_last_message_that_is_not_json_counts_as_needing_work(tmp_path: Path) -> None:
    """Loading that session reports the damage, as a start-up that loaded everything did."""
    db = tmp_path / "wakeful.db"
    async with await Store.open(db) as store:
        await store.append_messages("damaged", [*START, AssistantMessage(content="ok")])
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE trajectory SET data = '{not json' WHERE seq = 3")
    conn.close()
    async with await Store.open(db) as store:
        assert await store.sessions_to_resume() == ["damaged"]
        with pytest.raises(StoreError, match="trajectory message #3"):
            await store.load_trajectory("damaged")
