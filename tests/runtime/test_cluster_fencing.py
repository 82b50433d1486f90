"""Runtimes as workers sharing one real PostgreSQL: every write of a session goes through its
owner's fence, and what a previous run left of a session (its open requests to a person, its
children) is taken up by the one worker that takes the session over.

A worker that lost a session (taken over by another) can no longer tell the user anything for
it, ask a person, spawn a child or record a task: each write is refused (SessionMoved), nothing
is stored or shown, and the new owner goes on undisturbed. Two workers started on a store
holding an open request to a person and a running child apply the request's default once and
run the child once; a request of a session that moves is followed by its new owner only.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("psycopg", reason="psycopg is missing: pip install -e '.[postgres]'")

import psycopg

from wakeful.errors import SessionMoved
from wakeful.events import HUMAN_ANSWER, SUBAGENT_RESULT, user_input
from wakeful.messages import Message, UserMessage
from wakeful.models import FunctionModel, Turn, call, say, use
from wakeful.models.base import ToolDefinition
from wakeful.runtime import Runtime
from wakeful.runtime.worker import SessionCluster
from wakeful.safety.decisions import HumanDecision
from wakeful.subagents.definitions import AgentDefinition
from wakeful.tools.result import ToolResult
from wakeful.tools.tasks import TaskHandle

pytestmark = pytest.mark.anyio

HELPER = AgentDefinition(name="helper", description="Does small jobs.", role="You help.")


def answer(msgs: Sequence[Message], tools: Sequence[ToolDefinition]) -> Turn:
    last = msgs[-1]
    if isinstance(last, UserMessage):
        return use(call("reply_to_user", text=f"You said: {last.content}"))
    return say("")


def sql(url: str, query: str, params: tuple[object, ...] = ()) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        cursor = conn.execute(query, params)
        return cursor.fetchall() if cursor.description else []


@asynccontextmanager
async def worker(url: str, workdir: Path, name: str, **options: Any) -> AsyncIterator[Runtime]:
    options.setdefault("model", FunctionModel(answer))
    rt = Runtime(workdir=workdir, store_url=url, with_timers=False, **options)
    # Take-overs here are made by hand (an UPDATE of the lease row) or follow a clean stop, so
    # no test waits for a lease to run out: one long enough that a loaded machine's late
    # renewal never loses it.
    rt.cluster = SessionCluster(lease_seconds=6, name=name)
    async with rt:
        yield rt


async def until(condition: Any, seconds: float = 15) -> None:
    with anyio.fail_after(seconds):
        while not condition():  # noqa: ASYNC110
            await anyio.sleep(0.05)


async def replies_stored(url: str, session: str, count: int) -> list[str]:
    """The texts of the messages to the user of `session`, oldest first, once `count` are in."""
    with anyio.fail_after(15):
        while True:
            rows = sql(url, "SELECT body FROM messages WHERE session = %s ORDER BY seq", (session,))
            if len(rows) >= count:
                return [json.loads(body)["text"] for (body,) in rows]
            await anyio.sleep(0.05)


async def test_a_worker_that_lost_a_session_writes_nothing_more_for_it(
    postgres_url: str, tmp_path: Path
) -> None:
    async with worker(postgres_url, tmp_path / "a", "alpha", agents=[HELPER]) as alpha:
        shown: list[str] = []

        async def show(entry: dict[str, Any]) -> None:
            shown.append(entry["text"])

        alpha.outbox.listeners.append(show)
        await alpha.submit(user_input("hello", session="chat"))
        await replies_stored(postgres_url, "chat", 1)
        assert "chat" in alpha.sessions
        async with worker(postgres_url, tmp_path / "b", "beta") as beta:
            # Beta takes the session over (as after alpha froze past its lease).
            assert beta.cluster is not None and beta.cluster.ownership is not None
            sql(
                postgres_url,
                "UPDATE session_leases SET owner = %s, epoch = epoch + 1, "
                "expires_at = clock_timestamp() + interval '1 minute' WHERE session = 'chat'",
                (beta.cluster.ownership.worker_id,),
            )
            await beta.cluster.ownership.route("chat")
            await until(lambda: "chat" not in alpha.sessions)
            shown.clear()

            # Alpha, still running code for the session, tries to write for it: refused.
            with pytest.raises(SessionMoved, match="no longer holds the lease on session 'chat'"):
                await alpha.outbox.send("chat", "Your flight moved to 9:40.")
            assert alpha.approvals is not None
            with pytest.raises(SessionMoved):
                await alpha.approvals.open_approval(
                    "chat", "Pay 4,200 EUR to ACME?", timeout_seconds=60, answered_in="event"
                )
            assert alpha.approvals.pending("chat") == []
            assert alpha.subagents is not None
            with pytest.raises(SessionMoved):
                await alpha.subagents.spawn(
                    "chat", "c1", agent="helper", task="Book the hotel.", mode="async"
                )

            async def build(handle: TaskHandle) -> ToolResult:
                await anyio.sleep_forever()
                raise AssertionError("never reached")

            task = alpha.tasks.start(
                session="chat",
                tool="run_shell",
                run=build,
                description="a stale build",
                background=True,
            )
            assert alpha.store is not None
            await alpha.store.flush()

            # Nothing of it was stored, nor shown to the user.
            assert shown == []
            assert sql(postgres_url, "SELECT id FROM tasks WHERE id = %s", (task.id,)) == []
            assert sql(postgres_url, "SELECT id FROM human_requests") == []
            assert sql(postgres_url, "SELECT id FROM subagents") == []
            # The new owner goes on.
            await beta.submit(user_input("again", session="chat"))
            assert await replies_stored(postgres_url, "chat", 2) == [
                "You said: hello",
                "You said: again",
            ]
            task.cancel("the test ends")
            await alpha.store.flush()
            assert sql(postgres_url, "SELECT id FROM tasks WHERE id = %s", (task.id,)) == []


async def test_two_workers_take_up_a_request_and_a_child_once(
    postgres_url: str, tmp_path: Path
) -> None:
    # A run left a request to a person (its default due soon) and a child cut off mid-turn.
    async def stuck(msgs: Sequence[Message], tools: Sequence[ToolDefinition]) -> Turn:
        await anyio.sleep_forever()
        raise AssertionError("never reached")

    first_child = HELPER.model_copy(update={"model": FunctionModel(stuck)})
    async with worker(postgres_url, tmp_path / "0", "first", agents=[first_child]) as first:
        assert first.approvals is not None and first.subagents is not None
        request = await first.approvals.open_approval(
            "boss",
            "Deploy on Friday?",
            default="deny",
            timeout_seconds=6,
            answered_in="event",
        )
        child, _ = await first.subagents.spawn(
            "boss", "c0", agent="helper", task="Count to three.", mode="async"
        )
        await until(lambda: len(first_child_model(first_child).requests) == 1)

    child_model = FunctionModel(lambda msgs, tools: say("one, two, three"))
    again = HELPER.model_copy(update={"model": child_model})
    decisions: list[HumanDecision] = []
    async with (
        worker(postgres_url, tmp_path / "a", "alpha", agents=[again]) as alpha,
        worker(postgres_url, tmp_path / "b", "beta", agents=[again]) as beta,
    ):
        for rt in (alpha, beta):
            assert rt.approvals is not None
            rt.approvals.decision_listeners.append(decisions.append)
        await until(lambda: delivered(postgres_url, request.id, child.id), seconds=30)
        for rt in (alpha, beta):
            with anyio.fail_after(15):
                await rt.wait_idle()
    kinds = [
        kind for (kind,) in sql(postgres_url, "SELECT kind FROM events WHERE session = 'boss'")
    ]
    assert kinds.count(HUMAN_ANSWER) == 1 and kinds.count(SUBAGENT_RESULT) == 1
    assert [(d.request_id, d.status, d.choice) for d in decisions] == [
        (request.id, "timed_out", "deny")
    ]
    assert len(child_model.requests) == 1
    [(status, result)] = sql(
        postgres_url, "SELECT status, result FROM subagents WHERE id = %s", (child.id,)
    )
    assert (status, result) == ("done", '"one, two, three"')


def first_child_model(definition: AgentDefinition) -> FunctionModel:
    assert isinstance(definition.model, FunctionModel)
    return definition.model


def delivered(url: str, request_id: str, child_id: str) -> bool:
    """Whether the request's outcome and the child's result were both handed over."""
    [(request_done,)] = sql(
        url, "SELECT delivered FROM human_requests WHERE id = %s", (request_id,)
    )
    [(child_done,)] = sql(url, "SELECT delivered FROM subagents WHERE id = %s", (child_id,))
    return bool(request_done and child_done)


async def test_a_request_of_a_session_that_moved_is_followed_by_its_new_owner_only(
    postgres_url: str, tmp_path: Path
) -> None:
    decisions: list[HumanDecision] = []
    async with worker(postgres_url, tmp_path / "a", "alpha") as alpha:
        await alpha.submit(user_input("hello", session="chat"))
        await replies_stored(postgres_url, "chat", 1)
        assert alpha.approvals is not None
        alpha.approvals.decision_listeners.append(decisions.append)
        request = await alpha.approvals.open_approval(
            "chat", "Deploy on Friday?", default="deny", timeout_seconds=4, answered_in="event"
        )
        async with worker(postgres_url, tmp_path / "b", "beta") as beta:
            assert beta.approvals is not None and beta.cluster is not None
            beta.approvals.decision_listeners.append(decisions.append)
            assert beta.cluster.ownership is not None
            sql(
                postgres_url,
                "UPDATE session_leases SET owner = %s, epoch = epoch + 1, "
                "expires_at = clock_timestamp() + interval '1 minute' WHERE session = 'chat'",
                (beta.cluster.ownership.worker_id,),
            )
            await beta.cluster.ownership.route("chat")
            await until(lambda: "chat" not in alpha.sessions)
            await beta.cluster.wait_settled()
            # Taken up by beta with the session; alpha no longer follows it.
            assert [r.id for r in beta.approvals.pending("chat")] == [request.id]
            assert alpha.approvals.pending("chat") == []
            await until(lambda: delivered_request(postgres_url, request.id))
            for rt in (alpha, beta):
                with anyio.fail_after(15):
                    await rt.wait_idle()
    assert [(d.request_id, d.status, d.choice) for d in decisions] == [
        (request.id, "timed_out", "deny")
    ]
    kinds = [
        kind for (kind,) in sql(postgres_url, "SELECT kind FROM events WHERE session = 'chat'")
    ]
    assert kinds.count(HUMAN_ANSWER) == 1


def delivered_request(url: str, request_id: str) -> bool:
    [(done,)] = sql(url, "SELECT delivered FROM human_requests WHERE id = %s", (request_id,))
    return bool(done)


async def test_the_views_of_sessions_lost_long_ago_are_dropped_but_recent_ones_still_refuse(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker keeps the last fenced view of a session it lost so that a late write is refused,
    not made unfenced; it keeps a bounded number of views (here 3, the owned ones counted), those
    of the sessions owned most recently."""
    from wakeful.runtime import worker as worker_module

    monkeypatch.setattr(worker_module, "LOST_VIEWS_KEPT", 3)
    async with worker(postgres_url, tmp_path / "a", "alpha") as alpha:
        assert alpha.cluster is not None and alpha.cluster.ownership is not None
        cluster, ownership = alpha.cluster, alpha.cluster.ownership
        for number in range(4):
            session = f"chat{number}"
            await alpha.submit(user_input("hello", session=session))
            await replies_stored(postgres_url, session, 1)
            loaded = alpha.sessions[session]
            await until(lambda: loaded.idle and not cluster.settling)  # noqa: B023 - awaited here
            assert await ownership.release(session)
        await alpha.submit(user_input("hello", session="chat4"))  # its claim drops the oldest
        await replies_stored(postgres_url, "chat4", 1)
        # The two lost most recently still refuse a late write; the older ones are forgotten
        # (their writes, long over, would go to the shared store).
        assert ownership.sessions == ["chat4"]
        for session in ("chat2", "chat3"):
            with pytest.raises(SessionMoved):
                await alpha.outbox.send(session, "late")
        assert [alpha.cluster.fenced(s) is None for s in ("chat0", "chat1")] == [True, True]


