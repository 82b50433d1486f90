"""Cards: one structured message schema (title, text, fields, a list, images, buttons and an
optional generated HTML body), rendered per channel.

A card is stored as its JSON with the message; each channel renders it when it delivers:
plain text for the terminal, escaped HTML for the web console and email (the generated `html`
body is never inlined: the console shows it in a sandboxed frame, other channels say it is
there), an inline keyboard for Telegram, a numbered list for XMPP, and an email with the text
and an HTML alternative whose buttons are reply links (:mod:`wakeful.channels.email.outbound`).
A button press comes back as a `user.action` event whose payload is :func:`action_payload`.
"""

from __future__ import annotations

import html as html_text
from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ...tools.spec import ToolAnnotations, ToolContext, tool
from .attachments import workspace_attachments
from .reply import deliver_once, with_failures

__all__ = [
    "MAX_HTML_BYTES",
    "Card",
    "CardAction",
    "CardField",
    "action_payload",
    "card_html",
    "card_text",
    "parse_action_data",
    "send_card_to_user",
    "telegram_keyboard",
]

MAX_HTML_BYTES: Final = 100_000
ActionId = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]{1,40}$")]


class CardField(BaseModel):
    """One labelled value of a card, e.g. {'label': 'Total', 'value': '42 €'}."""

    model_config = ConfigDict(extra="forbid")

    label: str = Field(min_length=1, max_length=200)
    value: str = Field(max_length=2000)


class CardAction(BaseModel):
    """A button: its id (what a press reports), its label, and how it looks."""

    model_config = ConfigDict(extra="forbid")

    id: ActionId = Field(description="What a press reports, e.g. 'approve'.")
    label: str = Field(min_length=1, max_length=64, description="The button text, e.g. 'Approve'.")
    style: Literal["primary", "secondary", "danger"] = "secondary"


class Card(BaseModel):
    """A structured message: a title, then any of text, fields, a list, images (workspace
    paths, sent as attachments), buttons, and a generated HTML body (shown sandboxed)."""

    model_config = ConfigDict(extra="forbid")

    title: str = Field(min_length=1, max_length=200, description="e.g. 'Invoice 2026-117'.")
    text: str = Field(default="", max_length=4000)
    fields: list[CardField] = Field(default_factory=list, max_length=20)
    items: list[str] = Field(default_factory=list, max_length=50)
    images: list[str] = Field(default_factory=list, max_length=10)
    actions: list[CardAction] = Field(default_factory=list, max_length=8)
    html: str | None = None

    @field_validator("html")
    @classmethod
    def _html_fits(cls, value: str | None) -> str | None:
        if value is not None and len(value.encode("utf-8")) > MAX_HTML_BYTES:
            raise ValueError(
                f"the HTML body is {len(value.encode('utf-8')):,} bytes, over the limit of "
                f"{MAX_HTML_BYTES:,}; shorten it, or send the page as an attachment"
            )
        return value

    @model_validator(mode="after")
    def _actions_are_distinct(self) -> Card:
        ids = [action.id for action in self.actions]
        repeated = sorted({i for i in ids if ids.count(i) > 1})
        if repeated:
            raise ValueError(
                f"actions: the ids {repeated} are used twice; give each button its own id"
            )
        return self


def action_payload(card_id: str, action_id: str, message_id: str) -> dict[str, str]:
    """The payload of the `user.action` event a button press produces, whatever the channel."""
    return {"card_id": card_id, "action_id": action_id, "message_id": message_id}


def action_data(card_id: str, action_id: str) -> str:
    """What a channel's button carries back: "<card id>:<action id>" (Telegram's callback_data
    holds at most 64 bytes: a card id of 20 and an action id of at most 40 fit)."""
    return f"{card_id}:{action_id}"


def parse_action_data(data: str) -> tuple[str, str] | None:
    """The (card id, action id) of a button's data, or None when it is not a card's."""
    card_id, colon, action_id = data.partition(":")
    if not colon or not card_id.startswith("msg_") or not action_id:
        return None
    return card_id, action_id


def card_text(card: Card | dict[str, Any]) -> str:
    """The card as plain text, for a terminal or a text-only channel."""
    card = Card.model_validate(card) if isinstance(card, dict) else card
    lines = [f"[{card.title}]"]
    if card.text:
        lines.append(card.text)
    lines += [f"{field.label}: {field.value}" for field in card.fields]
    lines += [f"  • {item}" for item in card.items]
    lines += [f"(image: {path})" for path in card.images]
    if card.html is not None:
        lines.append("(this card has a page: open it in the web console)")
    if card.actions:
        lines.append("Buttons: " + " ".join(f"[{a.label}]" for a in card.actions))
    return "\n".join(lines)


