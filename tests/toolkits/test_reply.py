"""reply_to_user: sends the text byte for byte to the session's channel; bad input is named."""

from __future__ import annotations

from pathlib import Path

import pytest

from tool_services import tool_services
from wakeful.errors import ToolError
from wakeful.store.sqlite import Store
from wakeful.toolkits.comms.reply import reply_to_user
from wakeful.tools.spec import ToolContext

pytestmark = pytest.mark.anyio

AWKWARD = "“Curly” ‘quotes’\r\nCRLF\tand tabs — emoji 🎉, 中文, trailing spaces   "


async def test_the_text_reaches_the_user_unchanged() -> None:
    async with tool_services() as (services, _):
        ctx = ToolContext("inbox", "call_1", "reply_to_user", services)
        result = await reply_to_user.run({"text": AWKWARD, "urgency": "high"}, ctx)
        assert result.content == "sent" and not result.is_error
        [sent] = services.outbox.sent
        assert sent == {
            "session": "inbox",
            "text": AWKWARD,
            "channel": "console",
            "urgency": "high",
            "parallel": False,
            "id": sent["id"],
            "kind": "text",
            "attachments": [],
            "card": None,
        }
        assert sent["id"].startswith("msg_")
        [stored] = await services.outbox.unread("inbox")
        assert (stored.id, stored.text, stored.urgency) == (sent["id"], AWKWARD, "high")


@pytest.mark.parametrize(
    ("arguments", "fragment"),
    [
        ({}, "field `text` is required"),
        ({"text": ""}, "field `text`: String should have at least 1 character"),
        ({"text": "hi", "urgency": "urgent"}, "field `urgency`: Input should be 'low', 'normal'"),
        ({"text": "hi", "to": "bob"}, "field `to` is not a parameter of this tool"),
    ],
)
async def test_bad_arguments_are_named_and_nothing_is_sent(
    arguments: dict[str, object], fragment: str
) -> None:
    async with tool_services() as (services, _):
        ctx = ToolContext("main", "call_1", "reply_to_user", services)
        with pytest.raises(ToolError) as info:
            await reply_to_user.run(arguments, ctx)
        assert fragment in str(info.value)
        assert services.outbox.sent == []


async def test_with_a_store_a_call_sends_its_message_once(tmp_path: Path) -> None:
    async with (
        await Store.open(tmp_path / "wakeful.db") as store,
        tool_services() as (services, _),
    ):
        services.store = store
        ctx = ToolContext("main", "call_7", "reply_to_user", services)
        first = await reply_to_user.run({"text": "The report is ready."}, ctx)
        again = await reply_to_user.run({"text": "The report is ready."}, ctx)
        assert first.content == "sent"
        assert again.content.startswith("sent (already delivered by this call")
        assert [m["text"] for m in services.outbox.sent] == ["The report is ready."]
        # A provider that reuses call ids: another message under the same id still goes out,
        # and so does the same message in another session.
        await reply_to_user.run({"text": "One more thing."}, ctx)
        other = ToolContext("other", "call_7", "reply_to_user", services)
        await reply_to_user.run({"text": "The report is ready."}, other)
        assert [(m["session"], m["text"]) for m in services.outbox.sent] == [
            ("main", "The report is ready."),
            ("main", "One more thing."),
            ("other", "The report is ready."),
        ]
