"""Acknowledged implies processed, exactly once: a runtime with a webhook channel runs in its own
process over a real SQLite store, its agent busy in a model turn that never ends, and is killed
with SIGKILL in the middle of a burst of deliveries. Every delivery the sender saw answered 2xx
is in the store afterwards. A restarted runtime, sent the whole burst again (as senders retry
what was not acknowledged, and sometimes what was), shows the agent each delivery exactly once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import anyio
import httpx2
import pytest
from ingress_process import CHANNEL, channel_url
from webhook_fixtures import content_of, json_body, standard_delivery

from wakeful.core.channel import source_event_id
from wakeful.messages import Message, UserMessage
from wakeful.models import FunctionModel, Turn, say
from wakeful.models.base import ToolDefinition
from wakeful.runtime import Runtime
from wakeful.store.sqlite import Store

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

PROCESS = Path(__file__).with_name("ingress_process.py")
DELIVERIES = 400
KILL_AFTER_ACKS = 100


@contextmanager
def runtime_process(store_path: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    process = subprocess.Popen(
        [sys.executable, str(PROCESS), str(store_path)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=PROCESS.parent,
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), f"the runtime did not start: {url!r}"
        yield process, url
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=10)
        assert process.stdout is not None
        process.stdout.close()


def delivery_id(n: int) -> str:
    return f"msg_{n}"


async def send_burst(
    url: str, *, kill: subprocess.Popen[str] | None = None
) -> tuple[set[str], int]:
    """Send every delivery from 16 senders; SIGKILL `kill` after KILL_AFTER_ACKS answers.
    Returns the delivery ids answered 2xx and how many got no answer."""
    acknowledged: set[str] = set()
    unanswered = 0
    queue = list(range(DELIVERIES))
    async with httpx2.AsyncClient(timeout=10) as client:

        async def sender() -> None:
            nonlocal unanswered
            while queue:
                n = queue.pop(0)
                body = json_body({"type": "order.created", "data": {"order": n}})
                try:
                    response = await client.post(
                        f"{url}/hooks/billing",
                        content=body,
                        headers=standard_delivery(body, delivery_id=delivery_id(n)),
                    )
                except httpx2.TransportError:
                    unanswered += 1
                    continue
                assert response.status_code == 200, response.text
                acknowledged.add(delivery_id(n))
                if kill is not None and len(acknowledged) == KILL_AFTER_ACKS:
                    os.kill(kill.pid, signal.SIGKILL)

        async with anyio.create_task_group() as tg:
            for _ in range(16):
                tg.start_soon(sender)
    return acknowledged, unanswered


async def stored_orders(store_path: Path) -> list[int]:
    async with await Store.open(store_path) as store:
        rows = await store.events.recent(limit=10 * DELIVERIES)
    return [content_of(row.event)["body"]["data"]["order"] for row in rows]


async def answer(messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> Turn:
    return say("noted")


async def test_every_acknowledged_delivery_survives_a_kill_9_and_is_processed_once(
    tmp_path: Path,
) -> None:
    store_path = tmp_path / "wakeful.db"
    with runtime_process(store_path) as (process, url):
        acknowledged, unanswered = await send_burst(url, kill=process)
        process.wait(timeout=10)
        assert process.returncode == -signal.SIGKILL
    assert len(acknowledged) >= KILL_AFTER_ACKS and unanswered > 0

    after_crash = {delivery_id(n) for n in await stored_orders(store_path)}
    assert acknowledged <= after_crash, "a delivery answered 2xx was lost in the crash"

    runtime = Runtime(
        model=FunctionModel(answer),
        with_core_tools=False,
        with_timers=False,
        store_path=store_path,
        channels=[CHANNEL],
    )
    async with runtime:
        again, unanswered = await send_burst(channel_url(runtime))
        with anyio.fail_after(60):
            await runtime.wait_idle()
        trajectory = runtime.sessions["main"].trajectory.messages
    assert unanswered == 0 and len(again) == DELIVERIES
    assert sorted(await stored_orders(store_path)) == list(range(DELIVERIES))
    seen = [i for m in trajectory if isinstance(m, UserMessage) for i in m.event_ids]
    expected = {
        source_event_id("webhook:billing", f"billing/{delivery_id(n)}") for n in range(DELIVERIES)
    }
    assert sorted(seen) == sorted(expected)  # each delivery reached the agent exactly once
