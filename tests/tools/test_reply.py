"""reply_to_user: sends the text byte for byte to the session's channel; bad input is named."""

from __future__ import annotations

import pytest

from tool_services import tool_services
from wakeful.errors import ToolError
from wakeful.tools.reply import reply_to_user
from wakeful.tools.spec import ToolContext

pytestmark = pytest.mark.anyio

AWKWARD = "“Curly” ‘quotes’\r\nCRLF\tand tabs — emoji 🎉, 中文, trailing spaces   "


async def test_the_text_reaches_the_user_unchanged() -> None:
    async with tool_services() as (services, _):
        ctx = ToolContext("inbox", "call_1", "reply_to_user", services)
        result = await reply_to_user.run({"text": AWKWARD, "urgency": "high"}, ctx)
        assert result.content == "sent" and not result.is_error
        assert services.outbox.sent == [
            {
                "session": "inbox",
                "text": AWKWARD,
                "channel": "console",
                "urgency": "high",
                "parallel": False,
            }
        ]


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
