"""Disk full, end to end: a runtime whose store is on a small tmpfs keeps running when the disk
fills while two sessions work. New events are refused with StoreFull, the sessions finish their
work in memory, the operator is alerted once; when space is freed the held messages are stored in
order, and a restart from the same store shows everything."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import anyio
import pytest

from small_disk import fill, small_tmpfs
from wakeful.errors import StoreError, StoreFull
from wakeful.events import user_input
from wakeful.messages import Message, ToolMessage, UserMessage, check_trajectory
from wakeful.models import FunctionModel, Turn, call, say, use
from wakeful.models.base import ToolDefinition
from wakeful.runtime import Runtime
from wakeful.store.sqlite import Store
from wakeful.toolkits.comms.reply import reply_to_user
from wakeful.tools.spec import tool

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


class Gate:
    """Holds the tool calls until the test has filled the disk."""

    def __init__(self) -> None:
        self.waiting = 0
        self.both_waiting = anyio.Event()
        self.open = anyio.Event()


GATE: list[Gate] = []


@tool
async def write_report(topic: str) -> str:
    """A long report on a topic (long enough that storing it needs fresh disk space)."""
    gate = GATE[-1]
    gate.waiting += 1
    if gate.waiting == 2:
        gate.both_waiting.set()
    await gate.open.wait()
    return f"report on {topic}: " + "r" * 300_000


def script(messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> Turn | str:
    last = messages[-1]
    if isinstance(last, UserMessage):
        return use(call("write_report", topic=last.content))
    if isinstance(last, ToolMessage) and last.name == "write_report":
        return use(call("reply_to_user", text=f"done: {last.content[:20]}"))
    return say("")


def runtime(store: Path) -> Runtime:
    return Runtime(
        model=FunctionModel(script),
        tools=[reply_to_user, write_report],
        with_core_tools=False,
        with_timers=False,
        store_path=store,
    )


def operator_alerts(rt: Runtime) -> list[str]:
    return [m["text"] for m in rt.outbox.sent if m["channel"] == "operator"]


async def test_a_full_disk_refuses_new_events_keeps_sessions_and_recovers(tmp_path: Path) -> None:
    with small_tmpfs(tmp_path / "disk", 16) as disk:
        store_path = disk / "w.db"
        GATE.append(Gate())
        async with runtime(store_path) as rt:
            assert rt.store is not None
            with anyio.fail_after(30):
                await rt.submit(user_input("alpha", session="a"))
                await rt.submit(user_input("beta", session="b"))
                await GATE[-1].both_waiting.wait()
                filler = fill(disk)
                GATE[-1].open.set()  # the reports come back to a disk with no room for them
                await rt.wait_idle()

                # The runtime is alive; new events are refused with the clear error.
                with pytest.raises(StoreFull) as refused:
                    await rt.submit(user_input("gamma", session="a"))
                assert isinstance(refused.value, StoreError)
                assert "full" in str(refused.value) and "Free space" in str(refused.value)
                with pytest.raises(StoreFull):
                    await rt.submit_many([user_input("delta", session="c")])
                assert "c" not in rt.sessions

                # Both sessions finished their work in memory, well-formed.
                assert rt.store.held_writes > 0
                for name in ("a", "b"):
                    messages = rt.sessions[name].trajectory.messages
                    assert check_trajectory(messages) == []
                    assert [m.role for m in messages] == [
                        "system", "user", "assistant", "tool", "assistant", "tool", "assistant"
                    ]  # fmt: skip
                    # A reply needs its idempotency key stored before it is sent, so it is not
                    # sent now: the model reads why, and the user gets nothing twice later.
                    refusal = messages[5]
                    assert isinstance(refusal, ToolMessage) and refusal.status == "error"
                    assert "disk is full" in refusal.content
                assert [m for m in rt.outbox.sent if m["channel"] != "operator"] == []
                alerts = operator_alerts(rt)
                assert len(alerts) == 1 and "is full" in alerts[0], alerts

                # Space comes back: what was held is stored, in order, without a new event.
                filler.unlink()
                # Polled: the writer thread retries by itself, and the alert follows.
                while rt.store.held_writes or len(operator_alerts(rt)) < 2:  # noqa: ASYNC110
                    await anyio.sleep(0.02)
                alerts = operator_alerts(rt)
                assert len(alerts) == 2 and "has room again" in alerts[1], alerts
                for name in ("a", "b"):
                    stored = await rt.store.load_trajectory(name)
                    assert stored == rt.sessions[name].trajectory.messages
                assert await rt.store.pending_events() == []

                await rt.submit(user_input("gamma", session="a"))
                await rt.wait_idle()
                replies = [m["text"] for m in rt.outbox.sent if m["channel"] != "operator"]
                assert replies == ["done: report on gamma: rrr"]
            in_memory = {n: list(s.trajectory.messages) for n, s in rt.sessions.items()}

        # A restart from the same store works and shows everything.
        GATE.append(Gate())
        GATE[-1].open.set()
        async with runtime(store_path) as rt:
            assert rt.store is not None
            with anyio.fail_after(10):
                for name in ("a", "b"):
                    session = await rt.session(name)
                    assert session.trajectory.messages == in_memory[name]
                    assert check_trajectory(session.trajectory.messages) == []
                assert len(in_memory["a"]) == 13
                assert await rt.store.pending_events() == []
        wal = disk / "w.db-wal"
        assert not wal.exists() or wal.stat().st_size == 0


@tool(run_mode="background")
async def long_build(target: str) -> str:
    """Build a target in the background; the result arrives as an event."""
    await GATE[-1].open.wait()
    return f"built {target}: " + "b" * 300_000


def build_script(messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> Turn | str:
    last = messages[-1]
    if isinstance(last, UserMessage) and last.content.startswith("build"):
        return use(call("long_build", target="app"))
    return say("noted")


async def test_a_background_result_on_a_full_disk_is_kept_not_refused(tmp_path: Path) -> None:
    with small_tmpfs(tmp_path / "disk", 16) as disk:
        GATE.append(Gate())
        async with Runtime(
            model=FunctionModel(build_script),
            tools=[long_build],
            with_core_tools=False,
            with_timers=False,
            store_path=disk / "w.db",
        ) as rt:
            assert rt.store is not None
            with anyio.fail_after(30):
                await rt.submit(user_input("build it"))
                await rt.wait_idle(include_tasks=False)
                filler = fill(disk)
                GATE[-1].open.set()  # the task ends, and its result has no room in the store
                await rt.wait_idle()
                messages = rt.sessions["main"].trajectory.messages
                assert check_trajectory(messages) == []
                assert "built app" in messages[-2].content and messages[-1].content == "noted"
                assert rt.store.held_writes > 0
                filler.unlink()
                with anyio.fail_after(10):
                    await rt.store.flush()
                assert await rt.store.load_trajectory("main") == messages
                assert await rt.store.pending_events() == []


async def test_a_runtime_starts_on_a_nearly_full_disk(tmp_path: Path) -> None:
    with small_tmpfs(tmp_path / "disk", 16) as disk:
        store_path = disk / "w.db"
        model = FunctionModel(build_script)
        async with Runtime(
            model=model, with_core_tools=False, with_timers=False, store_path=store_path
        ) as rt:
            with anyio.fail_after(10):
                await rt.submit(user_input("hello"))
                await rt.wait_idle()
        # An event left pending by the last run (stored, never handed over).
        async with await Store.open(store_path) as store:
            await store.add_event(user_input("left pending"))
        filler = fill(disk, leave=64 * 1024)

        async with Runtime(
            model=model, with_core_tools=False, with_timers=False, store_path=store_path
        ) as rt:
            assert rt.store is not None
            with anyio.fail_after(10):
                await rt.wait_idle()  # recovery handled the pending event, in memory if need be
                messages = rt.sessions["main"].trajectory.messages
                assert [m.content for m in messages if m.role == "assistant"] == ["noted"] * 2
                with pytest.raises(StoreFull, match="kept in reserve"):
                    await rt.submit(user_input("new"))
                filler.unlink()
                await rt.store.flush()
                assert await rt.store.load_trajectory("main") == messages
                await rt.submit(user_input("new"))
                await rt.wait_idle()
