"""The XMPP channel reaching the user inside a runtime, against a real Prosody: the agent's reply
to what the user wrote over XMPP comes back over XMPP, the user's read marker reads it in the
runtime's outbox, and the numbered answer to a card reaches the agent as the button's press."""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

import anyio
import pytest
from xmpp_harness import AGENT, channel_settings, peer

from servers.prosody import ProsodyServer
from wakeful.channels.registry import ChannelSpec
from wakeful.channels.xmpp import KIND
from wakeful.core.records import OutboundMessage
from wakeful.models import ScriptedModel, call, say, use
from wakeful.runtime import Runtime

# The agent's and the peers' accounts on Prosody (conftest.py).
pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("accounts")]

CHANNEL = "xmpp:personal"
# The fixture channel_runtime of tests/channels/conftest.py.
ChannelRuntime = Callable[..., AbstractAsyncContextManager[Runtime]]


def running(
    channel_runtime: ChannelRuntime, prosody: ProsodyServer, model: ScriptedModel
) -> AbstractAsyncContextManager[Runtime]:
    """A runtime whose channel is the agent's account on `prosody`."""
    spec = ChannelSpec(kind="xmpp", name="personal", settings=channel_settings(prosody))
    return channel_runtime(spec, KIND, model)


async def only_message(runtime: Runtime) -> OutboundMessage:
    [message] = await runtime.outbox.messages.list()
    return message


def state_on_xmpp(message: OutboundMessage) -> str:
    return {d.channel: d.state for d in message.deliveries}[CHANNEL]


async def test_the_reply_to_an_xmpp_message_goes_back_over_xmpp_and_its_marker_reads_it(
    prosody: ProsodyServer, channel_runtime: ChannelRuntime
) -> None:
    model = ScriptedModel([use(call("reply_to_user", text="Booked: the 9:12 to Lyon.")), say("")])
    async with running(channel_runtime, prosody, model) as runtime, peer(prosody, "alice") as alice:
        alice.say(AGENT, "Book me the first train to Lyon tomorrow.")
        [reply] = await alice.wait_received(1, within=20)
        message = await only_message(runtime)
        copies = {d.channel: d.channel_message_id for d in message.deliveries}
        assert copies[CHANNEL] == reply["id"]
        alice.send_raw(
            f"<message to='{reply['from']}' type='chat'>"
            f"<displayed xmlns='urn:xmpp:chat-markers:0' id='{reply['id']}'/></message>"
        )
        with anyio.fail_after(10):
            while not (await only_message(runtime)).read:  # noqa: ASYNC110
                await anyio.sleep(0.02)
        read = await only_message(runtime)
    assert str(reply["body"]) == "Booked: the 9:12 to Lyon."
    assert read.read_on == CHANNEL


async def test_a_numbered_answer_to_a_card_reaches_the_agent_as_the_buttons_press(
    prosody: ProsodyServer, channel_runtime: ChannelRuntime
) -> None:
    card = {
        "title": "Which train?",
        "actions": [{"id": "early", "label": "9:12"}, {"id": "late", "label": "11:40"}],
    }
    model = ScriptedModel(
        [use(call("send_card_to_user", card=card)), say(""), say("Booking the 11:40.")]
    )
    async with running(channel_runtime, prosody, model) as runtime, peer(prosody, "alice") as alice:
        alice.say(AGENT, "Book me a train to Lyon tomorrow.")
        [shown] = await alice.wait_received(1, within=20)
        alice.say(AGENT, "2")
        with anyio.fail_after(20):
            while len(model.requests) < 3:  # noqa: ASYNC110
                await anyio.sleep(0.05)
        message = await only_message(runtime)
    assert str(shown["body"]).endswith("Reply with a number to choose:\n1. 9:12\n2. 11:40")
    # What the agent sees is the payload a press of the button in the web console gives.
    seen = json.loads(model.requests[2].messages[-1].content)
    assert seen == {"card_id": message.id, "action_id": "late", "message_id": message.id}
    assert message.read and message.read_on == CHANNEL


async def test_a_phone_that_acknowledges_at_once_gets_the_copy_marked_delivered(
    prosody: ProsodyServer, channel_runtime: ChannelRuntime
) -> None:
    model = ScriptedModel([use(call("reply_to_user", text="On it.")), say("")])
    async with running(channel_runtime, prosody, model) as runtime, peer(prosody, "alice") as alice:
        alice.client.register_plugin("xep_0184")  # receipts the moment a message arrives
        alice.say(AGENT, "Check the backups, please.")
        await alice.wait_received(1, within=20)
        with anyio.fail_after(10):
            while state_on_xmpp(await only_message(runtime)) != "delivered":  # noqa: ASYNC110
                await anyio.sleep(0.02)
