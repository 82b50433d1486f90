"""send_card_to_user and the card renderers: bad cards are named field by field, every value is
escaped, the generated HTML body is capped and never inlined, buttons carry card and action ids."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tool_services import tool_services
from wakeful.errors import ToolError
from wakeful.toolkits.comms.cards import (
    MAX_HTML_BYTES,
    Card,
    action_payload,
    card_html,
    card_text,
    parse_action_data,
    send_card_to_user,
    telegram_keyboard,
)
from wakeful.tools.spec import ToolContext

pytestmark = pytest.mark.anyio

INVOICE: dict[str, Any] = {
    "title": "Invoice <2026-117>",
    "text": "Due on Friday & overdue soon.",
    "fields": [{"label": "Amount", "value": "420 €"}],
    "items": ["hosting", "<script>alert(1)</script>"],
    "actions": [
        {"id": "pay", "label": "Pay now", "style": "primary"},
        {"id": "later", "label": "Remind me tomorrow"},
    ],
}


async def refused(card: object, root: Path) -> str:
    async with tool_services(root) as (services, _):
        ctx = ToolContext("main", "call_1", "send_card_to_user", services)
        with pytest.raises(ToolError) as caught:
            await send_card_to_user.run({"card": card}, ctx)
        assert services.outbox.sent == []
        return str(caught.value)


@pytest.mark.parametrize(
    ("card", "fragment"),
    [
        ({}, "card.title"),
        ({"title": ""}, "card.title"),
        ({"title": "t", "fields": [{"label": "no value"}]}, "card.fields.0.value"),
        ({"title": "t", "actions": [{"id": "has space", "label": "x"}]}, "card.actions.0.id"),
        ({"title": "t", "actions": [{"id": "a", "label": "x", "style": "blink"}]}, "style"),
        ({"title": "t", "colour": "red"}, "card.colour"),
        (
            {"title": "t", "actions": [{"id": "a", "label": "x"}, {"id": "a", "label": "y"}]},
            "the ids ['a'] are used twice",
        ),
    ],
)
async def test_a_card_failing_its_schema_is_refused_naming_the_field(
    card: object, fragment: str, tmp_path: Path
) -> None:
    assert fragment in await refused(card, tmp_path)


async def test_html_over_the_cap_is_refused_with_the_limit(tmp_path: Path) -> None:
    page = "<p>" + "x" * MAX_HTML_BYTES + "</p>"
    message = await refused({"title": "Report", "html": page}, tmp_path)
    assert "over the limit of 100,000" in message and "card.html" in message


async def test_an_image_outside_the_workspace_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "workspace"
    root.mkdir()
    (tmp_path / "photo.png").write_bytes(b"\x89PNG")
    assert "../photo.png" in await refused({"title": "t", "images": ["../photo.png"]}, root)


async def test_a_card_is_stored_with_its_images_and_reports_its_buttons(tmp_path: Path) -> None:
    (tmp_path / "chart.png").write_bytes(b"\x89PNG\r\n")
    async with tool_services(tmp_path) as (services, _):
        ctx = ToolContext("main", "call_1", "send_card_to_user", services)
        card = {**INVOICE, "images": ["chart.png"], "html": "<b>hi</b>"}
        result = await send_card_to_user.run({"card": card, "urgency": "high"}, ctx)
        [stored] = await services.outbox.unread("main")
        assert result.content == (
            f"sent card {stored.id}; a press arrives as a user.action event with card_id "
            f"{stored.id} and one of the action ids pay, later"
        )
        assert (stored.kind, stored.urgency, stored.card) == (
            "card",
            "high",
            Card.model_validate(card).model_dump(exclude_none=True),
        )
        assert [(a.name, a.type) for a in stored.attachments] == [("chart.png", "image/png")]
        assert stored.text.startswith("[Invoice <2026-117>]")
        assert services.outbox.sent[0]["card"] == stored.card


def test_the_plain_text_shows_every_part_and_the_buttons() -> None:
    assert card_text(INVOICE) == (
        "[Invoice <2026-117>]\n"
        "Due on Friday & overdue soon.\n"
        "Amount: 420 €\n"
        "  • hosting\n"
        "  • <script>alert(1)</script>\n"
        "Buttons: [Pay now] [Remind me tomorrow]"
    )


def test_the_html_escapes_every_value_and_leaves_the_generated_page_out() -> None:
    page = card_html({**INVOICE, "html": "<script>steal()</script>"}, card_id="msg_1")
    assert "<script>" not in page and "steal()" not in page
    assert "<h3>Invoice &lt;2026-117&gt;</h3>" in page
    assert "<li>&lt;script&gt;alert(1)&lt;/script&gt;</li>" in page
    assert '<button type="button" class="primary" data-action-id="pay">Pay now</button>' in page
    assert 'data-card-id="msg_1"' in page


def test_telegram_buttons_carry_card_and_action_ids_within_64_bytes() -> None:
    card_id = "msg_0123456789abcdef"
    keyboard = telegram_keyboard(INVOICE, card_id)
    assert keyboard == {
        "inline_keyboard": [
            [
                {"text": "Pay now", "callback_data": f"{card_id}:pay"},
                {"text": "Remind me tomorrow", "callback_data": f"{card_id}:later"},
            ]
        ]
    }
    longest = card_id + ":" + "a" * 40
    assert len(longest.encode()) <= 64
    assert parse_action_data(f"{card_id}:pay") == (card_id, "pay")
    assert parse_action_data("just text") is None
    assert parse_action_data("card:") is None
    assert action_payload(card_id, "pay", card_id) == {
        "card_id": card_id,
        "action_id": "pay",
        "message_id": card_id,
    }
    assert telegram_keyboard({"title": "no buttons"}, card_id) is None


def test_a_telegram_press_of_a_card_button_carries_the_card_payload(tmp_path: Path) -> None:
    from telegram import Update

    from wakeful.channels.telegram.updates import TelegramPeople, update_event

    card_id = "msg_0123456789abcdef"
    keyboard = telegram_keyboard(INVOICE, card_id)
    assert keyboard is not None
    pressed = keyboard["inline_keyboard"][0][0]["callback_data"]
    user = {"id": 42, "is_bot": False, "first_name": "Ada"}
    update = Update.de_json(
        {
            "update_id": 7,
            "callback_query": {
                "id": "q1",
                "from": user,
                "chat_instance": "c",
                "data": pressed,
                "message": {
                    "message_id": 99,
                    "date": 0,
                    "chat": {"id": 42, "type": "private"},
                    "text": "[Invoice]",
                },
            },
        },
        None,
    )
    event = update_event(
        update,
        channel="telegram",
        people=TelegramPeople([42], []),
        session_for=lambda chat: f"telegram:{chat}",
        workspace=tmp_path,
        max_text_chars=1000,
    )
    assert event is not None and event.kind == "user.action"
    assert isinstance(event.content, dict)
    assert {k: event.content[k] for k in ("card_id", "action_id", "message_id")} == (
        action_payload(card_id, "pay", card_id)
    )
    assert event.content["action"] == f"{card_id}:pay"
