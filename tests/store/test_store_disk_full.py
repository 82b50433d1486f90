"""The store on a full disk, against a real (small) tmpfs: new events are refused with StoreFull
and nothing half-stored, writes of work under way are held in memory and written in order when
space returns, the WAL does not keep the space it took, and a store opens with little space."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from small_disk import fill, free_bytes, small_tmpfs
from wakeful.errors import StoreError, StoreFull
from wakeful.events import user_input
from wakeful.messages import AssistantMessage, Message, UserMessage
from wakeful.store.sqlite import Store
from wakeful.store.writer import WAL_LIMIT_BYTES

pytestmark = pytest.mark.anyio

BIG = "x" * 100_000


async def fill_store_until_full(store: Store, disk: Path) -> StoreFull:
    """Take the disk's space, then store big events until the store says it is full."""
    fill(disk)
    for i in range(200):
        try:
            await store.add_event(user_input(f"{i} {BIG}"))
        except StoreFull as exc:
            return exc
    raise AssertionError("the store never reported the full disk")


async def test_a_new_event_on_a_full_disk_is_refused_with_a_clear_error_and_nothing_stored(
    tmp_path: Path,
) -> None:
    with small_tmpfs(tmp_path / "disk", 8) as disk:
        async with await Store.open(disk / "w.db", reserve_bytes=0) as store:
            first = user_input("before the disk filled")
            await store.add_event(first)
            refused = await fill_store_until_full(store, disk)
            assert isinstance(refused, StoreError)
            text = str(refused)
            assert "disk is full" in text and "free" in text
            assert "Nothing of it was stored" in text and "Free space on the disk" in text
            assert refused.free_bytes is not None and refused.free_bytes < 200_000

            burst = [user_input(f"burst {i} {BIG}") for i in range(3)]
            with pytest.raises(StoreFull):
                await store.add_events(burst)
            stored = {e.id for e in await store.pending_events()}
            assert first.id in stored and not stored & {e.id for e in burst}

            (disk / "filler").unlink()
            await store.add_events(burst)
            assert {e.id for e in burst} <= {e.id for e in await store.pending_events()}


async def test_new_events_are_refused_below_the_reserve_without_being_tried(
    tmp_path: Path,
) -> None:
    with small_tmpfs(tmp_path / "disk", 8) as disk:
        async with await Store.open(disk / "w.db", reserve_bytes=1024 * 1024) as store:
            fill(disk, leave=512 * 1024)
            with pytest.raises(StoreFull, match="kept in reserve") as info:
                await store.add_event(user_input("small"))
            assert info.value.free_bytes is not None
            assert info.value.free_bytes < 1024 * 1024
            assert await store.pending_events() == []


async def test_trajectory_writes_on_a_full_disk_are_held_and_written_in_order_later(
    tmp_path: Path,
) -> None:
    changes: list[bool] = []
    with small_tmpfs(tmp_path / "disk", 8) as disk:
        path = disk / "w.db"
        async with await Store.open(path, reserve_bytes=0) as store:
            store.watch_space(changes.append)
            event = user_input("start")
            await store.add_event(event)
            await store.append_messages("a", [UserMessage(content="first", event_ids=[event.id])])
            await fill_store_until_full(store, disk)
            assert changes == [True] and store.space_short

            written: list[Message] = []
            for i in range(20):
                message = AssistantMessage(content=f"turn {i} {'y' * 20_000}")
                # Neither raises nor blocks: the full disk holds the write in memory.
                with anyio.fail_after(5):
                    await store.append_messages("a", [message])
                written.append(message)
            await store.mark_events([event.id], "consumed")
            assert store.held_writes > 0
            with pytest.raises(StoreFull):
                await store.add_event(user_input("refused while writes are held"))
            with pytest.raises(StoreFull):
                await store.flush()

            (disk / "filler").unlink()
            with anyio.fail_after(10):
                await store.flush()
            assert store.held_writes == 0
            loaded = await store.load_trajectory("a")
            assert [m.content for m in loaded] == ["first", *(m.content for m in written)]
            assert event.id not in {e.id for e in await store.pending_events()}
            with anyio.fail_after(5):
                while changes != [True, False]:  # noqa: ASYNC110 - reported from the writer
                    await anyio.sleep(0.01)
            assert not store.space_short
        async with await Store.open(path) as again:
            assert len(await again.load_trajectory("a")) == 21


