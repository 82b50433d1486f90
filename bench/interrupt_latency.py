"""Interrupt latency: how fast an urgent event stops what the agent is doing.

Three latencies, each from the moment `Runtime.submit` is called with the event:

(a) an urgent event → the model's stream is cancelled (the moment the stream generator sees the
    cancellation; the row below it is when the session reports the turn discarded);
(b) a user.interrupt during an inline `run_shell("sleep 30")` → the command's process group is
    dead (every member has exited, and the sandbox's bubblewrap processes above it when it runs
    sandboxed, as by default; woken by a pidfd per member, no polling). The row below it is
    when the session has recorded the call's cancellation result, i.e. when the runtime itself
    has seen the group gone and moves on;
(c) an urgent event → the next model request is issued (the moment `stream()` is called again).

The model is wakeful's FunctionModel streaming a long text in chunks (5 ms apart), wrapped in a
bench-only Model that timestamps each request and the cancellation of its stream. Each trial runs
in a fresh session of one Runtime; the event lands at a random moment (0-10 ms) after the first
chunk. The whole set runs twice: without a store, and with the SQLite store on as the Runtime
opens it by default (`store_synchronous="normal"`; `submit` first commits the event). A few
warm-up trials are discarded.

    python bench/interrupt_latency.py [--trials 100] [--quick] [--other-processes N]

`--other-processes 1000` starts that many idle `sleep` processes first, as on a busy machine:
telling a live process group from one left with zombies scans /proc, which costs more the more
processes there are, so (b) is worth checking there too.
"""

from __future__ import annotations

import argparse
import os
import random
import select
import subprocess
import tempfile
import threading
import time
from collections.abc import AsyncGenerator, Iterator, Sequence
from contextlib import aclosing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import anyio.to_thread

from report import Table, header, percentile, verdict
from wakeful.events import EMAIL_RECEIVED, Event, Source, user_input, user_interrupt
from wakeful.messages import Message, ToolMessage, UserMessage
from wakeful.models import FunctionModel, Turn, call, say
from wakeful.models.base import Model, ModelRequest, StreamPart, TextDelta, ToolDefinition
from wakeful.runtime import Runtime
from wakeful.toolkits.execution.run_shell import run_shell
from wakeful.tools.process import group_has_live_members

TARGET_P99_MS = 50.0
STREAM_PROMPT = "stream a long answer"
SHELL_PROMPT = "run the long command"
SHELL_COMMAND = "sleep 30"
CHUNK_DELAY_SECONDS = 0.005
MAX_OFFSET_SECONDS = 0.010
TRIAL_TIMEOUT_SECONDS = 10.0


