"""Timers fire exactly once although the runtime is killed with SIGKILL at random moments.

A real runtime runs in a subprocess with a store file and many timers (interval timers and
one-shots across twenty sessions); it is killed and restarted several times. Its model writes the
id of every event it is shown into the trajectory, so the store is the record of what the agents
saw: afterwards every fire appears exactly once across all trajectories, no occurrence of a timer
fired twice, and every one-shot that came due fired once.
"""

from __future__ import annotations

import json
import os
import random
import select
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest

from process_probes import end_process
from running_timers import running
from wakeful.clock import FakeClock
from wakeful.events import TIMER_TRIGGER
from wakeful.messages import AssistantMessage, Message, UserMessage, check_trajectory
from wakeful.models import FunctionModel, Turn, say
from wakeful.models.base import ToolDefinition
from wakeful.runtime import Runtime
from wakeful.store.sqlite import Store

pytestmark = pytest.mark.slow

SESSIONS = 20
ONE_SHOTS_PER_SESSION = 3
SEEN = "seen "

# The model of every run: it answers each request by writing down the ids of the events it is
# shown for the first time (those in the user messages since its last answer).
RECORDING_MODEL = textwrap.dedent(
    f"""
    import json
    from wakeful.messages import UserMessage
    from wakeful.models import FunctionModel, say

    def record(messages, tools):
        ids = []
        for message in reversed(messages):
            if not isinstance(message, UserMessage):
                break
            ids.extend(message.event_ids)
        return say({SEEN!r} + json.dumps(ids))

    recording_model = FunctionModel(record)
    """
)

RUNTIME = RECORDING_MODEL + textwrap.dedent(
    f"""
    import random
    import sys
    import anyio
    from wakeful.runtime import Runtime

    db, workdir, seed = sys.argv[1], sys.argv[2], sys.argv[3] == "seed"

    async def main():
        print("STARTING", flush=True)
        async with Runtime(model=recording_model, store_path=db, workdir=workdir,
                           with_core_tools=False, gate=None) as rt:
            if seed:
                rng = random.Random(0)
                for i in range({SESSIONS}):
                    await rt.timers.set_timer(session=f"s{{i}}", note=f"tick {{i}}",
                                              every_seconds=1)
                    for j in range({ONE_SHOTS_PER_SESSION}):
                        await rt.timers.set_timer(session=f"s{{i}}", note=f"once {{i}}.{{j}}",
                                                  delay_seconds=rng.uniform(0.1, 6.0))
            print("READY", flush=True)
            await anyio.sleep_forever()

    anyio.run(main)
    """
)


def read_line(proc: subprocess.Popen[str], timeout: float) -> str:
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    return proc.stdout.readline().strip() if ready else ""


