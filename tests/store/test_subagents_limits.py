"""The limits on running children, held by the store: `subagents.add` with `max_children` or
`max_tree` counts the running children of the new one's parent and tree and stores it in one
step, so spawns at the same moment (in one process, or on two workers of one PostgreSQL store)
never pass a limit together. Each test runs on SQLite and on PostgreSQL (`open_store`)."""

from __future__ import annotations

import anyio
import pytest
from store_records import OpenStore

from wakeful.core.records import SubagentRecord
from wakeful.core.repositories import SubagentLimitReached
from wakeful.errors import UserError

pytestmark = pytest.mark.anyio

NOW = "2026-12-01T09:00:00+00:00"


def child(child_id: str, parent: str, root: str, depth: int = 2) -> SubagentRecord:
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


async def add_at_once(
    add: list[tuple[object, SubagentRecord]], **limits: int
) -> tuple[list[str], list[SubagentLimitReached]]:
    """Add every record at the same moment (each through its store); the ids stored, and the
    refusals."""
    stored: list[str] = []
    refused: list[SubagentLimitReached] = []

    async def one(store: object, record: SubagentRecord) -> None:
        try:
            await store.subagents.add(record, **limits)  # type: ignore[attr-defined]
        except SubagentLimitReached as exc:
            refused.append(exc)
        else:
            stored.append(record.id)

    async with anyio.create_task_group() as group:
        for store, record in add:
            group.start_soon(one, store, record)
    return stored, refused


async def test_many_children_of_one_tree_at_once_stop_at_max_tree(open_store: OpenStore) -> None:
    async with open_store() as store:
        await store.subagents.add(child("sub_root", parent="main", root="sub_root", depth=1))
        records = [child(f"sub_{i:02}", parent=f"sub_p{i % 4}", root="sub_root") for i in range(20)]
        stored, refused = await add_at_once([(store, r) for r in records], max_tree=3)
        # The root counts: it runs, and it is of its tree.
        assert len(stored) == 2
        assert len(refused) == 18
        assert {(e.kind, e.running, e.limit) for e in refused} == {("max_tree", 3, 3)}
        running = [r.id for r in await store.subagents.unsettled() if r.root == "sub_root"]
        assert sorted(running) == sorted(["sub_root", *stored])


async def test_many_children_of_one_parent_at_once_stop_at_max_children(
    open_store: OpenStore,
) -> None:
    async with open_store() as store:
        # Each child of a top-level session roots a tree of its own.
        records = [
            child(f"sub_{i:02}", parent="main", root=f"sub_{i:02}", depth=1) for i in range(12)
        ]
        stored, refused = await add_at_once(
            [(store, r) for r in records], max_children=3, max_tree=3
        )
        assert len(stored) == 3
        assert {(e.kind, e.running, e.limit) for e in refused} == {("max_children", 3, 3)}
        assert sorted(c.id for c in await store.subagents.children("main")) == sorted(stored)


async def test_ended_children_and_other_trees_leave_room(open_store: OpenStore) -> None:
    async with open_store() as store:
        await store.subagents.add(child("sub_a", parent="main", root="sub_a", depth=1))
        await store.subagents.add(child("sub_b", parent="sub_a", root="sub_a"), max_tree=2)
        with pytest.raises(SubagentLimitReached) as refused:
            await store.subagents.add(child("sub_c", parent="sub_a", root="sub_a"), max_tree=2)
        assert (refused.value.kind, refused.value.running, refused.value.limit) == (
            "max_tree",
            2,
            2,
        )
        assert await store.subagents.get("sub_c") is None
        # Another tree, or a child of the tree once one ended, fits.
        await store.subagents.add(child("sub_x", parent="other", root="other"), max_tree=2)
        await store.subagents.finish("sub_b", "done", result='"ok"')
        await store.subagents.add(child("sub_c", parent="sub_a", root="sub_a"), max_tree=2)
        with pytest.raises(SubagentLimitReached, match="max_children = 1"):
            await store.subagents.add(child("sub_d", parent="sub_a", root="sub_a"), max_children=1)
        # Without limits a record is stored as before.
        await store.subagents.add(child("sub_d", parent="sub_a", root="sub_a"))
        assert await store.subagents.get("sub_d") is not None


@pytest.mark.parametrize("limit", ["max_children", "max_tree"])
@pytest.mark.parametrize("value", [0, -1])
async def test_a_limit_below_one_is_refused_as_a_mistake(
    open_store: OpenStore, limit: str, value: int
) -> None:
    async with open_store() as store:
        with pytest.raises(UserError, match=rf"{limit} = {value} would refuse every child"):
            await store.subagents.add(child("sub_1", parent="main", root="sub_1"), **{limit: value})
        assert await store.subagents.get("sub_1") is None


async def test_two_workers_spawning_in_one_tree_at_once_stop_at_max_tree(
    postgres_url: str,
) -> None:
    """Two stores on one database (two workers of a cluster, each its own pool and writer)."""
    from wakeful.store.postgres import PostgresStore

    async with (
        await PostgresStore.open(postgres_url) as worker_a,
        await PostgresStore.open(postgres_url) as worker_b,
    ):
        for attempt in range(5):
            root = f"sub_root{attempt}"
            await worker_a.subagents.add(child(root, parent="main", root=root, depth=1))
            records = [child(f"{root}_{i:02}", parent=root, root=root) for i in range(16)]
            stored, refused = await add_at_once(
                [(worker_a if i % 2 else worker_b, r) for i, r in enumerate(records)],
                max_tree=3,
                max_children=10,
            )
            assert len(stored) == 2, attempt
            assert {(e.kind, e.running) for e in refused} == {("max_tree", 3)}
            assert len(await worker_b.subagents.children(root)) == 2
