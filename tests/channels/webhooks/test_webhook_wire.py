"""The ingress as a channel on a real socket: uvicorn on 127.0.0.1, a real SQLite store, senders
over HTTP. A 2 MiB body, a burst of 1,000 deliveries with redeliveries mixed in, the port
reported in health, and a shutdown that answers what it is storing."""

from __future__ import annotations

import random
import socket
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from webhook_fixtures import (
    GITHUB_SECRET,
    STANDARD_SECRET,
    content_of,
    github_delivery,
    github_payload,
    json_body,
    runtime_inbox,
    standard_delivery,
)

from wakeful.channels.registry import ChannelSpec
from wakeful.channels.webhooks import WebhookIngress, WebhookListenError, WebhookSettings
from wakeful.core.channel import Delivery
from wakeful.events import Event
from wakeful.messages import Message, UserMessage
from wakeful.models import FunctionModel, Turn, say
from wakeful.models.base import ToolDefinition
from wakeful.runtime import Runtime
from wakeful.runtime.inbox import RuntimeInbox
from wakeful.store.sqlite import Store

pytestmark = pytest.mark.anyio

SETTINGS: dict[str, Any] = {
    "port": 0,
    "endpoints": [
        {"name": "github", "scheme": "github", "secret": GITHUB_SECRET},
        {"name": "billing", "scheme": "standard", "secret": STANDARD_SECRET},
    ],
}


@asynccontextmanager
async def running(ingress: WebhookIngress) -> AsyncIterator[str]:
    """Run the ingress until the block ends; yields its base URL."""
    async with anyio.create_task_group() as tg:
        await tg.start(ingress.run)
        assert ingress.url is not None
        try:
            yield ingress.url
        finally:
            tg.cancel_scope.cancel()


async def test_the_ingress_listens_on_a_free_port_and_reports_it(tmp_path: Path) -> None:
    async with await Store.open(tmp_path / "s.db", synchronous="normal") as store:
        ingress = WebhookIngress(
            WebhookSettings.model_validate(SETTINGS),
            name="webhooks",
            inbox=runtime_inbox(store)[0],
        )
        assert ingress.health().state == "stopped" and ingress.url is None
        async with running(ingress) as url, httpx2.AsyncClient() as client:
            assert url.startswith("http://127.0.0.1:") and not url.endswith(":0")
            assert ingress.endpoint_urls()["github"] == f"{url}/hooks/github"
            health = ingress.health()
            assert health.state == "running"
            assert health.detail == f"listening on {url}; endpoints: billing, github"
            body = github_payload("pull_request_opened")
            response = await client.post(
                f"{url}/hooks/github", content=body, headers=github_delivery("pull_request", body)
            )
            assert response.status_code == 200
            assert ingress.health().last_event_at is not None
            (row,) = await store.events.recent()
            assert row.event.kind == "github.pull_request"
        assert ingress.health().state == "stopped"
        with socket.socket() as probe, pytest.raises(ConnectionRefusedError):
            probe.connect(("127.0.0.1", int(url.rsplit(":", 1)[1])))