async def test_held_writes_are_retried_by_themselves_when_space_returns(tmp_path: Path) -> None:
    with small_tmpfs(tmp_path / "disk", 8) as disk:
        async with await Store.open(disk / "w.db", reserve_bytes=0) as store:
            await fill_store_until_full(store, disk)
            for i in range(5):
                await store.append_messages("b", [AssistantMessage(content=f"{i} {BIG}")])
            assert store.held_writes > 0
            (disk / "filler").unlink()
            # No write comes: the writer thread's own retry stores them.
            with anyio.fail_after(10):
                while store.held_writes:  # noqa: ASYNC110 - polling the writer thread
                    await anyio.sleep(0.02)
            assert len(await store.load_trajectory("b")) == 5


async def test_the_wal_is_truncated_after_a_large_commit(tmp_path: Path) -> None:
    path = tmp_path / "w.db"
    wal = tmp_path / "w.db-wal"
    async with await Store.open(path, synchronous="normal") as store:
        for round_ in range(3):
            await store.add_events([user_input(f"{round_}:{i} {BIG}") for i in range(80)])
            # 8 MB went through the WAL in one commit; it does not keep that size.
            assert wal.stat().st_size <= WAL_LIMIT_BYTES
        assert len(await store.pending_events()) == 240
    assert not wal.exists() or wal.stat().st_size == 0


async def test_a_store_opens_on_a_nearly_full_disk_and_refuses_only_new_events(
    tmp_path: Path,
) -> None:
    with small_tmpfs(tmp_path / "disk", 8) as disk:
        path = disk / "w.db"
        async with await Store.open(path) as store:
            await store.add_event(user_input("kept"))
            await store.append_messages("main", [UserMessage(content="hello")])
        fill(disk, leave=64 * 1024)
        assert free_bytes(disk) <= 64 * 1024
        with anyio.fail_after(10):
            async with await Store.open(path) as store:
                assert [e.text for e in await store.pending_events()] == ["kept"]
                assert len(await store.load_trajectory("main")) == 1
                with pytest.raises(StoreFull, match="kept in reserve"):
                    await store.add_event(user_input("new"))
                # Work under way is kept, not refused.
                await store.append_messages("main", [AssistantMessage(content="hi")])
        (disk / "filler").unlink()
        async with await Store.open(path) as store:
            assert [m.content for m in await store.load_trajectory("main")] == ["hello", "hi"]
            await store.add_event(user_input("new"))


async def test_a_store_on_a_disk_with_no_space_at_all_is_said_to_be_on_a_full_disk(
    tmp_path: Path,
) -> None:
    with small_tmpfs(tmp_path / "disk", 8) as disk:
        path = disk / "w.db"
        async with await Store.open(path) as store:
            await store.add_event(user_input("kept"))
        fill(disk)
        with pytest.raises(StoreFull, match="disk is full") as info:
            await Store.open(path)
        assert "damaged" not in str(info.value)
        (disk / "filler").unlink()
        async with await Store.open(path) as store:
            assert [e.text for e in await store.pending_events()] == ["kept"]


async def test_a_store_closed_while_its_disk_is_full_opens_again_once_space_is_freed(
    tmp_path: Path,
) -> None:
    with small_tmpfs(tmp_path / "disk", 8) as disk:
        path = disk / "w.db"
        async with await Store.open(path, reserve_bytes=0) as store:
            kept = user_input("committed before the disk filled")
            await store.add_event(kept)
            await fill_store_until_full(store, disk)
            await store.append_messages("a", [AssistantMessage(content=BIG)])
            assert store.held_writes == 1
        # The held write could not be stored before the close: it is lost (its events stay
        # pending), and the store is otherwise whole.
        (disk / "filler").unlink()
        async with await Store.open(path) as store:
            assert kept.id in {e.id for e in await store.pending_events()}
            assert await store.load_trajectory("a") == []
            await store.append_messages("a", [AssistantMessage(content="after")])
        assert not (disk / "w.db-wal").exists() or (disk / "w.db-wal").stat().st_size == 0


async def test_concurrent_appends_that_fill_the_disk_midway_keep_each_sessions_order(
    tmp_path: Path,
) -> None:
    with small_tmpfs(tmp_path / "disk", 8) as disk:
        async with await Store.open(disk / "w.db", reserve_bytes=0) as store:
            await store.add_event(user_input("warm up"))
            filler = fill(disk, leave=400 * 1024)
            sent: dict[str, list[str]] = {name: [] for name in ("a", "b", "c")}

            async def append(name: str) -> None:
                for i in range(30):
                    text = f"{name} {i} {'z' * 20_000}"
                    await store.append_messages(name, [AssistantMessage(content=text)])
                    sent[name].append(text)

            with anyio.fail_after(20):
                async with anyio.create_task_group() as tg:
                    for name in sent:
                        tg.start_soon(append, name)
            assert store.held_writes > 0  # the disk filled part way through
            filler.unlink()
            with anyio.fail_after(10):
                await store.flush()
            for name, texts in sent.items():
                assert [m.content for m in await store.load_trajectory(name)] == texts
