"""Wake-ups across workers on a real PostgreSQL: a stored pending event wakes its session's
listeners (only once committed), also in another process; a listener whose connection the server
drops reconnects and reports the miss."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest
from anyio.streams.memory import MemoryObjectReceiveStream

from wakeful.errors import StoreError
from wakeful.events import user_input

psycopg = pytest.importorskip("psycopg", reason="psycopg is missing: pip install -e '.[postgres]'")

from worker_processes import WorkerProcess, worker_processes  # noqa: E402

from wakeful.store.postgres import PostgresStore  # noqa: E402
from wakeful.store.postgres.wakeups import (  # noqa: E402
    LISTENER_APPLICATION_NAME,
    WakeupListener,
)

MISSED = "<missed>"


def terminate_listeners(url: str) -> int:
    """End the listener connections as an operator (or a server restart) would."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
            (LISTENER_APPLICATION_NAME,),
        ).fetchall()
    return len(rows)


async def next_wake(wakes: MemoryObjectReceiveStream[str]) -> str:
    with anyio.fail_after(5):
        return await wakes.receive()


@pytest.mark.anyio
async def test_a_stored_pending_event_wakes_its_session_once_committed(postgres_url: str) -> None:
    send, wakes = anyio.create_memory_object_stream[str](100)
    async with await PostgresStore.open(postgres_url) as store, send, wakes:
        listener = store.wakeup_listener(
            lambda session, owner: send.send_nowait(session), lambda: send.send_nowait(MISSED)
        )
        async with anyio.create_task_group() as tg:
            await tg.start(listener.run)
            await store.events.add(user_input("hi", session="s1"))
            assert await next_wake(wakes) == "s1"

            # Several events of one session in one write wake it once; filtered ones not at all.
            await store.events.add_many([user_input(str(n), session="s2") for n in range(3)])
            await store.events.add(user_input("spam", session="s3"), "filtered")
            await store.events.add_new_many(
                [(user_input("a", session="s4"), "pending"), (user_input("b"), "filtered")]
            )
            # A write that fails (an id stored already) wakes nobody.
            taken = user_input("first", session="s5")
            await store.events.add(taken)
            with pytest.raises(StoreError, match="already stored"):
                await store.events.add_many([user_input("x", session="s6"), taken])
            await store.events.add(user_input("last", session="s7"))
            woken = [await next_wake(wakes) for _ in range(4)]
            assert woken == ["s2", "s4", "s5", "s7"]
            tg.cancel_scope.cancel()


@pytest.mark.anyio
async def test_a_listener_that_cannot_connect_at_the_start_says_so(tmp_path: Path) -> None:
    url = f"postgresql://postgres@/nowhere?host={tmp_path}"
    listener = WakeupListener(url, lambda session, owner: None, lambda: None)
    with pytest.raises(StoreError, match=r"(?s)listen for wake-ups.*Check that the server runs"):
        await listener.run()


@pytest.mark.slow
def test_a_wake_up_reaches_another_process_and_a_dropped_listener_reports_the_miss(
    postgres_url: str,
) -> None:
    with worker_processes(postgres_url) as start_worker:
        writer, listener = start_worker(), start_worker()
        assert listener.ask("listen") == {"listening": True}
        added = writer.ask("add_event", session="s1")
        woken = listener.notice()
        assert woken["woken"] == "s1"
        assert woken["at"] >= added["at"] - 1  # both monotonic clocks of one machine

        assert terminate_listeners(postgres_url) == 1
        writer.ask("add_event", session="during the gap")
        woken_around_the_gap = woken_until_missed(listener)
        deadline = time.monotonic() + 5
        while terminate_listeners(postgres_url) == 0 and time.monotonic() < deadline:
            time.sleep(0.05)  # not yet: wait for it to be listening again, then drop it again
        woken_around_the_gap += woken_until_missed(listener)
        # The gap's event was delivered (before the drop took effect, or to the new connection
        # if it was listening already), or is covered by the miss (the worker rescans).
        assert woken_around_the_gap in ([], ["during the gap"])

        writer.ask("add_event", session="s2")
        assert listener.notice()["woken"] == "s2"


def woken_until_missed(listener: WorkerProcess) -> list[str]:
    """The sessions the listener was woken for before it next reported a miss."""
    woken = []
    while "missed" not in (notice := listener.notice()):
        woken.append(notice["woken"])
    return woken


@pytest.mark.anyio
async def test_a_wake_up_names_the_live_owner_so_other_workers_need_not_claim(
    postgres_url: str,
) -> None:
    """The owner named is the worker whose lease was live when the event was stored: none for a
    session nobody holds or whose lease expired. A payload another program sends on the channel
    is ignored, not taken for a session."""
    send, wakes = anyio.create_memory_object_stream[tuple[str, str | None]](100)
    async with await PostgresStore.open(postgres_url) as store, send, wakes:
        worker = await store.register_worker(lease_seconds=30, name="owner-w1")
        assert await worker.acquire("held") is not None
        assert await worker.acquire("lapsed") is not None
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(
                "UPDATE session_leases SET expires_at = clock_timestamp() WHERE session = 'lapsed'"
            )
            conn.execute("SELECT pg_notify('wakeful_events', 'not json')")
        listener = store.wakeup_listener(
            lambda session, owner: send.send_nowait((session, owner)), lambda: None
        )
        async with anyio.create_task_group() as tg:
            await tg.start(listener.run)
            with psycopg.connect(postgres_url, autocommit=True) as conn:
                conn.execute("""SELECT pg_notify('wakeful_events', '["x", 3]')""")
            for session in ("held", "lapsed", "free"):
                await store.events.add(user_input("hi", session=session))
            with anyio.fail_after(5):
                woken = [await wakes.receive() for _ in range(3)]
            assert woken == [("held", "owner-w1"), ("lapsed", None), ("free", None)]
            tg.cancel_scope.cancel()