def card_html(card: Card | dict[str, Any], *, card_id: str = "") -> str:
    """The card as an HTML fragment, every value escaped. The generated `html` body is left
    out: the web console shows it in a sandboxed frame of its own."""
    card = Card.model_validate(card) if isinstance(card, dict) else card
    e = html_text.escape
    parts = [f'<div class="card" data-card-id="{e(card_id)}">', f"<h3>{e(card.title)}</h3>"]
    if card.text:
        parts.append(f"<p>{e(card.text)}</p>")
    if card.fields:
        rows = "".join(f"<dt>{e(f.label)}</dt><dd>{e(f.value)}</dd>" for f in card.fields)
        parts.append(f"<dl>{rows}</dl>")
    if card.items:
        parts.append("<ul>" + "".join(f"<li>{e(item)}</li>" for item in card.items) + "</ul>")
    parts += [f'<p class="image">{e(path)}</p>' for path in card.images]
    if card.actions:
        buttons = "".join(
            f'<button type="button" class="{e(a.style)}" data-action-id="{e(a.id)}">'
            f"{e(a.label)}</button>"
            for a in card.actions
        )
        parts.append(f'<div class="actions">{buttons}</div>')
    parts.append("</div>")
    return "".join(parts)


def telegram_keyboard(card: Card | dict[str, Any], card_id: str) -> dict[str, Any] | None:
    """The Telegram `reply_markup` of the card's buttons (one row), or None without buttons."""
    card = Card.model_validate(card) if isinstance(card, dict) else card
    if not card.actions:
        return None
    row = [
        {"text": action.label, "callback_data": action_data(card_id, action.id)}
        for action in card.actions
    ]
    return {"inline_keyboard": [row]}


@tool(
    annotations=ToolAnnotations(read_only=False, destructive=False, idempotent=False),
    examples=(
        {
            "card": {
                "title": "Invoice 2026-117 is due",
                "fields": [{"label": "Amount", "value": "420 €"}],
                "actions": [
                    {"id": "pay", "label": "Pay now", "style": "primary"},
                    {"id": "later", "label": "Remind me tomorrow"},
                ],
            }
        },
        {"card": {"title": "Today's builds", "items": ["api: green", "web: 2 failures"]}},
    ),
)
async def send_card_to_user(
    ctx: ToolContext,
    card: Annotated[
        Card,
        Field(
            description="The card: title, then any of text, fields [{label, value}], items "
            "(a list), images (workspace paths), actions [{id, label, style}] (buttons) and "
            "html (a page of at most 100 KB, shown sandboxed), e.g. {'title': 'Deploy?', "
            "'actions': [{'id': 'go', 'label': 'Deploy'}]}."
        ),
    ],
    urgency: Annotated[
        Literal["low", "normal", "high", "urgent"],
        Field(description="How pressing the card is, e.g. 'normal'."),
    ] = "normal",
) -> str:
    """Send the user a structured card: a title with fields, a list, images and buttons.

    Use it when the answer has structure (figures, a list of items) or when the user should
    choose (buttons): each channel shows it its own way (buttons on the web console and
    Telegram, a text list in the terminal). It cannot run scripts in the user's console, and it
    does not accept images outside the workspace or HTML over 100 KB. A pressed button arrives
    later as a `user.action` event naming the card id and the action id. Returns "sent card"
    with the card's id.
    Cost: instant; the result is about 120 characters.
    """
    images = await workspace_attachments(ctx, card.images)
    stored = card.model_dump(exclude_none=True)

    async def send() -> str:
        message = await ctx.services.outbox.send(
            ctx.session,
            card_text(card),
            urgency=urgency,
            kind="card",
            attachments=images,
            card=stored,
        )
        buttons = ", ".join(action.id for action in card.actions)
        result = f"sent card {message.id}" + (
            f"; a press arrives as a user.action event with card_id {message.id} and one "
            f"of the action ids {buttons}"
            if buttons
            else ""
        )
        return with_failures(result, message)

    arguments: dict[str, object] = {"card": stored, "urgency": urgency}
    return await deliver_once(ctx, "send_card_to_user", arguments, send)
