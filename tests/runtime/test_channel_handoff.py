"""Messages to the user on a channel that pulls, in a cluster of runtimes on one real PostgreSQL,
when the session's worker is not the one running the channel: the session's worker hands the
message over (its delivery stays "queued") and the holder of the channel's role sends it, once,
recording it "sent" with its copy's id; a message handed over while the holder is frozen or dead
is sent by the next holder; a channel no live worker runs is not reachable (the console gets the
message, as before); `wakeful workers` shows who holds which role.

Run as ``python test_channel_handoff.py URL NAME WORKDIR LEASE``, this file is the holder process
of the freeze-then-kill test: a runtime with the pulling channel that prints ``{"ready": NAME}``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import TaskStatus
from pydantic import BaseModel
from typer.testing import CliRunner

from wakeful.channels.registry import ChannelSpec
from wakeful.cli.app import app
from wakeful.core.channel import ChannelContext, ChannelHealth
from wakeful.core.records import OutboundMessage
from wakeful.events import user_input
from wakeful.messages import Message, UserMessage
from wakeful.models import FunctionModel, Turn, call, say, use
from wakeful.models.base import ToolDefinition
from wakeful.runtime import Runtime

pytest.importorskip("psycopg", reason="psycopg is missing: pip install -e '.[postgres]'")

import psycopg

from wakeful.runtime.worker import SessionCluster

pytestmark = pytest.mark.anyio

CHANNEL = "pull:chat"
ROLE = f"channel:{CHANNEL}"

# What the pulling channels of this process sent to the user: (workspace, text).
SENT: list[tuple[str, str]] = []


class PullSettings(BaseModel):
    pass


class PullChat:
    """A stand-in for a Telegram bot read with getUpdates: it runs (and sends) only on the
    worker holding its role; each copy's id names the workspace that sent it."""

    def __init__(self, context: ChannelContext) -> None:
        self._context = context
        self._state = ChannelHealth("starting")

    @property
    def name(self) -> str:
        return self._context.name

    def health(self) -> ChannelHealth:
        return self._state

    async def send_to_user(self, message: OutboundMessage) -> str | None:
        who = self._context.workspace.name
        SENT.append((who, message.text))
        return f"{who}:{len(SENT)}"

    async def show_read(self, message: OutboundMessage, channel_message_id: str) -> bool:
        return False

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        self._state = ChannelHealth("running")
        task_status.started()
        await anyio.sleep_forever()


@dataclass(frozen=True)
class PullChatKind:
    kind: str = "pull"
    pulls: bool = True

    @property
    def settings_model(self) -> type[BaseModel]:
        return PullSettings

    def build(self, settings: Any, context: ChannelContext) -> PullChat:
        return PullChat(context)


def answer(msgs: Sequence[Message], tools: Sequence[ToolDefinition]) -> Turn:
    last = msgs[-1]
    if isinstance(last, UserMessage):
        return use(call("reply_to_user", text=f"You said: {last.content}"))
    return say("")


@asynccontextmanager
async def worker(
    url: str, workdir: Path, name: str, lease_s: float, *, pulls: bool = True
) -> AsyncIterator[Runtime]:
    """A runtime as one worker of the cluster; with `pulls`, the pulling channel configured."""
    async with runtime(url, workdir, name, lease_s, pulls) as rt:
        yield rt


def runtime(url: str, workdir: Path, name: str, lease_s: float, pulls: bool) -> Runtime:
    workdir.mkdir(parents=True, exist_ok=True)
    rt = Runtime(
        model=FunctionModel(answer),
        workdir=workdir,
        store_url=url,
        with_timers=False,
        channels=[ChannelSpec("pull", "chat")] if pulls else [],
        channel_kinds={"pull": PullChatKind()},
    )
    rt.cluster = SessionCluster(lease_seconds=lease_s, name=name)
    return rt


def sql(url: str, query: str, params: tuple[object, ...] = ()) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        cursor = conn.execute(query.encode(), params)
        return cursor.fetchall() if cursor.description else []