def run_and_kill(
    script: Path, db: Path, tmp_path: Path, *, seed: bool, kill_after: float, during_start: bool
) -> None:
    """Start the runtime process and SIGKILL it `kill_after` seconds after it began starting
    the runtime (`during_start`) or after the runtime is up."""
    proc = subprocess.Popen(
        [sys.executable, str(script), str(db), str(tmp_path), "seed" if seed else "run"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert read_line(proc, 30) == "STARTING", proc.stderr.read() if proc.stderr else ""
        if not during_start:
            ready = read_line(proc, 30)
            assert ready == "READY", proc.stderr.read() if proc.stderr else ""
        time.sleep(kill_after)
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        end_process(proc)


def record_seen(messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> Turn:
    """The same recording model, in this process (for the last, orderly run)."""
    ids: list[str] = []
    for message in reversed(messages):
        if not isinstance(message, UserMessage):
            break
        ids.extend(message.event_ids)
    return say(SEEN + json.dumps(ids))


@pytest.mark.timeout(120)
def test_timers_fire_exactly_once_across_random_kills(tmp_path: Path) -> None:
    seed = int(os.environ.get("WAKEFUL_CHAOS_SEED", time.time_ns() % 1_000_000))
    rng = random.Random(seed)
    db = tmp_path / "wakeful.db"
    script = tmp_path / "runtime.py"
    script.write_text(RUNTIME)
    started = time.monotonic()
    run_and_kill(
        script, db, tmp_path, seed=True, kill_after=rng.uniform(0.3, 1.0), during_start=False
    )
    for run in range(7):
        during_start = run % 2 == 0
        kill_after = rng.uniform(0.0, 0.4) if during_start else rng.uniform(0.1, 1.5)
        run_and_kill(
            script, db, tmp_path, seed=False, kill_after=kill_after, during_start=during_start
        )
    # Every one-shot is due by now (the last was set at most 6 s after the first start).
    time.sleep(max(0.0, 6.5 - (time.monotonic() - started)))
    anyio.run(last_orderly_run, db, tmp_path, seed)


async def last_orderly_run(db: Path, tmp_path: Path, seed: int) -> None:
    """Recover what the kills left, let the one-shots fire, stop the interval timers, check."""
    context = f"(chaos seed {seed}; rerun with WAKEFUL_CHAOS_SEED={seed})"
    async with Runtime(
        model=FunctionModel(record_seen),
        store_path=db,
        workdir=tmp_path,
        with_core_tools=False,
        gate=None,
    ) as rt:
        store, timers = rt.store, rt.timers
        assert store is not None and timers is not None
        with anyio.fail_after(20):
            while any(t.kind == "once" for t in timers.list_timers()):  # noqa: ASYNC110
                await anyio.sleep(0.05)
            # Cancelled, the interval timers leave the store; their final records are these.
            cancelled = [await timers.cancel_timer(t.id) for t in timers.list_timers()]
            # Every fire stored so far reaches its agent (some may still be being handed on).
            while await store.pending_events() or not rt.is_idle():  # noqa: ASYNC110
                await anyio.sleep(0.05)
        stored = [s.event for s in await store.recent_events(limit=100_000)]
        # A cancelled timer's removal from the store may still be on its way: one record per
        # timer, the cancelled one's final record winning.
        by_id = {r.id: r for r in await store.timers()}
        by_id.update({r.id: r for r in cancelled})
        records = list(by_id.values())
        trajectories = {s: await store.load_trajectory(s) for s in await store.sessions()}

    fires = [e for e in stored if e.kind == TIMER_TRIGGER]
    fire_ids = {e.id for e in fires}
    # No occurrence of a timer fired twice (a fire and its timer's advance are one commit).
    occurrences = Counter((e.source.id, e.context["scheduled_for"]) for e in fires)
    assert [o for o, n in occurrences.items() if n > 1] == [], context
    # Every fire reached its agent exactly once, and the agent saw nothing else twice.
    seen: list[str] = []
    carried: list[str] = []
    for session, messages in trajectories.items():
        assert check_trajectory(messages) == [], (session, context)
        for message in messages:
            if isinstance(message, AssistantMessage) and message.content.startswith(SEEN):
                seen.extend(json.loads(message.content[len(SEEN) :]))
            elif isinstance(message, UserMessage):
                carried.extend(message.event_ids)
    assert [i for i, n in Counter(seen).items() if n > 1] == [], context
    assert [i for i, n in Counter(carried).items() if n > 1] == [], context
    assert set(seen) == fire_ids == set(carried), context
    # Each one-shot fired once, and every timer's count matches the fires stored for it.
    per_timer = Counter(e.source.id for e in fires)
    one_shots = [r for r in records if r.kind == "once"]
    assert len(one_shots) == SESSIONS * ONE_SHOTS_PER_SESSION, context
    assert all(not r.active and r.fire_count == 1 for r in one_shots), context
    assert all(per_timer[r.id] == r.fire_count for r in records), context
    assert sum(1 for r in records if r.kind == "every") == SESSIONS, context


BURST = textwrap.dedent(
    """
    import os
    import signal
    import sys
    from datetime import timedelta
    import anyio
    from wakeful.channels.timers import TimerService
    from wakeful.store.sqlite import Store

    async def main():
        async with await Store.open(sys.argv[1]) as store:

            async def killed_at_the_first_hand_over(event):
                os.kill(os.getpid(), signal.SIGKILL)

            service = TimerService(store, killed_at_the_first_hand_over)
            async with anyio.create_task_group() as tg:
                await tg.start(service.run)
                due = service.clock.now() + timedelta(seconds=1)
                for i in range(30):
                    await service.set_timer(session=f"s{i % 5}", note=f"n{i}", at=due)
                await anyio.sleep(30)

    anyio.run(main)
    """
)


@pytest.mark.timeout(60)
def test_a_kill_while_a_burst_is_handed_on_fires_none_of_it_again(tmp_path: Path) -> None:
    db = tmp_path / "wakeful.db"
    script = tmp_path / "burst.py"
    script.write_text(BURST)
    done = subprocess.run(
        [sys.executable, str(script), str(db)], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == -signal.SIGKILL, done.stderr

    async def restart() -> None:
        clock = FakeClock(datetime.now(UTC) + timedelta(seconds=1))
        async with await Store.open(db) as store, running(store, clock) as (service, events):
            await anyio.wait_all_tasks_blocked()
            with pytest.raises(anyio.WouldBlock):
                events.receive_nowait()
            assert service.list_timers() == []
            pending = await store.pending_events()
            assert len(pending) == 30 and {e.kind for e in pending} == {TIMER_TRIGGER}

    anyio.run(restart)
