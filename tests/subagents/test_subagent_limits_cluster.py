"""`subagents.max_tree` across the workers of a cluster: two children of one tree, each run by
another worker, spawn at the same moment; the store counts the tree's running children as it
stores each record, so only one of the two starts.

The tree: `chat`'s child R and R's child A, run by two workers (A's session moved to the other
worker, as after a takeover, when both landed on one). With `max_tree` = 3, R and A spawning on
their workers race for the last place; the context model takes a while, so both have passed the
workers' own counts before either record is stored.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("psycopg", reason="psycopg is missing: pip install -e '.[postgres]'")

import psycopg

from wakeful.collab import CallContextSettings
from wakeful.messages import AssistantMessage, Message, SystemMessage
from wakeful.models import FunctionModel, Turn, call, say, use
from wakeful.models.base import ToolDefinition
from wakeful.runtime import Runtime
from wakeful.runtime.worker import SessionCluster
from wakeful.subagents.definitions import AgentDefinition
from wakeful.subagents.limits import SubagentLimits
from wakeful.subagents.manager import SubagentError

pytestmark = pytest.mark.anyio

HELPER = AgentDefinition(name="helper", description="Does small jobs.", role="You help.")
LIMITS = SubagentLimits(max_depth=3, max_tree=3, answer_timeout_seconds=600)
LLM = CallContextSettings(strategy="llm")


def play(messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> Turn:
    """A child waits on its parent (so it keeps running); `chat` says nothing."""
    system = messages[0]
    assert isinstance(system, SystemMessage)
    if re.search(r"You are a subagent", system.content):
        return use(call("ask_parent", question="Shall I go on?"))
    return say("")


async def write_context(messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> str:
    await anyio.sleep(0.5)
    return '{"facts": ["The work has parts."]}'


def sql(url: str, query: str, params: tuple[object, ...] = ()) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        cursor = conn.execute(query, params)
        return cursor.fetchall() if cursor.description else []


@asynccontextmanager
async def worker(url: str, workdir: Path, name: str) -> AsyncIterator[Runtime]:
    rt = Runtime(
        model=FunctionModel(play),
        parallel_model=FunctionModel(write_context),
        agents=[HELPER],
        subagent_limits=LIMITS,
        workdir=workdir,
        store_url=url,
        with_timers=False,
    )
    rt.cluster = SessionCluster(lease_seconds=5, name=name)
    async with rt:
        yield rt


async def until(condition: Any, seconds: float = 15) -> None:
    with anyio.fail_after(seconds):
        while not condition():  # noqa: ASYNC110
            await anyio.sleep(0.05)


def asking(rt: Runtime, session: str) -> bool:
    """Whether the child's session is loaded on `rt` and waits on its ask_parent call."""
    found = rt.sessions.get(session)
    return found is not None and any(
        call.name == "ask_parent"
        for message in found.trajectory.messages
        if isinstance(message, AssistantMessage)
        for call in message.tool_calls
    )


async def runs_on(session: str, *workers: Runtime) -> Runtime:
    """The worker whose copy of the child's session waits on its ask_parent call."""
    await until(lambda: any(asking(rt, session) for rt in workers))
    return next(rt for rt in workers if asking(rt, session))


async def test_two_workers_spawning_in_one_tree_at_once_stop_at_max_tree(
    postgres_url: str, tmp_path: Path
) -> None:
    async with (
        worker(postgres_url, tmp_path / "a", "alpha") as alpha,
        worker(postgres_url, tmp_path / "b", "beta") as beta,
    ):
        assert alpha.subagents is not None
        lead, _ = await alpha.subagents.spawn(
            "chat", "c0", agent="helper", task="Lead the work.", mode="async"
        )
        # A child's session runs on whichever worker claims it first.
        lead_rt = await runs_on(lead.id, alpha, beta)
        assert lead_rt.subagents is not None
        part, _ = await lead_rt.subagents.spawn(
            lead.id, "c1", agent="helper", task="Part one.", mode="async"
        )
        part_rt = await runs_on(part.id, alpha, beta)
        if part_rt is lead_rt:
            # The other worker takes A's session over (as after this one froze past its lease).
            part_rt = beta if lead_rt is alpha else alpha
            assert part_rt.cluster is not None and part_rt.cluster.ownership is not None
            sql(
                postgres_url,
                "UPDATE session_leases SET owner = %s, epoch = epoch + 1, "
                "expires_at = clock_timestamp() + interval '1 minute' WHERE session = %s",
                (part_rt.cluster.ownership.worker_id, part.id),
            )
            await part_rt.cluster.ownership.route(part.id)
            await until(lambda: part.id not in lead_rt.sessions and asking(part_rt, part.id))
        assert part_rt.subagents is not None and part_rt.subagents.child(part.id) is not None

        started: list[str] = []
        refused: list[str] = []

        async def spawn(rt: Runtime, parent: str, task: str) -> None:
            assert rt.subagents is not None
            try:
                record, _ = await rt.subagents.spawn(
                    parent, f"call-{task}", agent="helper", task=task, mode="async", call=LLM
                )
            except SubagentError as exc:
                refused.append(str(exc))
            else:
                started.append(record.id)

        async with anyio.create_task_group() as group:
            group.start_soon(spawn, lead_rt, lead.id, "Part two.")
            group.start_soon(spawn, part_rt, part.id, "The smallest part.")
        assert len(started) == 1
        assert refused == [
            "3 children of this tree are running, the most at once (subagents.max_tree = 3): "
            "wait for some to finish."
        ]
        rows = sql(
            postgres_url,
            "SELECT id FROM subagents WHERE root = %s AND status = 'running'",
            (lead.id,),
        )
        assert sorted(r[0] for r in rows) == sorted([lead.id, part.id, *started])
