"""The fenced view of the other session-scoped repositories on a real PostgreSQL: messages to the
user, subagents and requests to a person. A write of the session through a view whose lease is
lost is refused with LeaseLost and nothing of it is stored; a write for another session is
refused outright; facts any worker's channel brings in (deliveries, reads, a person's answer)
pass through, so they are never lost because the worker that received them lost a lease."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import pytest

from wakeful.core.records import HumanRequestRecord, OutboundMessage, SubagentRecord
from wakeful.errors import UserError

psycopg = pytest.importorskip("psycopg", reason="psycopg is missing: pip install -e '.[postgres]'")

from wakeful.store.postgres import PostgresStore  # noqa: E402
from wakeful.store.postgres.leases import Lease, LeaseLost  # noqa: E402

pytestmark = pytest.mark.anyio

LEASE_S = 1.0
NOW = "2026-12-01T09:00:00+00:00"


def message(message_id: str, session: str = "s1") -> OutboundMessage:
    return OutboundMessage(message_id, session, NOW, "normal", "text", f"text of {message_id}")


def child(child_id: str, parent: str = "s1", root: str = "s1") -> SubagentRecord:
    return SubagentRecord(
        id=child_id,
        parent=parent,
        parent_call=f"call-{child_id}",
        root=root,
        depth=1 if parent == root else 2,
        agent="researcher",
        task="look it up",
        mode="async",
        status="running",
        created_at=NOW,
    )


def request(request_id: str, session: str = "s1") -> HumanRequestRecord:
    return HumanRequestRecord(
        id=request_id,
        session=session,
        kind="approval",
        question="May I deploy?",
        priority="normal",
        opened_at=NOW,
        deadline=None,
        data="{}",
    )


def wait_until_expired(url: str, session: str, timeout: float = 10.0) -> None:
    """Wait until the database's clock says the lease on `session` has expired."""
    deadline = time.monotonic() + timeout
    with psycopg.connect(url, autocommit=True) as conn:
        while time.monotonic() < deadline:
            found = conn.execute(
                "SELECT 1 FROM session_leases WHERE session = %s "
                "AND expires_at <= clock_timestamp()",
                (session,),
            ).fetchone()
            if found:
                return
            time.sleep(0.05)
    raise AssertionError(f"the lease on {session!r} did not expire within {timeout} s")


@asynccontextmanager
async def taken_over(url: str) -> AsyncIterator[tuple[PostgresStore, PostgresStore, Lease]]:
    """Two workers' stores, and the lease worker alpha held on s1 before beta took s1 over."""
    async with (
        await PostgresStore.open(url, pool_size=2) as a,
        await PostgresStore.open(url, pool_size=2) as b,
    ):
        alpha = await a.register_worker(lease_seconds=LEASE_S, name="alpha")
        beta = await b.register_worker(lease_seconds=LEASE_S, name="beta")
        lease = await alpha.acquire("s1")
        assert lease is not None
        # What the session stored while alpha held it.
        fenced = a.fenced(lease)
        await fenced.messages.add(message("msg_before"))
        await fenced.subagents.add(child("sub_before"))
        await fenced.human_requests.add(request("req0"))
        await a.human_requests.close("req0", "answered", '"yes"')
        await anyio.to_thread.run_sync(wait_until_expired, url, "s1")
        assert await beta.acquire("s1") is not None
        yield a, b, lease


async def test_a_lost_lease_refuses_a_new_message_and_stores_nothing(postgres_url: str) -> None:
    async with taken_over(postgres_url) as (a, b, lost):
        stale = a.fenced(lost)
        with pytest.raises(LeaseLost, match=r"session 's1'.*worker beta holds it now"):
            await stale.messages.add(message("msg_late"))
        assert [m.id for m in await b.messages.list("s1")] == ["msg_before"]
        assert await b.messages.get("msg_late") is None


async def test_deliveries_and_reads_pass_through_a_lost_lease(postgres_url: str) -> None:
    """A channel's report is a fact of the outside world: recorded whoever owns the session."""
    async with taken_over(postgres_url) as (a, b, lost):
        stale = a.fenced(lost)
        await stale.messages.record_delivery("msg_before", "telegram", "sent")
        assert await stale.messages.mark_read(["msg_before"], channel="telegram") == ["msg_before"]
        stored = await b.messages.get("msg_before")
        assert stored is not None and stored.read_on == "telegram"
        assert [(d.channel, d.state) for d in stored.deliveries] == [("telegram", "read")]


