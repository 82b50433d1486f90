"""Channels that pull, in a cluster of runtimes on one real PostgreSQL: a channel whose kind pulls
runs on exactly one worker while the others show standby; a worker killed with SIGKILL hands it
over within the lease time + 1 s; a clean stop hands it over at the standby's next attempt; a
worker that finds its role taken stops the channel at once, and writes no cursor after; channels
that do not pull run everywhere, and on SQLite every channel runs as before.

Run as ``python test_channel_roles.py URL NAME WORKDIR LEASE``, this file is the holder process
of the kill -9 test: a runtime with the pulling channel that prints ``{"ready": NAME}``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import TaskStatus
from pydantic import BaseModel

from wakeful.channels.registry import ChannelSpec
from wakeful.core.channel import ChannelContext, ChannelHealth, HandedOver
from wakeful.core.records import OutboundMessage
from wakeful.messages import Message
from wakeful.models import FunctionModel, Turn, say
from wakeful.models.base import ToolDefinition
from wakeful.runtime import Runtime

pytestmark = pytest.mark.anyio

CHANNEL = "pull:inbox"
ROLE = f"channel:{CHANNEL}"
POLL_SECONDS = 0.02

# The workspaces of the runtimes whose pulling channel runs now, in this process.
ACTIVE: list[str] = []
# What the pulling channels sent to the user: (workspace, text).
SENT: list[tuple[str, str]] = []


class PullSettings(BaseModel):
    pass


class PullChannel:
    """A stand-in for a mailbox followed over a connection of its own: while it runs, it counts
    itself in ACTIVE and writes its cursors every few milliseconds: the number of polls, who
    wrote last ("by"), and how often each worker wrote ("writes:<workspace>")."""

    def __init__(self, context: ChannelContext) -> None:
        self._context = context
        self._state = ChannelHealth("starting")

    @property
    def name(self) -> str:
        return self._context.name

    def health(self) -> ChannelHealth:
        return self._state

    async def send_to_user(self, message: OutboundMessage) -> str | None:
        SENT.append((self._context.workspace.name, message.text))
        return f"copy-{len(SENT)}"

    async def show_read(self, message: OutboundMessage, channel_message_id: str) -> bool:
        return False

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        who = self._context.workspace.name
        ACTIVE.append(who)
        try:
            self._state = ChannelHealth("running")
            task_status.started()
            cursors = self._context.cursors
            polls = int(await cursors.get(self.name, "polls") or 0)
            writes = int(await cursors.get(self.name, f"writes:{who}") or 0)
            while True:
                polls += 1
                writes += 1
                await self._context.cursors.put(self.name, f"writes:{who}", str(writes))
                await self._context.cursors.put(self.name, "polls", str(polls))
                await self._context.cursors.put(self.name, "by", who)
                await anyio.sleep(POLL_SECONDS)
        finally:
            ACTIVE.remove(who)
            self._state = ChannelHealth("stopped")


@dataclass(frozen=True)
class PullKind:
    kind: str = "pull"
    pulls: bool = True

    @property
    def settings_model(self) -> type[BaseModel]:
        return PullSettings

    def build(self, settings: Any, context: ChannelContext) -> PullChannel:
        return PullChannel(context)


def quiet(msgs: Sequence[Message], tools: Sequence[ToolDefinition]) -> Turn:
    return say("")


def runtime(workdir: Path, **options: Any) -> Runtime:
    from line_channels import KIND as LINE_KIND

    workdir.mkdir(parents=True, exist_ok=True)
    return Runtime(
        model=FunctionModel(quiet),
        workdir=workdir,
        channels=[
            ChannelSpec("pull", "inbox"),
            ChannelSpec("lines", "feed", {"path": str(workdir / "feed.jsonl")}),
        ],
        channel_kinds={"pull": PullKind(), "lines": LINE_KIND},
        **options,
    )


@asynccontextmanager
async def worker(url: str, workdir: Path, name: str, lease_s: float) -> AsyncIterator[Runtime]:
    from wakeful.runtime.worker import SessionCluster

    rt = runtime(workdir, store_url=url)
    rt.cluster = SessionCluster(lease_seconds=lease_s, name=name)
    async with rt:
        yield rt


def blocking_sql(url: str, query: str, params: tuple[object, ...]) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        cursor = conn.execute(query.encode(), params)
        return cursor.fetchall() if cursor.description else []


async def sql(url: str, query: str, params: tuple[object, ...] = ()) -> list[tuple[Any, ...]]:
    """Run `query` on a connection of its own, off the event loop (the runtimes keep running)."""
    return await anyio.to_thread.run_sync(blocking_sql, url, query, params)


async def until(condition: Callable[[], bool], seconds: float, what: str) -> float:
    """Wait until `condition()` holds; the seconds it took."""
    start = time.monotonic()
    while not condition():
        if time.monotonic() - start > seconds:
            raise AssertionError(f"{what} did not happen within {seconds} s")
        await anyio.sleep(0.02)
    return time.monotonic() - start


def state(rt: Runtime) -> ChannelHealth:
    return rt.channels[CHANNEL]


async def until_stored(
    query: Callable[[], Awaitable[object]], expected: object, seconds: float, what: str
) -> None:
    """Wait until `query()` returns `expected` (polling the database)."""
    start = time.monotonic()
    while (found := await query()) != expected:
        if time.monotonic() - start > seconds:
            raise AssertionError(f"{what}: still {found!r} after {seconds} s")
        await anyio.sleep(0.02)


async def cursor(url: str, key: str) -> str | None:
    rows = await sql(
        url, "SELECT value FROM channel_cursors WHERE channel = %s AND key = %s", (CHANNEL, key)
    )
    return str(rows[0][0]) if rows else None


@pytest.fixture(autouse=True)
def no_active_channels() -> None:
    ACTIVE.clear()
    SENT.clear()


async def test_a_pulling_channel_runs_on_one_worker_and_the_other_shows_standby(
    postgres_url: str, tmp_path: Path
) -> None:
    pytest.importorskip("psycopg", reason="psycopg is missing: pip install -e '.[postgres]'")
    async with (
        worker(postgres_url, tmp_path / "a", "alpha", 1.5) as alpha,
        worker(postgres_url, tmp_path / "b", "beta", 1.5) as beta,
    ):
        await until(lambda: len(ACTIVE) == 1, 20, "the channel running on one worker")
        holder, standby = (alpha, beta) if ACTIVE == ["a"] else (beta, alpha)
        holder_name = "alpha" if holder is alpha else "beta"
        # Through several renewals and standby attempts (every 0.5 s), never twice at once.
        deadline = time.monotonic() + 2.5
        while time.monotonic() < deadline:
            assert len(ACTIVE) == 1, ACTIVE
            assert state(holder).state == "running"
            assert state(standby).state == "standby"
            await anyio.sleep(0.05)
        assert state(standby).detail.startswith(f"standby: run by worker {holder_name} (")
        assert "lease expires in" in state(standby).detail
        # Only the holder wrote the channel's cursors; a channel that does not pull runs on both.
        assert await cursor(postgres_url, "by") == ACTIVE[0]
        assert alpha.channels["lines:feed"].state == beta.channels["lines:feed"].state == "running"


async def test_a_standby_worker_hands_a_message_on_the_channel_to_the_holder(
    postgres_url: str, tmp_path: Path
) -> None:
    """The channel counts as reachable on the standby worker while another worker runs it, and
    a message sent there is handed over (tests/runtime/test_channel_handoff.py follows it to
    the holder's send); the holder sends on it itself."""
    pytest.importorskip("psycopg", reason="psycopg is missing: pip install -e '.[postgres]'")
    async with (
        worker(postgres_url, tmp_path / "a", "alpha", 1.5) as alpha,
        worker(postgres_url, tmp_path / "b", "beta", 1.5) as beta,
    ):
        await until(lambda: len(ACTIVE) == 1, 20, "the channel running on one worker")
        holder, standby = (alpha, beta) if ACTIVE == ["a"] else (beta, alpha)
        holder_reach, standby_reach = holder.outbox.reach, standby.outbox.reach
        assert holder_reach is not None and standby_reach is not None
        assert CHANNEL in holder_reach.reachable()
        await until(
            lambda: CHANNEL in standby_reach.reachable(), 5, "the standby seeing the holder"
        )
        message = OutboundMessage(
            "msg_1", "main", "2026-12-02T00:00:00Z", "normal", "text", "hello"
        )
        with pytest.raises(HandedOver, match="was handed over"):
            await standby_reach.send_to_user(CHANNEL, message)
        assert await holder_reach.send_to_user(CHANNEL, message) == "copy-1"
        assert (ACTIVE[0], "hello") in SENT


async def test_a_clean_stop_hands_the_channel_over_at_the_next_attempt(
    postgres_url: str, tmp_path: Path
) -> None:
    pytest.importorskip("psycopg", reason="psycopg is missing: pip install -e '.[postgres]'")
    lease_s = 6.0  # the standby tries every 2 s; an expiry would take up to 6 s
    stop_alpha, alpha_stopped = anyio.Event(), anyio.Event()

    async def alpha(*, task_status: TaskStatus[None]) -> None:
        async with worker(postgres_url, tmp_path / "a", "alpha", lease_s):
            task_status.started()
            await stop_alpha.wait()
        alpha_stopped.set()

    async with anyio.create_task_group() as tg:
        await tg.start(alpha)
        await until(lambda: ACTIVE == ["a"], 20, "the channel running on alpha")
        async with worker(postgres_url, tmp_path / "b", "beta", lease_s) as beta:
            assert state(beta).state == "standby"
            stop_alpha.set()  # a clean stop
            await alpha_stopped.wait()
            assert ACTIVE == []
            taken = await until(
                lambda: state(beta).state == "running", lease_s + 15, "the handover"
            )
            # Released, not expired: an expiry comes 4-6 s after the stop (renewed every 2 s).
            assert taken < lease_s * 2 / 3
            assert ACTIVE == ["b"]


async def test_a_worker_that_finds_its_role_taken_stops_the_channel_at_once(
    postgres_url: str, tmp_path: Path
) -> None:
    pytest.importorskip("psycopg", reason="psycopg is missing: pip install -e '.[postgres]'")
    lease_s = 6.0  # renewed every 2 s
    async with worker(postgres_url, tmp_path / "a", "alpha", lease_s) as alpha:
        await until(lambda: ACTIVE == ["a"], 20, "the channel running")
        # Another worker took the role (as after a freeze past the lease).
        await sql(
            postgres_url,
            "UPDATE role_leases SET owner = 'thief', epoch = epoch + 1, "
            "expires_at = clock_timestamp() + interval '1 hour' WHERE role = %s",
            (ROLE,),
        )
        stopped = await until(lambda: not ACTIVE, 20, "the channel stopping")
        assert stopped < lease_s  # at the next renewal, before its lease could have run out
        assert state(alpha).state == "standby"
        polls = await cursor(postgres_url, "polls")
        await until(lambda: "run by worker thief" in state(alpha).detail, 15, "the standby note")
        await anyio.sleep(0.2)
        assert await cursor(postgres_url, "polls") == polls  # no cursor written after
        assert alpha.channels["lines:feed"].state == "running"


async def test_a_killed_holder_hands_the_channel_over_within_the_lease_and_a_second(
    postgres_url: str, tmp_path: Path
) -> None:
    pytest.importorskip("psycopg", reason="psycopg is missing: pip install -e '.[postgres]'")
    lease_s = 2.0
    with holder_process(postgres_url, tmp_path / "k", "killed", lease_s) as process:
        await until_stored(partial(cursor, postgres_url, "by"), "k", 15, "the holder's run")
        async with worker(postgres_url, tmp_path / "s", "survivor", lease_s) as survivor:
            await until(lambda: state(survivor).state == "standby", 20, "standby")
            assert "run by worker killed" in state(survivor).detail
            await anyio.sleep(1.0)
            assert ACTIVE == []
            os.kill(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
            # Within the lease time + 1 s on a quiet machine (bench/wake_across_workers.py
            # measures failover); here only that it happens, however loaded the machine.
            await until(lambda: ACTIVE == ["s"], lease_s + 15, "the takeover")
            assert state(survivor).state == "running"


async def test_a_holder_frozen_past_its_lease_writes_no_cursor_when_it_resumes(
    postgres_url: str, tmp_path: Path
) -> None:
    pytest.importorskip("psycopg", reason="psycopg is missing: pip install -e '.[postgres]'")
    lease_s = 2.0
    with holder_process(postgres_url, tmp_path / "f", "frozen", lease_s) as process:
        await until_stored(partial(cursor, postgres_url, "by"), "f", 15, "the holder's run")
        async with worker(postgres_url, tmp_path / "s", "survivor", lease_s) as survivor:
            await until(lambda: state(survivor).state == "standby", 20, "standby")
            os.kill(process.pid, signal.SIGSTOP)
            try:
                # Frozen inside a cursor write, the holder keeps the role's row locked until the
                # server ends its transaction (idle_in_transaction_session_timeout, 10 s); the
                # survivor takes the role then. Generous: a loaded machine makes new connections
                # slowly, and each cancelled take attempt costs one.
                from wakeful.store.postgres.leases import IDLE_IN_TRANSACTION_TIMEOUT_S

                within = lease_s + IDLE_IN_TRANSACTION_TIMEOUT_S + 30
                await until(lambda: ACTIVE == ["s"], within, "the takeover")
                await until_stored(partial(cursor, postgres_url, "by"), "s", 15, "its cursor")
                frozen_writes = await cursor(postgres_url, "writes:f")
            finally:
                os.kill(process.pid, signal.SIGCONT)
            # Resumed, its channel's writes come before its renewal finds the role lost: they
            # are refused, and the survivor's cursors stand.
            await anyio.sleep(2.0)
            assert await cursor(postgres_url, "writes:f") == frozen_writes
            assert await cursor(postgres_url, "by") == "s"
            owner = await sql(
                postgres_url, "SELECT owner FROM role_leases WHERE role = %s", (ROLE,)
            )
            assert owner == [("survivor",)]
            assert ACTIVE == ["s"]


async def test_on_sqlite_a_pulling_channel_simply_runs(tmp_path: Path) -> None:
    async with runtime(tmp_path / "one", store_path=tmp_path / "w.db") as rt:
        await until(lambda: ACTIVE == ["one"], 20, "the channel running")
        assert state(rt).state == "running"


class holder_process:
    """This file run as the holder process; killed (if still alive) on exit."""

    def __init__(self, url: str, workdir: Path, name: str, lease_s: float) -> None:
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (closed in __exit__)
        tests = str(Path(__file__).parents[1])
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([tests, os.environ.get("PYTHONPATH", "")]),
        }
        self.process = subprocess.Popen(
            [sys.executable, __file__, url, name, str(workdir), str(lease_s)],
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            env=env,
        )

    def __enter__(self) -> subprocess.Popen[str]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if json.loads(line or "{}").get("ready") is None:
            self._stderr.seek(0)
            raise AssertionError(self._stderr.read().decode(errors="replace")[-3000:])
        return self.process

    def __exit__(self, *exc: object) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        assert self.process.stdout is not None
        self.process.stdout.close()
        self._stderr.close()


async def _hold(url: str, name: str, workdir: Path, lease_s: float) -> None:
    async with worker(url, workdir, name, lease_s):
        print(json.dumps({"ready": name}), flush=True)
        await anyio.sleep_forever()


if __name__ == "__main__":
    anyio.run(_hold, sys.argv[1], sys.argv[2], Path(sys.argv[3]), float(sys.argv[4]))