def script(messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> Turn:
    """Stream slowly after the stream prompt, run the command after the shell prompt, else stop."""
    last = messages[-1]
    if isinstance(last, UserMessage) and last.content == STREAM_PROMPT:
        return Turn(text="word " * 2000, chunk_delay=CHUNK_DELAY_SECONDS)
    if isinstance(last, UserMessage) and last.content == SHELL_PROMPT:
        return Turn(tool_calls=[call("run_shell", command=SHELL_COMMAND)])
    return say("ok")


class TimedModel(Model):
    """Delegates to another model and timestamps each request and each cancelled stream."""

    def __init__(self, inner: Model) -> None:
        self.inner = inner
        self.name = f"timed {inner.name}"
        self.reset()

    def reset(self) -> None:
        self.requested_at: list[float] = []
        self.cancelled_at: float | None = None
        self.streaming = anyio.Event()

    def stream(self, request: ModelRequest) -> AsyncGenerator[StreamPart, None]:
        self.requested_at.append(time.perf_counter())
        return self._timed(self.inner.stream(request))

    async def _timed(
        self, parts: AsyncGenerator[StreamPart, None]
    ) -> AsyncGenerator[StreamPart, None]:
        finished = False
        try:
            async with aclosing(parts):
                async for part in parts:
                    if isinstance(part, TextDelta):
                        self.streaming.set()
                    yield part
            finished = True
        finally:
            if not finished:
                self.cancelled_at = time.perf_counter()


@dataclass
class TimedObserver:
    """Timestamps the session's reports: a discarded turn, a cancelled tool result."""

    discarded_at: float | None = None
    cancelled_result_at: float | None = None

    def reset(self) -> None:
        self.discarded_at = self.cancelled_result_at = None

    def on_message(self, session: str, message: Message) -> None:
        if isinstance(message, ToolMessage) and message.status == "cancelled":
            self.cancelled_result_at = time.perf_counter()

    def on_stream_part(self, session: str, part: StreamPart) -> None:
        pass

    def on_turn_discarded(self, session: str, reason: str) -> None:
        self.discarded_at = time.perf_counter()


class ExitWatch(threading.Thread):
    """Records the moment every process in a set has exited, woken by pidfds rather than polls.

    A process counts as exited when it is a zombie too: where PID 1 does not reap orphans, that
    is as dead as it gets (see `wakeful.tools.process.group_has_live_members`).
    """

    def __init__(self, pids: Sequence[int]) -> None:
        super().__init__(name="exit watch", daemon=True)
        self.pidfds = [os.pidfd_open(pid) for pid in pids]
        self.armed = threading.Event()
        self.exited_at: float | None = None

    def run(self) -> None:
        poller = select.poll()
        for fd in self.pidfds:
            poller.register(fd, select.POLLIN)
        remaining = set(self.pidfds)
        deadline = time.monotonic() + TRIAL_TIMEOUT_SECONDS
        self.armed.set()
        try:
            while remaining and time.monotonic() < deadline:
                for fd, _ in poller.poll(100):
                    remaining.discard(fd)
                    poller.unregister(fd)
            if not remaining:
                self.exited_at = time.perf_counter()
        finally:
            for fd in self.pidfds:
                os.close(fd)


@dataclass(frozen=True)
class ProcessGroup:
    pgid: int
    members: list[int]


def find_command_group(parent: int, command_name: bytes) -> ProcessGroup | None:
    """The process group in which `command_name` runs under `parent`, if any, with every live
    process from `parent`'s child down: the command's group and, when the command runs in the
    sandbox, the bubblewrap processes above it (their own group), which die with it."""
    stats: dict[int, tuple[bytes, bytes, int, int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            raw = Path("/proc", entry, "stat").read_bytes()
        except OSError:
            continue  # it ended while we looked
        comm = raw[raw.index(b"(") + 1 : raw.rindex(b")")]
        fields = raw[raw.rindex(b")") + 2 :].split()
        stats[int(entry)] = (comm, fields[0], int(fields[1]), int(fields[2]))
    children: dict[int, list[int]] = {}
    for pid, (_, _, ppid, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    for child in children.get(parent, []):
        tree, todo = [], [child]
        while todo:
            pid = todo.pop()
            if stats[pid][1] not in (b"Z", b"X"):
                tree.append(pid)
            todo.extend(children.get(pid, []))
        command = [pid for pid in tree if stats[pid][0] == command_name]
        if command:
            return ProcessGroup(stats[command[0]][3], tree)
    return None


@dataclass
class Samples:
    """Latencies in milliseconds, by measurement."""

    by_name: dict[str, list[float]] = field(default_factory=dict)
    failures: dict[str, int] = field(default_factory=dict)

    def add(self, name: str, start: float, end: float | None) -> None:
        if end is None:
            self.failures[name] = self.failures.get(name, 0) + 1
            return
        self.by_name.setdefault(name, []).append((end - start) * 1e3)


A_CANCELLED = "(a) urgent event → model stream cancelled"
A_DISCARDED = "    … → session reports the turn discarded"
C_REQUEST = "(c) urgent event → next model request issued"
B_DEAD = "(b) user.interrupt → `sleep 30` process group dead"
B_RECORDED = "    … → cancellation result recorded"
TARGETS = {A_CANCELLED: TARGET_P99_MS, C_REQUEST: TARGET_P99_MS, B_DEAD: TARGET_P99_MS}


class Bench:
    def __init__(self, rt: Runtime, model: TimedModel, observer: TimedObserver) -> None:
        self.rt = rt
        self.model = model
        self.observer = observer
        self.rng = random.Random(0)
        self.trial = 0

    def _session(self) -> str:
        self.trial += 1
        return f"trial-{self.trial}"

    async def stream_trial(self, samples: Samples | None) -> None:
        session = self._session()
        self.model.reset()
        self.observer.reset()
        with anyio.fail_after(TRIAL_TIMEOUT_SECONDS):
            await self.rt.submit(user_input(STREAM_PROMPT, session=session))
            await self.model.streaming.wait()
            await anyio.sleep(self.rng.uniform(0, MAX_OFFSET_SECONDS))
            urgent = Event(
                kind=EMAIL_RECEIVED,
                source=Source(type="contact", id="boss"),
                channel="email",
                content="The server is down, call me now.",
                urgency="urgent",
                session=session,
            )
            start = time.perf_counter()
            await self.rt.submit(urgent)
            await self.rt.wait_idle()
        if samples is not None:
            samples.add(A_CANCELLED, start, self.model.cancelled_at)
            samples.add(A_DISCARDED, start, self.observer.discarded_at)
            second = self.model.requested_at[1] if len(self.model.requested_at) > 1 else None
            samples.add(C_REQUEST, start, second)

    async def shell_trial(self, samples: Samples | None) -> None:
        session = self._session()
        self.model.reset()
        self.observer.reset()
        with anyio.fail_after(TRIAL_TIMEOUT_SECONDS):
            await self.rt.submit(user_input(SHELL_PROMPT, session=session))
            group = None
            while group is None:
                group = await anyio.to_thread.run_sync(find_command_group, os.getpid(), b"sleep")
                if group is None:
                    await anyio.sleep(0.001)
            watch = ExitWatch(group.members)
            watch.start()
            await anyio.to_thread.run_sync(watch.armed.wait)
            await anyio.sleep(self.rng.uniform(0, MAX_OFFSET_SECONDS))
            start = time.perf_counter()
            await self.rt.submit(user_interrupt(session=session))
            await self.rt.wait_idle()
        watch.join()
        if group_has_live_members(group.pgid):
            raise RuntimeError(f"Process group {group.pgid} still has live members.")
        if samples is not None:
            samples.add(B_DEAD, start, watch.exited_at)
            samples.add(B_RECORDED, start, self.observer.cancelled_result_at)


async def run_config(store_path: Path | None, trials: int, warmup: int) -> Samples:
    model = TimedModel(FunctionModel(script))
    observer = TimedObserver()
    rt = Runtime(
        model=model,
        tools=[run_shell],
        with_core_tools=False,
        with_timers=False,
        store_path=store_path,
        observer=observer,
    )
    samples = Samples()
    async with rt:
        bench = Bench(rt, model, observer)
        for _ in range(warmup):
            await bench.stream_trial(None)
            await bench.shell_trial(None)
        for _ in range(trials):
            await bench.stream_trial(samples)
        for _ in range(trials):
            await bench.shell_trial(samples)
    return samples


@contextmanager
def other_processes(count: int) -> Iterator[None]:
    """Keep `count` idle processes running (children of this one, so they are reaped)."""
    sleepers = [subprocess.Popen(["sleep", "600"]) for _ in range(count)]
    try:
        yield
    finally:
        for sleeper in sleepers:
            sleeper.kill()
        for sleeper in sleepers:
            sleeper.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--quick", action="store_true", help="20 trials each")
    parser.add_argument(
        "--other-processes", type=int, default=0, help="idle processes to run meanwhile"
    )
    args = parser.parse_args()
    trials = 20 if args.quick else args.trials
    warmup = 3 if args.quick else 5

    results: dict[str, Samples] = {}
    with other_processes(args.other_processes), tempfile.TemporaryDirectory() as tmp:
        processes = sum(1 for entry in os.listdir("/proc") if entry.isdigit())
        results["none"] = anyio.run(run_config, None, trials, warmup)
        results["SQLite"] = anyio.run(run_config, Path(tmp) / "bench.db", trials, warmup)

    header(
        f"Interrupt latency: {trials} trials per row, milliseconds from Runtime.submit; "
        f"{processes} processes on the machine"
    )
    table = Table(
        ["measurement", "store", "n", "p50 ms", "p99 ms", "max ms", "target p99", "result"]
    )
    for name in (A_CANCELLED, A_DISCARDED, C_REQUEST, B_DEAD, B_RECORDED):
        for store, samples in results.items():
            values = samples.by_name.get(name, [])
            failed = samples.failures.get(name, 0)
            if not values:
                table.add(name, store, 0, "-", "-", "-", "", f"{failed} failed")
                continue
            p99 = percentile(values, 99)
            target = TARGETS.get(name)
            result = verdict(p99, target) if target is not None else "(info)"
            if failed:
                result += f", {failed} failed"
            table.add(
                name,
                store,
                len(values),
                percentile(values, 50),
                p99,
                max(values),
                f"≤ {target:g} ms" if target is not None else "",
                result,
            )
    table.print()


if __name__ == "__main__":
    main()