def deliveries(url: str, session: str) -> list[tuple[str, str, str | None]]:
    """(channel, state, copy id) of every delivery of `session`'s messages, in order."""
    return [
        (str(channel), str(state), copy)
        for channel, state, copy in sql(
            url,
            "SELECT d.channel, d.state, d.channel_message_id FROM message_deliveries d "
            "JOIN messages m ON m.id = d.message_id WHERE m.session = %s ORDER BY m.seq, d.seq",
            (session,),
        )
    ]


def handoffs(url: str) -> list[tuple[str, str]]:
    return [(str(r), str(m)) for r, m in sql(url, "SELECT role, message_id FROM role_handoffs")]


async def until(condition: Callable[[], bool], seconds: float, what: str) -> float:
    """Wait until `condition()` holds; the seconds it took."""
    start = time.monotonic()
    while not condition():
        if time.monotonic() - start > seconds:
            raise AssertionError(f"{what} did not happen within {seconds} s")
        await anyio.sleep(0.05)
    return time.monotonic() - start


def standby_under(rt: Runtime, holder: str) -> bool:
    health = rt.channels[CHANNEL]
    return health.state == "standby" and f"run by worker {holder} " in health.detail


@pytest.fixture(autouse=True)
def nothing_sent() -> None:
    SENT.clear()


async def test_a_reply_of_a_session_on_another_worker_is_sent_once_by_the_holder(
    postgres_url: str, tmp_path: Path
) -> None:
    async with worker(postgres_url, tmp_path / "h", "holder", 1.5) as holder:
        await until(lambda: holder.channels[CHANNEL].state == "running", 20, "the holder's run")
        async with worker(postgres_url, tmp_path / "o", "owner", 1.5) as owner:
            await until(lambda: standby_under(owner, "holder"), 20, "the owner's standby")
            reach = owner.outbox.reach
            assert reach is not None and CHANNEL in reach.reachable()
            # The user wrote on the channel; the session runs on the owner, not the holder.
            assert owner.cluster is not None and owner.cluster.ownership is not None
            await owner.cluster.ownership.route("chat")
            await owner.submit(user_input("hello", session="chat", channel=CHANNEL))
            await until(lambda: bool(SENT), 20, "the reply on the channel")
            assert "chat" in owner.sessions and "chat" not in holder.sessions
            await anyio.sleep(1.5)  # several polls of the holder later: still once
            assert SENT == [("h", "You said: hello")]
            assert deliveries(postgres_url, "chat") == [(CHANNEL, "sent", "h:1")]
            assert handoffs(postgres_url) == []
            # The copy's id traces a read receipt back to the message, on either worker.
            assert await owner.outbox.copy_read(CHANNEL, "h:1")
            assert deliveries(postgres_url, "chat") == [(CHANNEL, "read", "h:1")]

            listed = await anyio.to_thread.run_sync(workers_json, postgres_url)
            assert listed == {"holder": [ROLE], "owner": []}


async def test_a_reply_to_a_user_who_wrote_on_the_holders_channel_goes_back_there(
    postgres_url: str, tmp_path: Path
) -> None:
    async with worker(postgres_url, tmp_path / "h", "holder", 1.5) as holder:
        await until(lambda: holder.channels[CHANNEL].state == "running", 20, "the holder's run")
        async with worker(postgres_url, tmp_path / "o", "owner", 1.5) as owner:
            await until(lambda: standby_under(owner, "holder"), 20, "the owner's standby")
            assert owner.cluster is not None and owner.cluster.ownership is not None
            await owner.cluster.ownership.route("chat")
            # The user's message arrives through the channel, on the holder.
            await holder.submit(user_input("hello", session="chat", channel=CHANNEL))
            await until(lambda: bool(deliveries(postgres_url, "chat")), 20, "the reply")
            assert "chat" in owner.sessions and "chat" not in holder.sessions
            await until(lambda: bool(SENT), 15, "the reply on the channel")
            assert SENT == [("h", "You said: hello")]


def workers_json(url: str) -> dict[str, list[str]]:
    result = CliRunner().invoke(app, ["workers", "--store", url, "--json"])
    assert result.exit_code == 0, result.output
    return {w["worker"]: w["roles"] for w in map(json.loads, result.output.splitlines())}


