"""Runtimes as workers sharing one real PostgreSQL (`rt.cluster = SessionCluster()`): a session
runs on the worker that owns it, an event that arrives on another worker is handled by the
owner, a clean stop hands the session over at once, a worker takes over a session another left
cut off mid-turn (repaired, its running task reported lost), and one that loses its lease drops
the session."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path

import anyio
import pytest

pytest.importorskip("psycopg", reason="psycopg is missing: pip install -e '.[postgres]'")

import anyio.lowlevel
import psycopg

from wakeful.core.records import TaskRecord
from wakeful.errors import UserError
from wakeful.events import user_input
from wakeful.messages import (
    AssistantMessage,
    Message,
    ToolCall,
    UserMessage,
    check_trajectory,
)
from wakeful.models import FunctionModel, Turn, call, say, use
from wakeful.models.base import ToolDefinition
from wakeful.runtime import Runtime
from wakeful.runtime.worker import SessionCluster
from wakeful.store.postgres import PostgresStore

pytestmark = pytest.mark.anyio


def answer(msgs: Sequence[Message], tools: Sequence[ToolDefinition]) -> Turn:
    last = msgs[-1]
    if isinstance(last, UserMessage):
        return use(call("reply_to_user", text=f"You said: {last.content}"))
    return say("")


@asynccontextmanager
async def worker(
    url: str, workdir: Path, name: str, lease_s: float = 2.0
) -> AsyncIterator[Runtime]:
    rt = Runtime(model=FunctionModel(answer), workdir=workdir, store_url=url)
    rt.cluster = SessionCluster(lease_seconds=lease_s, name=name)
    async with rt:
        yield rt


async def stored(url: str, session: str) -> tuple[list[Message], dict[str, int]]:
    async with await PostgresStore.open(url, pool_size=1) as store:
        return await store.trajectories.load(session), await store.events.count(session)


async def answered(url: str, session: str, count: int) -> list[Message]:
    """The trajectory of `session` once `count` user messages are in it, all answered."""
    with anyio.fail_after(15):
        while True:
            trajectory, counts = await stored(url, session)
            users = [m for m in trajectory if isinstance(m, UserMessage)]
            if (
                len(users) >= count
                and not counts.get("pending")
                and not check_trajectory(trajectory)
            ):
                last = trajectory[-1]
                if isinstance(last, AssistantMessage) and not last.tool_calls:
                    return trajectory
            await anyio.sleep(0.05)


def said(trajectory: list[Message]) -> list[str]:
    return [str(m.content) for m in trajectory if isinstance(m, UserMessage)]


async def test_an_event_arriving_elsewhere_is_handled_by_the_owner(
    postgres_url: str, tmp_path: Path
) -> None:
    async with (
        worker(postgres_url, tmp_path / "a", "alpha") as alpha,
        worker(postgres_url, tmp_path / "b", "beta") as beta,
    ):
        await alpha.submit(user_input("hello", session="chat"))
        await answered(postgres_url, "chat", 1)
        # Alpha took the session, or beta claimed it first on the stored event's wake-up.
        owner, other = (alpha, beta) if "chat" in alpha.sessions else (beta, alpha)
        assert "chat" in owner.sessions and "chat" not in other.sessions
        decision = await other.submit(user_input("again", session="chat"))
        assert "another worker owns the session" in decision.reason
        trajectory = await answered(postgres_url, "chat", 2)
        assert said(trajectory) == ["hello", "again"]
        assert "chat" in owner.sessions and "chat" not in other.sessions
    assert check_trajectory(trajectory) == []


async def test_a_clean_stop_hands_the_session_to_another_worker_at_once(
    postgres_url: str, tmp_path: Path
) -> None:
    async with worker(postgres_url, tmp_path / "b", "beta", lease_s=30) as beta:
        async with worker(postgres_url, tmp_path / "a", "alpha", lease_s=30) as alpha:
            await alpha.submit(user_input("one", session="chat"))
            await answered(postgres_url, "chat", 1)
        # Taken over at once (here, or by beta's claim on the stored event's wake-up).
        await beta.submit(user_input("two", session="chat"))
        trajectory = await answered(postgres_url, "chat", 2)
        assert said(trajectory) == ["one", "two"]
        assert "chat" in beta.sessions


async def test_a_session_cut_off_by_a_dead_worker_is_repaired_and_continued(
    postgres_url: str, tmp_path: Path
) -> None:
    # A worker died mid-turn: a call without its result, a task running, an event pending,
    # and its lease expired.
    async with await PostgresStore.open(postgres_url, pool_size=2) as store:
        dead = await store.register_worker(lease_seconds=0.3, name="dead")
        lease = await dead.acquire("chat")
        assert lease is not None
        view = store.fenced(lease)
        first = user_input("build it", session="chat")
        await store.events.add(first)
        await view.trajectories.append(
            "chat",
            [
                UserMessage(content="build it", event_ids=[first.id]),
                AssistantMessage(
                    content="", tool_calls=[ToolCall(id="c1", name="run_shell", arguments="{}")]
                ),
            ],
        )
        await view.events.mark([first.id], "consumed")
        await view.task_records.save(
            TaskRecord(
                id="t1",
                session="chat",
                tool="run_shell",
                call_id="c0",
                description="a long build",
                state="running",
                background=True,
                started_at=datetime.now(UTC),
            )
        )
        await store.events.add(user_input("still there?", session="chat"))
        await anyio.sleep(0.5)
    async with worker(postgres_url, tmp_path / "b", "heir") as heir:
        assert "chat" in heir.sessions  # taken over and recovered during the start
        trajectory = await answered(postgres_url, "chat", 2)
    assert check_trajectory(trajectory) == []
    assert "still there?" in said(trajectory)
    assert any("was lost" in str(m.content) and "t1" in str(m.content) for m in trajectory)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        state = conn.execute("SELECT state FROM tasks WHERE id = 't1'").fetchone()
    assert state == ("lost",)


async def test_a_worker_that_loses_its_lease_drops_the_session(
    postgres_url: str, tmp_path: Path
) -> None:
    async with worker(postgres_url, tmp_path / "a", "alpha", lease_s=1.0) as alpha:
        await alpha.submit(user_input("hello", session="chat"))
        await answered(postgres_url, "chat", 1)
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(
                "UPDATE session_leases SET owner = 'intruder', epoch = epoch + 1, "
                "expires_at = clock_timestamp() + interval '1 minute' WHERE session = 'chat'"
            )
        with anyio.fail_after(5):
            while "chat" in alpha.sessions:  # noqa: ASYNC110
                await anyio.sleep(0.05)
        decision = await alpha.submit(user_input("again", session="chat"))
        assert "another worker owns the session" in decision.reason
        assert "chat" not in alpha.sessions


async def test_a_cluster_needs_a_postgres_store(tmp_path: Path) -> None:
    rt = Runtime(model=FunctionModel(answer), workdir=tmp_path, store_path=tmp_path / "w.db")
    rt.cluster = SessionCluster()
    # Raised during the start, inside the runtime's task group.
    with pytest.raises(ExceptionGroup) as raised:
        async with rt:
            pass
    assert raised.group_contains(UserError, match="Workers share a PostgreSQL store")


@pytest.mark.parametrize("yield_first", [False, True])
async def test_an_event_routed_while_its_session_is_being_taken_over_is_handled_once(
    postgres_url: str, tmp_path: Path, yield_first: bool
) -> None:
    """A claim pass (woken by an event stored elsewhere) takes a session over, and before or
    while the take-over runs an event for it is submitted on this worker: that event reaches the
    session exactly once, with the one the take-over found (before, it was handed twice, or
    handed to a copy the take-over then dropped and never handed again)."""
    first, second = user_input("first", session="chat"), user_input("second", session="chat")
    async with worker(postgres_url, tmp_path / "a", "alpha") as alpha:
        assert alpha.cluster is not None and alpha.cluster.ownership is not None
        async with await PostgresStore.open(postgres_url, pool_size=1) as other:
            await other.events.add(first)
        await alpha.cluster.ownership.claim_pass()  # the take-over is spawned, not yet run
        if yield_first:
            await anyio.lowlevel.checkpoint()  # the take-over starts
        await alpha.submit(second)
        with anyio.fail_after(15):
            while (await stored(postgres_url, "chat"))[1] != {"consumed": 2}:  # noqa: ASYNC110
                await anyio.sleep(0.05)
            await alpha.wait_idle()
        trajectory, _ = await stored(postgres_url, "chat")
    carried = [i for m in trajectory if isinstance(m, UserMessage) for i in m.event_ids]
    assert sorted(carried) == sorted([first.id, second.id])
    assert check_trajectory(trajectory) == []
