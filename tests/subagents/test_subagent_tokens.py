"""The tokens of a delegation tree count across a restart: a running child's tokens are stored
while it works (so a crash keeps them), a child resumed after a restart adds this run's tokens
to those stored, and `subagents.max_tokens_per_tree` cannot be passed by restarting.

One FunctionModel plays every agent (as in test_subagents_runtime.py); each turn reports as
many tokens as it has words and tool calls.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path

import anyio
import pytest

from wakeful.core.records import SubagentRecord
from wakeful.core.repositories import SubagentRepository
from wakeful.events import user_input
from wakeful.messages import Message, SystemMessage, ToolMessage, UserMessage
from wakeful.models import FunctionModel, Turn, call, say, use
from wakeful.models.base import ToolDefinition
from wakeful.runtime import Runtime
from wakeful.store.sqlite import Store
from wakeful.subagents.definitions import AgentDefinition
from wakeful.subagents.limits import SubagentLimits
from wakeful.subagents.manager import MemorySubagents

pytestmark = pytest.mark.anyio

HELPER = AgentDefinition(name="helper", description="Does small jobs.", role="You help.")
# The child's first turn: 60 words and a call, 61 tokens.
FIRST_TURN_TOKENS = 61


def is_child(messages: Sequence[Message]) -> bool:
    system = messages[0]
    assert isinstance(system, SystemMessage)
    return (
        re.search(r"You are a subagent \(helper, id sub_[0-9a-f]{8}\)", system.content) is not None
    )


def tool_results(messages: Sequence[Message], name: str) -> list[ToolMessage]:
    return [m for m in messages if isinstance(m, ToolMessage) and m.name == name]


async def eventually(condition: Callable[[], Awaitable[bool]], seconds: float = 10) -> None:
    """Wait until the async `condition()` holds (a stored record has no event to await)."""
    with anyio.fail_after(seconds):
        while True:
            if await condition():
                return
            await anyio.sleep(0.05)


async def only_child(store: Store) -> SubagentRecord:
    [record] = await store.subagents.children("main")
    return record


def play(messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> Turn:
    """The parent spawns one child; the child spends 61 tokens and asks its parent (who never
    answers); after the restart (the question answered "lost") it tries to spawn a child of
    its own, in a one-call turn (1 token)."""
    if not is_child(messages):
        if str(messages[-1].content) == "go":
            return use(call("spawn_subagent", agent="helper", task="A big job.", mode="async"))
        return say("")
    if not tool_results(messages, "ask_parent"):
        return use(call("ask_parent", question="May I go on?"), text="word " * 60)
    if not tool_results(messages, "spawn_subagent"):
        return use(call("spawn_subagent", agent="helper", task="A part of it.", mode="async"))
    return say("")


async def test_a_tree_cannot_pass_its_token_limit_by_restarting(tmp_path: Path) -> None:
    # 62 lets the child's 61 + 1 tokens run (a child is cancelled over the limit), but no spawn
    # once the tree is at the limit.
    limits = SubagentLimits(max_tokens_per_tree=62, answer_timeout_seconds=600)
    model = FunctionModel(play)

    def runtime() -> Runtime:
        return Runtime(
            model=model,
            agents=[HELPER],
            with_timers=False,
            store_path=tmp_path / "w.db",
            subagent_limits=limits,
        )

    async with runtime() as rt:
        assert rt.store is not None
        store = rt.store
        await rt.submit(user_input("go"))

        async def recorded() -> bool:
            children = await store.subagents.children("main")
            return bool(children) and children[0].tokens == FIRST_TURN_TOKENS

        # Stored while the child still works (it waits for an answer that never comes).
        await eventually(recorded)
    # Closed without the child ending, as a crash would leave it: its tokens are kept.
    async with await Store.open(tmp_path / "w.db") as store:
        child = await only_child(store)
        assert (child.status, child.tokens) == ("running", FIRST_TURN_TOKENS)

    async with runtime() as rt:
        assert rt.store is not None
        with anyio.fail_after(20):
            await rt.wait_idle()
        messages = rt.sessions[child.id].trajectory.messages
        [refused] = tool_results(messages, "spawn_subagent")
        assert refused.status == "error"
        assert refused.content == (
            f"The children of this tree used {FIRST_TURN_TOKENS + 1:,} tokens, the limit "
            "(subagents.max_tokens_per_tree = 62): finish the work yourself."
        )
        # Its stored tokens are those of both runs, not of this run alone.
        assert (await only_child(rt.store)).tokens >= FIRST_TURN_TOKENS + 1


async def test_a_tree_over_its_limit_after_a_restart_cancels_the_child_that_spends(
    tmp_path: Path,
) -> None:
    """The same tree with a limit of 61: the child resumed after the restart spends one token
    more, and is cancelled for its tree, whose earlier tokens count."""

    def spender(messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> Turn:
        if is_child(messages) and tool_results(messages, "ask_parent"):
            return use(call("send_progress", text="still at it"))
        return play(messages, tools)

    limits = SubagentLimits(max_tokens_per_tree=61, answer_timeout_seconds=600)

    def runtime() -> Runtime:
        return Runtime(
            model=FunctionModel(spender),
            agents=[HELPER],
            with_timers=False,
            store_path=tmp_path / "w.db",
            subagent_limits=limits,
        )

    async with runtime() as rt:
        assert rt.store is not None
        store = rt.store
        await rt.submit(user_input("go"))

        async def recorded() -> bool:
            children = await store.subagents.children("main")
            return bool(children) and children[0].tokens == FIRST_TURN_TOKENS

        await eventually(recorded)
    async with runtime() as rt:
        assert rt.store is not None
        with anyio.fail_after(20):
            await rt.wait_idle()
        child = await only_child(rt.store)
        assert child.status == "cancelled"
        assert child.error == "its tree used over 61 tokens (subagents.max_tokens_per_tree)"
        main = rt.sessions["main"].trajectory.messages
        told = [m.content for m in main if isinstance(m, UserMessage) and child.id in m.content]
        assert any("was cancelled: its tree used over 61 tokens" in text for text in told)


async def test_a_runtime_closed_while_a_child_works_keeps_what_it_spent(tmp_path: Path) -> None:
    """Closed at once after the child's first turn, before its tokens were due to be stored:
    they are stored as the runtime stops."""
    limits = SubagentLimits(answer_timeout_seconds=600)
    runtime = Runtime(
        model=FunctionModel(play),
        agents=[HELPER],
        with_timers=False,
        store_path=tmp_path / "w.db",
        subagent_limits=limits,
    )
    async with runtime as rt:
        await rt.submit(user_input("go"))

        def asked() -> bool:
            main = rt.sessions.get("main")
            return main is not None and any(
                "(subagent.question) May I go on?" in str(m.content)
                for m in main.trajectory.messages
            )

        with anyio.fail_after(10):
            while not asked():  # noqa: ASYNC110
                await anyio.sleep(0.02)
    async with await Store.open(tmp_path / "w.db") as store:
        child = await only_child(store)
    assert (child.status, child.tokens) == ("running", FIRST_TURN_TOKENS)


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def repository(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[SubagentRepository]:
    """The repository of a runtime without a store, of a SQLite store, and of a PostgreSQL
    store on a real server (skipped where PostgreSQL is missing)."""
    if request.param == "memory":
        yield MemorySubagents()
    elif request.param == "sqlite":
        async with await Store.open(tmp_path / "w.db") as store:
            yield store.subagents
    else:
        from wakeful.store.postgres import PostgresStore

        url: str = request.getfixturevalue("postgres_url")
        async with await PostgresStore.open(url) as postgres:
            yield postgres.subagents


def a_child(subagent_id: str = "sub_0000000a") -> SubagentRecord:
    return SubagentRecord(
        id=subagent_id,
        parent="main",
        parent_call="call_1",
        root=subagent_id,
        depth=1,
        agent="helper",
        task="A job.",
        mode="async",
        status="running",
        created_at="2026-12-02T03:00:00+00:00",
    )


async def test_stored_tokens_are_raised_never_lowered(repository: SubagentRepository) -> None:
    await repository.add(a_child())
    await repository.record_tokens("sub_0000000a", 50)
    await repository.record_tokens("sub_0000000a", 20)
    stored = await repository.get("sub_0000000a")
    assert stored is not None and stored.tokens == 50
    await repository.record_tokens("sub_0000000a", 70)
    # Its ending with fewer tokens (a count of one run only) keeps the most stored.
    assert await repository.finish("sub_0000000a", "done", result='"ok"', tokens=30)
    stored = await repository.get("sub_0000000a")
    assert stored is not None and (stored.status, stored.tokens) == ("done", 70)
    # Tokens of a child that is not stored change nothing and fail nothing.
    await repository.record_tokens("sub_0000000b", 10)
    assert await repository.get("sub_0000000b") is None