async def test_the_workers_table_shows_the_roles_each_worker_holds(
    postgres_url: str, tmp_path: Path
) -> None:
    async with worker(postgres_url, tmp_path / "h", "holder", 30) as holder:
        await until(lambda: holder.channels[CHANNEL].state == "running", 20, "the holder's run")
        async with worker(postgres_url, tmp_path / "o", "owner", 30, pulls=False):

            def table() -> str:
                env = {"COLUMNS": "250"}
                result = CliRunner().invoke(app, ["workers", "--store", postgres_url], env=env)
                assert result.exit_code == 0, result.output
                return result.output

            rows = {
                line.split()[0]: line
                for line in (await anyio.to_thread.run_sync(table)).splitlines()
            }
            assert "ROLES" in rows["WORKER"]
            assert rows["holder"].rstrip().endswith(ROLE)
            assert rows["owner"].rstrip().endswith("-")


async def test_a_message_handed_over_to_a_holder_that_froze_and_died_is_sent_by_the_next(
    postgres_url: str, tmp_path: Path
) -> None:
    lease_s = 2.0
    with holder_process(postgres_url, tmp_path / "k", "killed", lease_s) as process:
        async with worker(postgres_url, tmp_path / "s", "survivor", lease_s) as survivor:
            await until(lambda: standby_under(survivor, "killed"), 20, "the survivor's standby")
            os.kill(process.pid, signal.SIGSTOP)  # frozen: its role lease still runs
            reach = survivor.outbox.reach
            assert reach is not None and CHANNEL in reach.reachable()
            message = await survivor.outbox.send("trip", "Your flight moved.", channel=CHANNEL)
            assert [(d.channel, d.state) for d in message.deliveries] == [(CHANNEL, "queued")]
            assert handoffs(postgres_url) == [(ROLE, message.id)]
            os.kill(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
            # Nobody alive holds the role until its lease runs out; then the survivor takes it
            # and sends what was handed over meanwhile.
            await until(lambda: bool(SENT), lease_s + 15, "the send by the next holder")
            await anyio.sleep(1.0)
            assert SENT == [("s", "Your flight moved.")]
            assert deliveries(postgres_url, "trip") == [(CHANNEL, "sent", "s:1")]
            assert handoffs(postgres_url) == []


async def test_a_channel_no_live_worker_runs_is_not_reachable_and_the_console_gets_the_reply(
    postgres_url: str, tmp_path: Path
) -> None:
    # The user wrote on a channel only a worker now gone ran (its event is in the store): this
    # worker does not run it, so nothing is handed over and the reply goes to the console.
    async with worker(postgres_url, tmp_path / "o", "owner", 1.5, pulls=False) as owner:
        reach = owner.outbox.reach
        assert reach is not None and CHANNEL not in reach.reachable()
        await owner.submit(user_input("hello", session="chat", channel=CHANNEL))
        await until(lambda: bool(deliveries(postgres_url, "chat")), 20, "the reply")
        # Kept for the console (none is attached to this worker), as before the hand-over.
        assert deliveries(postgres_url, "chat") == [("console", "queued", None)]
        assert handoffs(postgres_url) == []
        assert SENT == []


class holder_process:
    """This file run as the holder process; killed (if still alive) on exit."""

    def __init__(self, url: str, workdir: Path, name: str, lease_s: float) -> None:
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (closed in __exit__)
        self.process = subprocess.Popen(
            [sys.executable, __file__, url, name, str(workdir), str(lease_s)],
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
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
            os.kill(self.process.pid, signal.SIGCONT)
            self.process.kill()
            self.process.wait(timeout=10)
        assert self.process.stdout is not None
        self.process.stdout.close()
        self._stderr.close()


async def _hold(url: str, name: str, workdir: Path, lease_s: float) -> None:
    async with worker(url, workdir, name, lease_s) as rt:
        await until(lambda: rt.channels[CHANNEL].state == "running", 30, "the channel's run")
        print(json.dumps({"ready": name}), flush=True)
        await anyio.sleep_forever()


if __name__ == "__main__":
    anyio.run(_hold, sys.argv[1], sys.argv[2], Path(sys.argv[3]), float(sys.argv[4]))
