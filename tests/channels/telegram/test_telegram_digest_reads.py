"""A digest on Telegram (the delivery policy's, of low messages from several sessions) read by
the user, against the loopback Bot API inside a runtime: a reply to the digest's copy reads
every message it stands for, and the policy hears of each; also when the reply reaches the bot
before the digest's send has returned (the copy's id not yet recorded)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import pytest
from anyio import wait_all_tasks_blocked
from starlette.requests import Request
from starlette.responses import JSONResponse
from telegram_harness import TOKEN_ENV, USER_ID

from loopback_http import serving
from servers.telegram_api import FakeBotApi
from wakeful.channels.registry import ChannelSpec
from wakeful.channels.telegram import KIND
from wakeful.clock import FakeClock
from wakeful.core.records import OutboundMessage
from wakeful.delivery.settings import DeliverySettings
from wakeful.models import ScriptedModel, say
from wakeful.runtime import Runtime

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("token")]

CHANNEL = "telegram:me"
START = datetime(2026, 12, 1, 12, 0, 30, tzinfo=UTC)
ChannelRuntime = Callable[..., AbstractAsyncContextManager[Runtime]]
# The digest as Telegram shows it: its title, then its text.
DIGEST_TEXT = (
    "Digest\n3 updates while you were away:\n• Newsletter filed.\n• Calendar synced.\n"
    "• Two spam mails deleted."
)


class ReplyingBotApi(FakeBotApi):
    """The loopback Bot API, where the user answers the digest the moment it arrives: the
    reply is fetched by the bot (and its read reported) before the digest's sendMessage is
    answered."""

    async def _endpoint(self, request: Request) -> JSONResponse:
        if request.path_params["method"] != "sendMessage":
            return await super()._endpoint(request)
        answer = await super()._endpoint(request)
        sent = self.sent[-1]
        if sent["text"] == DIGEST_TEXT:
            reply = self.message("Seen, thanks.", user_id=USER_ID, reply_to=sent)
            with anyio.fail_after(10):
                # The bot asks from past the reply once it has delivered it and reported reads.
                while not any(  # noqa: ASYNC110
                    int(c.params.get("offset") or 0) > reply for c in self.calls_of("getUpdates")
                ):
                    await anyio.sleep(0.01)
        return answer


@asynccontextmanager
async def served(fake: FakeBotApi) -> AsyncIterator[str]:
    async with serving(fake.app) as port:
        yield f"http://127.0.0.1:{port}"


def me(url: str) -> ChannelSpec:
    return ChannelSpec(
        kind="telegram",
        name="me",
        settings={
            "token_env": TOKEN_ENV,
            "api_url": url,
            "user_ids": [USER_ID],
            "poll_timeout_seconds": 1,
        },
    )


async def three_low(rt: Runtime) -> list[OutboundMessage]:
    """Three low messages of three sessions while the user is on Telegram: each waits for the
    digest."""
    rt.activity.touch(CHANNEL)
    return [
        await rt.outbox.send(session, text, urgency="low")
        for session, text in (
            ("mail", "Newsletter filed."),
            ("main", "Calendar synced."),
            ("calendar", "Two spam mails deleted."),
        )
    ]


async def all_read(rt: Runtime, parts: list[OutboundMessage]) -> list[OutboundMessage]:
    with anyio.fail_after(10):
        while True:
            found = [await rt.outbox.messages.get(m.id) for m in parts]
            if all(m is not None and m.read for m in found):
                return [m for m in found if m is not None]
            await anyio.sleep(0.02)


def digest_on(fake: FakeBotApi) -> list[dict[str, Any]]:
    return [m for m in fake.sent if m["text"] == DIGEST_TEXT]


@pytest.mark.parametrize("early", [False, True], ids=["after-the-send", "before-the-record"])
async def test_a_reply_to_a_telegram_digest_reads_every_message_it_stands_for(
    channel_runtime: ChannelRuntime, early: bool
) -> None:
    clock = FakeClock(START)
    fake = ReplyingBotApi() if early else FakeBotApi()
    delivery = DeliverySettings.model_validate(
        {"channels": ["console", CHANNEL], "digest_every_minutes": 30}
    )
    model = ScriptedModel([say("")] * 4)
    heard: list[str] = []

    async def on_read(ids: list[str], channel: str) -> None:
        heard.extend(ids)

    async with (
        served(fake) as url,
        channel_runtime(me(url), KIND, model, clock=clock, delivery=delivery) as rt,
    ):
        rt.outbox.read_listeners.append(on_read)
        parts = await three_low(rt)
        assert rt.delivery is not None
        assert {p[1] for p in rt.delivery.pending()} == {m.id for m in parts}
        clock.advance(timedelta(minutes=30))
        await wait_all_tasks_blocked()
        with anyio.fail_after(10):
            while not digest_on(fake):  # noqa: ASYNC110
                await anyio.sleep(0.02)
        [digest] = digest_on(fake)
        if not early:
            fake.message("Seen, thanks.", user_id=USER_ID, reply_to=digest)
        read = await all_read(rt, parts)
        copy = f"{USER_ID}:{digest['message_id']}"
        assert [(m.read_on, m.deliveries[-1][1:3]) for m in read] == [
            (CHANNEL, (CHANNEL, "read"))
        ] * 3
        assert {m.deliveries[-1].channel_message_id for m in read} == {copy}
        # The delivery policy heard of each read: nothing is left planned for them.
        assert sorted(heard) == sorted(m.id for m in parts)
        assert rt.delivery.pending() == []
        assert len(digest_on(fake)) == 1
