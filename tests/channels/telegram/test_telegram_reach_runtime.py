"""The Telegram channel reaching the user inside a runtime, against the loopback Bot API: the
agent's reply to what the user wrote on Telegram goes back to that chat and is read when the
user writes again, and a card's button pressed on Telegram reaches the agent as the press in the
web console does."""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

import anyio
import pytest
from telegram_harness import TOKEN_ENV, USER_ID, bot_api

from servers.telegram_api import FakeBotApi
from wakeful.channels.registry import ChannelSpec
from wakeful.channels.telegram import KIND
from wakeful.core.records import OutboundMessage
from wakeful.models import ScriptedModel, call, say, use
from wakeful.runtime import Runtime

# The bot token the loopback Bot API knows, in its variable (conftest.py).
pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("token")]

CHANNEL = "telegram:me"
# The fixture channel_runtime of tests/channels/conftest.py.
ChannelRuntime = Callable[..., AbstractAsyncContextManager[Runtime]]


def me(url: str) -> ChannelSpec:
    """The user's own chat with the bot, at the loopback Bot API `url`."""
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


async def only_message(runtime: Runtime) -> OutboundMessage:
    [message] = await runtime.outbox.messages.list()
    return message


async def wait_sent(fake: FakeBotApi, count: int) -> None:
    with anyio.fail_after(20):
        while len(fake.sent) < count:  # noqa: ASYNC110
            await anyio.sleep(0.02)


async def test_the_reply_to_a_telegram_message_goes_back_to_its_chat_and_is_read_when_answered(
    channel_runtime: ChannelRuntime,
) -> None:
    model = ScriptedModel(
        [use(call("reply_to_user", text="Booked: the 9:12 to Lyon.")), say(""), say("")]
    )
    async with bot_api() as (fake, url), channel_runtime(me(url), KIND, model) as runtime:
        fake.message("Book me the first train to Lyon tomorrow.", user_id=USER_ID)
        await wait_sent(fake, 1)
        message = await only_message(runtime)
        copies = {d.channel: d.channel_message_id for d in message.deliveries}
        unread_before = not message.read
        fake.message("Thanks!", user_id=USER_ID)
        with anyio.fail_after(10):
            while not (await only_message(runtime)).read:  # noqa: ASYNC110
                await anyio.sleep(0.02)
        read = await only_message(runtime)
    [reply] = fake.sent
    assert (reply["chat"]["id"], reply["text"]) == (USER_ID, "Booked: the 9:12 to Lyon.")
    assert copies[CHANNEL] == f"{USER_ID}:{reply['message_id']}"
    assert unread_before
    assert read.read_on == CHANNEL


async def test_a_cards_button_pressed_on_telegram_reaches_the_agent_as_in_the_web_console(
    channel_runtime: ChannelRuntime,
) -> None:
    card = {
        "title": "Which train?",
        "actions": [{"id": "early", "label": "9:12"}, {"id": "late", "label": "11:40"}],
    }
    model = ScriptedModel(
        [use(call("send_card_to_user", card=card)), say(""), say("Booking the 11:40.")]
    )
    async with bot_api() as (fake, url), channel_runtime(me(url), KIND, model) as runtime:
        fake.message("Book me a train to Lyon tomorrow.", user_id=USER_ID)
        await wait_sent(fake, 1)
        [shown] = fake.sent
        message = await only_message(runtime)
        fake.button_press(f"{message.id}:late", user_id=USER_ID, on=shown)
        with anyio.fail_after(20):
            while len(model.requests) < 3:  # noqa: ASYNC110
                await anyio.sleep(0.05)
        message = await only_message(runtime)
    assert shown["text"] == "[Which train?]"
    assert shown["reply_markup"]["inline_keyboard"] == [
        [
            {"text": "9:12", "callback_data": f"{message.id}:early"},
            {"text": "11:40", "callback_data": f"{message.id}:late"},
        ]
    ]
    seen = json.loads(model.requests[2].messages[-1].content)
    # The payload a press of the button in the web console gives, among what Telegram tells.
    assert {k: seen[k] for k in ("card_id", "action_id", "message_id")} == {
        "card_id": message.id,
        "action_id": "late",
        "message_id": message.id,
    }
    assert message.read and message.read_on == CHANNEL
