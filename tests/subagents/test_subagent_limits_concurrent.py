"""The limits on running children hold when two sessions spawn at the same moment.

One turn's spawn_subagent calls run one after another (the tool may write, so it never runs
alongside others: see wakeful.tools.pipeline.concurrency); spawns overlap when two sessions of
one tree spawn at once. Here a lead child has a worker at work and spawns a second worker while
that worker spawns a leaf, both with the `llm` context strategy, whose context model takes a
while: both spawns are counted before either is stored. With `max_tree` = 3 (lead and worker
running) exactly one of the two may start; the other gets the limit and what to do. Without a
store, on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import anyio
import pytest

from servers.postgres import RuntimeStoreUnderTest
from wakeful.events import user_input
from wakeful.messages import Message, SystemMessage, ToolMessage
from wakeful.models import FunctionModel, Turn, call, say, use
from wakeful.models.base import ToolDefinition
from wakeful.runtime import Runtime
from wakeful.subagents.definitions import AgentDefinition
from wakeful.subagents.limits import SubagentLimits

pytestmark = pytest.mark.anyio

AGENTS = [
    AgentDefinition(name=name, description=f"The {name}.", role=f"You are the {name}.")
    for name in ("lead", "worker", "leaf")
]
LIMITS = SubagentLimits(max_depth=3, max_tree=3, answer_timeout_seconds=600)
# How long the context model takes to write a child's context: long enough that two spawns
# started together are both past their limit check before either is stored.
CONTEXT_SECONDS = 0.5


def agent_of(messages: Sequence[Message]) -> str:
    system = messages[0]
    assert isinstance(system, SystemMessage)
    found = re.search(r"You are a subagent \((\w+), id sub_\w+\)", system.content)
    return found.group(1) if found else "main"


def spawns(messages: Sequence[Message]) -> list[ToolMessage]:
    return [m for m in messages if isinstance(m, ToolMessage) and m.name == "spawn_subagent"]


def play(messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> Turn:
    agent = agent_of(messages)
    done = spawns(messages)
    if agent == "main" and not done:
        return use(call("spawn_subagent", agent="lead", task="Lead the work.", mode="async"))
    if agent == "lead" and len(done) < 2:
        # The first worker at once; the second as the first spawns its leaf.
        strategy = "minimal" if not done else "llm"
        task = "Work on part one." if not done else "Work on part two."
        return use(
            call(
                "spawn_subagent", agent="worker", task=task, mode="async", context_strategy=strategy
            )
        )
    if agent == "worker" and "part one" in str(messages[1].content) and not done:
        return use(
            call(
                "spawn_subagent",
                agent="leaf",
                task="Do the smallest part.",
                mode="async",
                context_strategy="llm",
            )
        )
    if agent == "main":
        return say("")
    return say(f"{agent} done")


async def write_context(messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> str:
    await anyio.sleep(CONTEXT_SECONDS)
    return '{"facts": ["The work has two parts."], "history_summary": "Work was split."}'


async def spawn_race(**options: Any) -> list[ToolMessage]:
    """Run the scene; the results of the two spawns that raced (lead's second, worker's)."""
    context_model = FunctionModel(write_context)
    async with Runtime(
        model=FunctionModel(play),
        parallel_model=context_model,
        agents=AGENTS,
        subagent_limits=LIMITS,
        with_timers=False,
        **options,
    ) as rt:
        await rt.submit(user_input("go"))
        with anyio.fail_after(30):
            await rt.wait_idle()
        raced: list[ToolMessage] = []
        for session in rt.sessions.values():
            agent = agent_of(session.trajectory.messages)
            results = spawns(session.trajectory.messages)
            if agent == "lead":
                assert len(results) == 2 and results[0].status == "ok"
                raced.append(results[1])
            elif agent == "worker" and results:
                raced.append(results[0])
        # The spawn refused was refused before its context was made: the one that started
        # held its place meanwhile.
        assert len(context_model.requests) == 1
        return raced


def assert_one_started(raced: list[ToolMessage]) -> None:
    assert len(raced) == 2
    assert sorted(r.status for r in raced) == ["error", "ok"]
    [refused] = [r for r in raced if r.status == "error"]
    assert refused.content.startswith(
        "3 children of this tree are running, the most at once (subagents.max_tree = 3): wait "
        "for some to finish."
    )


async def test_two_sessions_of_a_tree_spawning_at_once_stop_at_max_tree() -> None:
    assert_one_started(await spawn_race())


async def test_two_sessions_of_a_tree_spawning_at_once_stop_at_max_tree_with_a_store(
    runtime_store: RuntimeStoreUnderTest,
) -> None:
    assert_one_started(await spawn_race(**runtime_store.options))