async def test_a_parents_children_followed_by_another_worker_count_against_its_limits(
    postgres_url: str, tmp_path: Path
) -> None:
    """subagents.max_children holds for the parent wherever its children run: a child of `chat`
    that another worker follows (its session is leased there) counts when `chat`'s worker
    spawns another."""
    from wakeful.core.records import SubagentRecord
    from wakeful.subagents.limits import SubagentLimits
    from wakeful.subagents.manager import SubagentError

    limits = SubagentLimits(max_children=1)
    async with worker(
        postgres_url, tmp_path / "a", "alpha", agents=[HELPER], subagent_limits=limits
    ) as alpha:
        await alpha.submit(user_input("hello", session="chat"))
        await replies_stored(postgres_url, "chat", 1)
        assert alpha.store is not None and alpha.subagents is not None
        # A child of chat, running, followed by worker "beta" (which holds its session).
        await alpha.store.subagents.add(
            SubagentRecord(
                id="sa_elsewhere",
                parent="chat",
                parent_call="call-1",
                root="sa_elsewhere",
                depth=1,
                agent="helper",
                task="Book the hotel.",
                mode="async",
                status="running",
                created_at="2026-12-02T06:00:00+00:00",
            )
        )
        sql(
            postgres_url,
            "INSERT INTO session_leases (session, owner, epoch, expires_at) VALUES "
            "('sa_elsewhere', 'beta', 1, clock_timestamp() + interval '1 minute')",
        )
        with pytest.raises(SubagentError, match=r"1 of your children are running.*max_children"):
            await alpha.subagents.spawn(
                "chat", "call-2", agent="helper", task="Book the car.", mode="async"
            )