async def test_a_port_in_use_is_a_clear_error(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        async with await Store.open(tmp_path / "s.db") as store:
            ingress = WebhookIngress(
                WebhookSettings.model_validate({**SETTINGS, "port": port}),
                name="webhooks",
                inbox=runtime_inbox(store)[0],
            )
            with pytest.raises(WebhookListenError, match=rf"127.0.0.1:{port}.*port = 0"):
                await ingress.run()
            assert ingress.health().state == "stopped"


async def test_a_2_mib_body_is_refused_413_without_being_stored(tmp_path: Path) -> None:
    async with await Store.open(tmp_path / "s.db") as store:
        ingress = WebhookIngress(
            WebhookSettings.model_validate(SETTINGS),
            name="webhooks",
            inbox=runtime_inbox(store)[0],
        )
        async with running(ingress) as url, httpx2.AsyncClient() as client:
            body = json_body({"type": "export", "data": "x" * (2 * 1024 * 1024)})
            response = await client.post(
                f"{url}/hooks/billing", content=body, headers=standard_delivery(body)
            )
            assert response.status_code == 413
            assert "cap of 1,048,576 bytes" in response.json()["error"]
            # The connection is not poisoned: the next delivery goes through.
            small = b'{"type": "ok"}'
            ok = await client.post(
                f"{url}/hooks/billing", content=small, headers=standard_delivery(small)
            )
            assert ok.status_code == 200
        rows = await store.events.recent()
        assert [content_of(row.event)["event_type"] for row in rows] == ["ok"]


@pytest.mark.slow
async def test_a_burst_of_1000_deliveries_with_redeliveries_is_stored_exactly_once(
    tmp_path: Path,
) -> None:
    async with await Store.open(tmp_path / "s.db", synchronous="normal") as store:
        ingress = WebhookIngress(
            WebhookSettings.model_validate(SETTINGS),
            name="webhooks",
            inbox=runtime_inbox(store)[0],
        )
        deliveries = []
        for n in range(1000):
            body = json_body({"type": "build.finished", "data": {"build": n}})
            deliveries.append((body, standard_delivery(body, delivery_id=f"msg_{n}")))
        # One in ten is delivered twice, the copy at a random later point, as a sender that
        # timed out and retried would.
        rng = random.Random(7)
        sends = deliveries + rng.sample(deliveries, 100)
        rng.shuffle(sends)
        answers: list[str] = []
        limits = httpx2.Limits(max_connections=32)
        async with running(ingress) as url, httpx2.AsyncClient(limits=limits) as client:
            queue = list(sends)

            async def sender() -> None:
                while queue:
                    body, headers = queue.pop()
                    response = await client.post(
                        f"{url}/hooks/billing", content=body, headers=headers
                    )
                    assert response.status_code == 200, response.text
                    answers.append(response.json()["status"])

            with anyio.fail_after(60):
                async with anyio.create_task_group() as tg:
                    for _ in range(32):
                        tg.start_soon(sender)
        rows = await store.events.recent(limit=5000)
        builds = sorted(content_of(row.event)["body"]["data"]["build"] for row in rows)
        assert builds == list(range(1000))
        assert answers.count("stored") == 1000 and answers.count("duplicate") == 100


async def test_cancelling_the_channel_answers_the_deliveries_it_is_storing(tmp_path: Path) -> None:
    entered = anyio.Event()
    release = anyio.Event()

    class HeldInbox(RuntimeInbox):
        async def deliver_many(self, events: Sequence[tuple[Event, str | None]]) -> list[Delivery]:
            entered.set()
            await release.wait()
            return await super().deliver_many(events)

    async with await Store.open(tmp_path / "s.db") as store:
        ingress = WebhookIngress(
            WebhookSettings.model_validate(SETTINGS),
            name="webhooks",
            inbox=runtime_inbox(store, HeldInbox)[0],
        )
        statuses: list[int] = []
        async with (
            httpx2.AsyncClient() as client,
            anyio.create_task_group() as outer,
            anyio.create_task_group() as channel,
        ):
            await channel.start(ingress.run)
            url = ingress.url

            async def send() -> None:
                body = b'{"type": "late"}'
                response = await client.post(
                    f"{url}/hooks/billing", content=body, headers=standard_delivery(body)
                )
                statuses.append(response.status_code)

            outer.start_soon(send)
            await entered.wait()
            channel.cancel_scope.cancel()  # the runtime stops the channel mid-delivery
            outer.start_soon(_release_soon, release)
        assert statuses == [200]
        assert len(await store.events.recent()) == 1


async def _release_soon(release: anyio.Event) -> None:
    await anyio.sleep(0.2)
    release.set()


async def test_a_runtime_channel_wakes_the_agent_only_for_what_its_filter_lets_through(
    tmp_path: Path,
) -> None:
    """From `[[channels.webhook]]`-shaped settings to the model: a pull request on the watched
    repository wakes the agent, tagged by repository and sender; a push is stored as filtered
    and costs no model call."""
    prompts: list[str] = []

    async def script(messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> Turn:
        last = messages[-1]
        assert isinstance(last, UserMessage)
        prompts.append(last.content)
        return say("I'll review it.")

    spec = ChannelSpec(
        kind="webhook",
        name="github",
        settings={"scheme": "github", "secret": GITHUB_SECRET, "port": 0, "contacts": ["alice"]},
        filter={"repositories": ["acme/app"], "event_types": ["pull_request"]},
    )
    runtime = Runtime(
        model=FunctionModel(script),
        with_core_tools=False,
        with_timers=False,
        store_path=tmp_path / "wakeful.db",
        channels=[spec],
    )
    async with runtime, httpx2.AsyncClient() as client:
        health = runtime.channels["webhook:github"]
        assert health.state == "running" and "endpoints: github" in health.detail
        url = health.detail.removeprefix("listening on ").split(";")[0]
        for name, event_name in [("pull_request_opened", "pull_request"), ("push", "push")]:
            body = github_payload(name)
            response = await client.post(
                f"{url}/hooks/github", content=body, headers=github_delivery(event_name, body)
            )
            assert response.status_code == 200
        with anyio.fail_after(30):
            await runtime.wait_idle()
        assert runtime.store is not None
        statuses = [row.status for row in await runtime.store.events.recent()]
    assert statuses == ["consumed", "filtered"]
    (prompt,) = prompts
    assert prompt.startswith("[GITHUB acme/app FROM_CONTACT alice] (github.pull_request)")
    assert "Retry webhook deliveries with backoff" in prompt