async def test_a_lost_lease_refuses_every_subagent_write_and_stores_nothing(
    postgres_url: str,
) -> None:
    async with taken_over(postgres_url) as (a, b, lost):
        stale = a.fenced(lost)
        with pytest.raises(LeaseLost):
            await stale.subagents.add(child("sub_late"))
        with pytest.raises(LeaseLost):
            await stale.subagents.finish("sub_before", "done", result='"stale"', tokens=10)
        with pytest.raises(LeaseLost):
            await stale.subagents.record_tokens("sub_before", 99)
        assert await b.subagents.get("sub_late") is None
        before = await b.subagents.get("sub_before")
        assert before is not None
        assert (before.status, before.result, before.tokens) == ("running", None, 0)

        # The new owner ends the child; a stale view cannot mark its result delivered.
        assert await b.subagents.finish("sub_before", "failed", error="lost in a takeover")
        with pytest.raises(LeaseLost):
            await stale.subagents.mark_delivered("sub_before")
        ended = await b.subagents.get("sub_before")
        assert ended is not None and (ended.status, ended.delivered) == ("failed", False)


async def test_a_lost_lease_refuses_opening_a_request_and_delivering_its_outcome(
    postgres_url: str,
) -> None:
    async with taken_over(postgres_url) as (a, b, lost):
        stale = a.fenced(lost)
        with pytest.raises(LeaseLost):
            await stale.human_requests.add(request("req1"))
        with pytest.raises(LeaseLost):
            await stale.human_requests.mark_delivered("req0")
        assert await b.human_requests.get("req1") is None
        answered = await b.human_requests.get("req0")
        assert answered is not None and not answered.delivered

        # A person's late answer, received by the stale worker, is kept all the same.
        assert await stale.human_requests.add_late("req0", '"yes, really"')
        kept = await b.human_requests.get("req0")
        assert kept is not None and kept.late == '["yes, really"]'


async def test_a_fenced_view_writes_only_its_own_sessions_records(postgres_url: str) -> None:
    async with await PostgresStore.open(postgres_url, pool_size=2) as store:
        worker = await store.register_worker(lease_seconds=30)
        lease = await worker.acquire("s1")
        assert lease is not None
        fenced = store.fenced(lease)
        await store.subagents.add(child("sub_other", parent="s2", root="s2"))
        await store.human_requests.add(request("req2", session="s2"))

        with pytest.raises(UserError, match=r"fenced by the lease on session 's1'.*'s2'"):
            await fenced.messages.add(message("msg_other", session="s2"))
        with pytest.raises(UserError, match="'s2'"):
            await fenced.subagents.add(child("sub_new", parent="s2", root="s2"))
        with pytest.raises(UserError, match="'s2'"):
            await fenced.subagents.finish("sub_other", "done", result='"x"')
        with pytest.raises(UserError, match="'s2'"):
            await fenced.subagents.mark_delivered("sub_other")
        with pytest.raises(UserError, match="'s2'"):
            await fenced.human_requests.add(request("req3", session="s2"))
        with pytest.raises(UserError, match="'s2'"):
            await fenced.human_requests.mark_delivered("req2")
        assert await store.messages.get("msg_other") is None
        assert await store.subagents.get("sub_new") is None
        other = await store.subagents.get("sub_other")
        assert other is not None and other.status == "running"
        assert await store.human_requests.get("req3") is None

        # The session's own tree, a grandchild included, is written through the view.
        await fenced.subagents.add(child("sub_1"))
        await fenced.subagents.add(child("sub_1_1", parent="sub_1", root="s1"))
        assert await fenced.subagents.finish("sub_1_1", "done", result='"found"')
        assert await fenced.subagents.mark_delivered("sub_1_1")
        await fenced.messages.add(message("msg_mine"))
        await fenced.human_requests.add(request("req4"))
        assert [m.id for m in await store.messages.list("s1")] == ["msg_mine"]
        assert [s.id for s in await store.subagents.children("sub_1")] == ["sub_1_1"]
