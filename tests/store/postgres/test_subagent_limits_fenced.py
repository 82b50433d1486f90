"""The limits on running children through the views fenced by sessions' leases (how the workers
of a cluster write a child's record): two workers, each running one child of a tree and spawning
under it at the same moment, never pass `max_tree` together; and a spawn through a lost lease is
refused with LeaseLost before its limits are counted, storing nothing."""

from __future__ import annotations

import anyio
import pytest

from wakeful.core.records import SubagentRecord
from wakeful.core.repositories import SubagentLimitReached

psycopg = pytest.importorskip("psycopg", reason="psycopg is missing: pip install -e '.[postgres]'")

from wakeful.store.postgres import PostgresStore  # noqa: E402
from wakeful.store.postgres.leases import LeaseLost  # noqa: E402

pytestmark = pytest.mark.anyio

NOW = "2026-12-01T09:00:00+00:00"


def child(child_id: str, parent: str, root: str = "sub_root", depth: int = 2) -> SubagentRecord:
    return SubagentRecord(
        id=child_id,
        parent=parent,
        parent_call=f"call-{child_id}",
        root=root,
        depth=depth,
        agent="helper",
        task="help",
        mode="async",
        status="running",
        created_at=NOW,
    )


async def test_two_workers_spawning_through_their_fenced_views_stop_at_max_tree(
    postgres_url: str,
) -> None:
    async with (
        await PostgresStore.open(postgres_url, pool_size=2) as a,
        await PostgresStore.open(postgres_url, pool_size=2) as b,
    ):
        alpha = await a.register_worker(lease_seconds=30, name="alpha")
        beta = await b.register_worker(lease_seconds=30, name="beta")
        await a.subagents.add(child("sub_root", parent="main", depth=1))
        await a.subagents.add(child("sub_left", parent="sub_root"))
        await a.subagents.add(child("sub_right", parent="sub_root"))
        left, right = await alpha.acquire("sub_left"), await beta.acquire("sub_right")
        assert left is not None and right is not None
        views = {"sub_left": a.fenced(left), "sub_right": b.fenced(right)}
        stored: list[str] = []
        refused: list[SubagentLimitReached] = []

        async def spawn(parent: str, number: int) -> None:
            record = child(f"{parent}_{number}", parent=parent, depth=3)
            try:
                await views[parent].subagents.add(record, max_children=4, max_tree=5)
            except SubagentLimitReached as exc:
                refused.append(exc)
            else:
                stored.append(record.id)

        # Three running; room for two more in the tree, whoever spawns them.
        async with anyio.create_task_group() as group:
            for number in range(6):
                group.start_soon(spawn, "sub_left", number)
                group.start_soon(spawn, "sub_right", number)
        assert len(stored) == 2
        assert {(e.kind, e.running, e.limit) for e in refused} == {("max_tree", 5, 5)}
        grandchildren = await a.subagents.children("sub_left") + await a.subagents.children(
            "sub_right"
        )
        assert sorted(r.id for r in grandchildren) == sorted(stored)


async def test_a_spawn_through_a_lost_lease_is_refused_before_its_limits(
    postgres_url: str,
) -> None:
    async with (
        await PostgresStore.open(postgres_url, pool_size=2) as a,
        await PostgresStore.open(postgres_url, pool_size=2) as b,
    ):
        alpha = await a.register_worker(lease_seconds=30, name="alpha")
        beta = await b.register_worker(lease_seconds=30, name="beta")
        lease = await alpha.acquire("sub_root")
        assert lease is not None
        await a.subagents.add(child("sub_root", parent="main", depth=1))
        await alpha.release(lease)
        assert await beta.acquire("sub_root") is not None
        stale = a.fenced(lease)
        with pytest.raises(LeaseLost):
            await stale.subagents.add(child("sub_late", parent="sub_root"), max_tree=5)
        # Over a limit too, the lease is what refuses it.
        with pytest.raises(LeaseLost):
            await stale.subagents.add(child("sub_over", parent="sub_root"), max_tree=1)
        assert await b.subagents.children("sub_root") == []
