"""From a verified delivery to the event the Inbox stores.

Each endpoint's scheme says how a delivery is read: GitHub's become typed `github.*` events
(see :mod:`.github`); Slack's Events API, slash commands and interactions, Standard Webhooks and
unsigned deliveries become `webhook.received` events holding the parsed body (JSON, a form, or
text); a few headers are kept in the event's context, which the model does not read. Every
event's id is stable, derived from the sender's delivery id (`webhook-id`, `X-GitHub-Delivery`,
Slack's `event_id`), so a redelivery is recognised and dropped by the Inbox; a delivery without
any id gets a fresh one.

Who an event is from: a Standard Webhooks sender proved it holds the endpoint's secret, so its
events are from a contact (the endpoint); an unsigned endpoint's are from a stranger; GitHub and
Slack relay what people wrote, so the person (a login, a user id) is a contact only when listed
in the endpoint's `contacts`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final
from urllib.parse import parse_qsl

from ...core.channel import source_event_id
from ...events import WEBHOOK_RECEIVED, Event, Source, new_event_id
from .github import github_content, github_kind
from .settings import WebhookEndpoint

__all__ = ["PayloadRejected", "delivery_event", "slack_challenge", "slack_event_id"]

# Headers worth keeping in a webhook.received event (never the signatures: they are noise).
_KEPT_HEADERS: Final = (
    "content-type",
    "user-agent",
    "webhook-id",
    "webhook-timestamp",
    "x-github-event",
    "x-github-delivery",
    "x-github-hook-installation-target-type",
    "x-slack-retry-num",
    "x-slack-retry-reason",
    "idempotency-key",
    "x-request-id",
)


class PayloadRejected(Exception):
    """A verified delivery whose body or headers cannot be read; `reason` is for the 400."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def delivery_event(
    endpoint: WebhookEndpoint,
    *,
    channel: str,
    headers: Mapping[str, str],
    body: bytes,
    delivery_id: str | None,
    now: datetime,
) -> Event:
    """The event for one verified delivery to `endpoint` (header names lower-case)."""
    if endpoint.scheme == "github":
        kind, content, source = _github(endpoint, headers, body)
    else:
        kind, content, source = _received(endpoint, headers, body)
        if endpoint.scheme == "slack":
            delivery_id = slack_event_id(content["body"])
        elif endpoint.scheme == "none":
            delivery_id = headers.get("webhook-id") or headers.get("idempotency-key")
    event_id = (
        source_event_id(channel, f"{endpoint.name}/{delivery_id}")
        if delivery_id
        else new_event_id()
    )
    context: dict[str, Any] = {
        "endpoint": endpoint.name,
        "delivery_id": delivery_id,
        "verified_by": endpoint.scheme,
        # Metadata, kept out of the content the model reads (and the Inbox scans).
        "headers": {name: headers[name] for name in _KEPT_HEADERS if name in headers},
    }
    if kind != WEBHOOK_RECEIVED:
        context["repository"] = content.get("repository", "")
    return Event(
        id=event_id,
        ts=now,
        kind=kind,
        source=source,
        channel=channel,
        content=content,
        context=context,
        session=endpoint.session,
    )


def slack_challenge(body: bytes) -> str | None:
    """The challenge of a Slack `url_verification` request, which is answered, not stored."""
    try:
        data = json.loads(body)
    except ValueError:
        return None
    if isinstance(data, dict) and data.get("type") == "url_verification":
        challenge = data.get("challenge")
        return challenge if isinstance(challenge, str) else ""
    return None


def slack_event_id(body: Any) -> str | None:
    """Slack's id for an Events API delivery, the same on each of Slack's retries."""
    if isinstance(body, dict):
        event_id = body.get("event_id")
        if isinstance(event_id, str) and event_id:
            return event_id
    return None


