"""Faults of src/wakeful/subagents found while benchmarking it (bench/subagents.py): a failing
test, a guard now that it is fixed. Each runs without a store and with a SQLite store,
whose writes let other tasks run in the middle of a cancellation.

One FunctionModel plays every agent, as in test_subagents_runtime.py.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import anyio
import pytest

from line_channels import until
from wakeful.events import user_input
from wakeful.messages import Message, SystemMessage, ToolMessage, UserMessage
from wakeful.models import FunctionModel, Turn, call, say, use
from wakeful.models.base import ToolDefinition
from wakeful.runtime import Runtime
from wakeful.subagents.definitions import AgentDefinition
from wakeful.subagents.limits import SubagentLimits

pytestmark = pytest.mark.anyio

HELPER = AgentDefinition(name="helper", description="Does small jobs.", role="You help.")
# Several, so that the cascade's writes leave time for a grandchild's watcher to run.
GRANDCHILDREN = 4  # the most a child may run at once by default


def session_of(messages: Sequence[Message]) -> str:
    """ "main", or the child's id, from the system prompt."""
    system = messages[0]
    assert isinstance(system, SystemMessage)
    found = re.search(r"You are a subagent \(\w+, id (sub_[0-9a-f]{8})\)", system.content)
    return found.group(1) if found else "main"


@pytest.mark.parametrize("with_store", [False, True])
async def test_a_cancelled_child_runs_no_model_turn_for_its_childrens_endings(
    with_store: bool, tmp_path: Path
) -> None:
    turns: list[tuple[str, str]] = []  # (session, the last message it read)

    def play(messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> Turn:
        session = session_of(messages)
        text = str(messages[-1].content)
        turns.append((session, text))
        if session == "main":
            if text == "go":
                return use(call("spawn_subagent", agent="helper", task="Delegate.", mode="async"))
            if text.startswith("cancel "):
                return use(call("cancel_subagent", subagent_id=text.split()[1], reason="done"))
            return say("")
        if len(messages) == 2 and "Delegate." in text:
            return use(
                *(
                    call("spawn_subagent", agent="helper", task="Wait.", mode="async")
                    for _ in range(GRANDCHILDREN)
                )
            )
        if len(messages) == 2:  # the grandchild: asks and waits
            return use(call("ask_parent", question="Go on?"))
        return say("")

    async with Runtime(
        model=FunctionModel(play),
        agents=[HELPER],
        with_timers=False,
        store_path=tmp_path / "w.db" if with_store else None,
        subagent_limits=SubagentLimits(answer_timeout_seconds=600),
    ) as rt:
        subagents = rt.subagents
        assert subagents is not None
        await rt.submit(user_input("go"))
        await until(lambda: sum(1 for _, text in turns if text.endswith("Wait.")) == GRANDCHILDREN)
        await anyio.sleep(0.2)
        [child] = await subagents.repository.children("main")
        await rt.submit(user_input(f"cancel {child.id}"))
        with anyio.fail_after(10):
            await rt.wait_idle()
        grandchildren = await subagents.repository.children(child.id)
        assert [r.status for r in grandchildren] == ["cancelled"] * GRANDCHILDREN
        told = next(
            i
            for i, (session, text) in enumerate(turns)
            if session == child.id and "Cancelled by your parent" in text
        )
        after = [text for session, text in turns[told + 1 :] if session == child.id]
        # Told to stop, the child answers that once and is never woken again.
        assert after == []
        texts = [
            m.content
            for m in rt.sessions[child.id].trajectory.messages
            if isinstance(m, UserMessage)
        ]
        assert not any("(subagent.result)" in t for t in texts)


@pytest.mark.parametrize("with_store", [False, True])
async def test_a_finished_child_runs_no_model_turn_for_its_orphans_ending(
    with_store: bool, tmp_path: Path
) -> None:
    turns: list[tuple[str, str]] = []

    def play(messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> Turn:
        session = session_of(messages)
        text = str(messages[-1].content)
        turns.append((session, text))
        if session == "main":
            if text == "go":
                return use(call("spawn_subagent", agent="helper", task="Delegate."))
            return say("")
        if len(messages) == 2 and "Delegate." in text:
            return use(call("spawn_subagent", agent="helper", task="Wait.", mode="async"))
        if len(messages) == 2:  # the grandchild: asks and waits
            return use(call("ask_parent", question="Go on?"))
        done = {m.name for m in messages if isinstance(m, ToolMessage)}
        if "spawn_subagent" in done and "return_result" not in done:
            # The child, once its own child runs: returns without waiting for it.
            return use(call("return_result", result="done without waiting"))
        return say("")

    async with Runtime(
        model=FunctionModel(play),
        agents=[HELPER],
        with_timers=False,
        store_path=tmp_path / "w.db" if with_store else None,
        subagent_limits=SubagentLimits(answer_timeout_seconds=600),
    ) as rt:
        subagents = rt.subagents
        assert subagents is not None
        await rt.submit(user_input("go"))
        with anyio.fail_after(10):
            await rt.wait_idle()
        [child] = await subagents.repository.children("main")
        [grandchild] = await subagents.repository.children(child.id)
        assert (child.status, grandchild.status) == ("done", "cancelled")
        # After its result, the child is never woken for its orphan's cancellation.
        woken = [t for session, t in turns if session == child.id and "(subagent.result)" in t]
        assert woken == []
