"""What the Telegram channel tests share: the loopback Bot API served on 127.0.0.1, the
runtime's Inbox over a real Store (handing events to a list instead of sessions), a channel on
the fake, and waiting for events or a health state."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio

from loopback_http import serving
from servers.telegram_api import FakeBotApi
from wakeful.agent.router import Decision, Strategy
from wakeful.channels.filters import ChannelFilter
from wakeful.channels.telegram import KIND, TelegramChannel
from wakeful.core.channel import ChannelContext, ReadReceipts
from wakeful.core.records import StoredEvent
from wakeful.events import DEFAULT_MAX_EVENT_BYTES, Event
from wakeful.runtime.inbox import FilteringInbox, RuntimeInbox
from wakeful.store.sqlite import Store

TOKEN_ENV = "WAKEFUL_TEST_TELEGRAM_TOKEN"
CHANNEL = "telegram:test"
USER_ID = 111
CONTACT_ID = 222
STRANGER_ID = 666


@asynccontextmanager
async def bot_api() -> AsyncIterator[tuple[FakeBotApi, str]]:
    """The fake Bot API on loopback, and its address for `api_url`."""
    fake = FakeBotApi()
    async with serving(fake.app) as port:
        yield fake, f"http://127.0.0.1:{port}"


def runtime_inbox(store: Store, handed: list[Event] | None = None) -> FilteringInbox:
    """The runtime's own Inbox over `store`, handing events to `handed`."""
    received = handed if handed is not None else []

    async def hand(event: Event) -> Decision:
        received.append(event)
        return Decision(Strategy.QUEUE, reason="recorded by the test")

    inbox = RuntimeInbox(
        store=store,
        hand=hand,
        answers_approval=lambda event: False,
        max_event_bytes=DEFAULT_MAX_EVENT_BYTES,
    )
    return FilteringInbox(inbox, ChannelFilter())


def telegram_channel(
    api_url: str,
    store: Store,
    workspace: Path,
    *,
    inbox: FilteringInbox | None = None,
    reads: ReadReceipts | None = None,
    **overrides: Any,
) -> TelegramChannel:
    settings = KIND.settings_model.model_validate(
        {
            "token_env": TOKEN_ENV,
            "api_url": api_url,
            "user_ids": [USER_ID],
            "contacts": [CONTACT_ID],
            "poll_timeout_seconds": 1,
            "max_backoff_seconds": 0.2,
            **overrides,
        }
    )
    context = ChannelContext(
        name=CHANNEL,
        inbox=inbox or runtime_inbox(store),
        cursors=store.channel_cursors,
        workspace=workspace,
        reads=reads,
    )
    return KIND.build(settings, context)


async def wait_for_events(store: Store, count: int, *, seconds: float = 10) -> list[StoredEvent]:
    """The stored events once there are `count` of them (oldest first)."""
    with anyio.fail_after(seconds):
        while True:
            rows = await store.events.recent(limit=count + 100)
            if len(rows) >= count:
                return sorted(rows, key=lambda row: row.rowid)
            await anyio.sleep(0.02)


async def wait_for_state(channel: TelegramChannel, state: str, *, seconds: float = 10) -> str:
    """The channel's health detail once it is in `state`."""
    with anyio.fail_after(seconds):
        while channel.health().state != state:  # noqa: ASYNC110
            await anyio.sleep(0.02)
    return channel.health().detail