def _github(
    endpoint: WebhookEndpoint, headers: Mapping[str, str], body: bytes
) -> tuple[str, dict[str, Any], Source]:
    event_name = headers.get("x-github-event", "").strip()
    if not event_name:
        raise PayloadRejected("The X-GitHub-Event header is missing.")
    payload = _parsed(headers, body)
    if isinstance(payload, dict) and isinstance(payload.get("payload"), str):
        # The webhook's content type set to application/x-www-form-urlencoded.
        payload = _json(payload["payload"].encode())
    if not isinstance(payload, dict):
        raise PayloadRejected("A GitHub delivery's body must be a JSON object.")
    content = github_content(event_name, payload)
    login = content["from"]
    source = Source(type="contact" if login in endpoint.contacts else "stranger", id=login)
    return github_kind(event_name), content, source


def _received(
    endpoint: WebhookEndpoint, headers: Mapping[str, str], body: bytes
) -> tuple[str, dict[str, Any], Source]:
    parsed = _parsed(headers, body)
    if isinstance(parsed, dict) and isinstance(parsed.get("payload"), str):
        # Slack interactions (buttons, shortcuts) post a form whose `payload` is JSON.
        parsed = {**parsed, "payload": _json(parsed["payload"].encode())}
    content: dict[str, Any] = {
        "endpoint": endpoint.name,
        "event_type": "",
        "from": "",
        "text": parsed if isinstance(parsed, str) else "",
        "labels": [],
        "body": parsed,
    }
    if isinstance(parsed, dict):
        content["event_type"] = _text(parsed.get("type"))
        content["text"] = _text(parsed.get("text"))
    if endpoint.scheme == "slack":
        content |= _slack_fields(parsed)
    if endpoint.scheme == "standard":
        source = Source(type="contact", id=endpoint.name)
    elif endpoint.scheme == "slack" and content["from"] in endpoint.contacts:
        source = Source(type="contact", id=content["from"])
    else:
        source = Source(type="stranger", id=content["from"] or endpoint.name)
    return WEBHOOK_RECEIVED, content, source


def _slack_fields(parsed: Any) -> dict[str, Any]:
    """Who wrote what, from an Events API callback, a slash command or an interaction."""
    if not isinstance(parsed, dict):
        return {}
    event = parsed.get("event")
    if isinstance(event, dict):  # Events API: {"type": "event_callback", "event": {...}}
        return {
            "event_type": _text(event.get("type")),
            "from": _text(event.get("user")),
            "text": _text(event.get("text")),
            "slack_channel": _text(event.get("channel")),
        }
    if "command" in parsed:  # a slash command, form-encoded
        return {
            "event_type": "slash_command",
            "from": _text(parsed.get("user_id")),
            "text": f"{_text(parsed.get('command'))} {_text(parsed.get('text'))}".strip(),
            "slack_channel": _text(parsed.get("channel_id")),
        }
    payload = parsed.get("payload")
    if isinstance(payload, dict):  # an interaction: a button, a shortcut, a modal
        user = payload.get("user")
        return {
            "event_type": _text(payload.get("type")),
            "from": _text(user.get("id")) if isinstance(user, dict) else "",
        }
    return {}


def _parsed(headers: Mapping[str, str], body: bytes) -> Any:
    """The body as JSON, a form (a dict of its fields) or text, by its content type."""
    content_type = headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type == "application/x-www-form-urlencoded":
        try:
            text = body.decode()
        except UnicodeDecodeError as exc:
            raise PayloadRejected("The form body is not UTF-8.") from exc
        return dict(parse_qsl(text, keep_blank_values=True))
    if content_type == "application/json" or content_type.endswith("+json"):
        return _json(body)
    try:
        return _json(body)
    except PayloadRejected:
        return body.decode(errors="replace")


def _json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except ValueError as exc:  # UnicodeDecodeError is a ValueError too
        raise PayloadRejected(
            "The body is not valid JSON, though its content type says it is."
        ) from exc


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""
