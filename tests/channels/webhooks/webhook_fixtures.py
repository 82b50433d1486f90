"""What the webhook tests share: the runtime's Inbox over a real SQLite store (handing events to
a recorder rather than to sessions, where the agent is not the point), signed deliveries as
GitHub, Slack and Standard Webhooks senders make them, and GitHub's payload fixtures."""

from __future__ import annotations

import base64
import json
import time
import uuid
from pathlib import Path
from typing import Any

from wakeful.agent.router import Decision, Strategy
from wakeful.channels.webhooks.signatures import sign_github, sign_slack, sign_standard
from wakeful.core.channel import ChannelContext, Inbox
from wakeful.events import DEFAULT_MAX_EVENT_BYTES, Event
from wakeful.runtime.inbox import RuntimeInbox
from wakeful.store.sqlite import Store

PAYLOADS = Path(__file__).parent / "github_payloads"

STANDARD_KEY = b"standard-webhooks-test-key-32-by"
STANDARD_SECRET = "whsec_" + base64.b64encode(STANDARD_KEY).decode()
GITHUB_SECRET = "It's a Secret to Everybody"
SLACK_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"


class HandedEvents:
    """The sessions' end of a runtime Inbox in these tests: records each event handed over."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    async def __call__(self, event: Event) -> Decision:
        self.events.append(event)
        return Decision(Strategy.QUEUE)


def runtime_inbox(
    store: Store,
    inbox_class: type[RuntimeInbox] = RuntimeInbox,
    *,
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
) -> tuple[RuntimeInbox, HandedEvents]:
    """The runtime's Inbox over `store`, handing events to a recorder instead of sessions."""
    handed = HandedEvents()
    inbox = inbox_class(
        store=store,
        hand=handed,
        answers_approval=lambda event: False,
        max_event_bytes=max_event_bytes,
    )
    return inbox, handed


def channel_context(name: str, store: Store, inbox: Inbox, workspace: Path) -> ChannelContext:
    """What the runtime gives a channel it builds, over a real store."""
    return ChannelContext(
        name=name, inbox=inbox, cursors=store.channel_cursors, workspace=workspace
    )


def standard_delivery(
    body: bytes,
    *,
    key: bytes = STANDARD_KEY,
    delivery_id: str | None = None,
    timestamp: int | None = None,
) -> dict[str, str]:
    """Headers of a Standard Webhooks delivery of `body`."""
    delivery_id = delivery_id or f"msg_{uuid.uuid4().hex}"
    timestamp = int(time.time()) if timestamp is None else timestamp
    return {
        "content-type": "application/json",
        "webhook-id": delivery_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": sign_standard(key, delivery_id, timestamp, body),
    }


def github_delivery(
    event: str,
    body: bytes,
    *,
    secret: str = GITHUB_SECRET,
    delivery_id: str | None = None,
) -> dict[str, str]:
    """Headers of a GitHub delivery of `body` for `X-GitHub-Event: event`."""
    return {
        "content-type": "application/json",
        "user-agent": "GitHub-Hookshot/7d8e2c1",
        "x-github-event": event,
        "x-github-delivery": delivery_id or str(uuid.uuid4()),
        "x-github-hook-id": "448812301",
        "x-hub-signature-256": sign_github(secret.encode(), body),
    }


def slack_delivery(
    body: bytes,
    *,
    secret: str = SLACK_SECRET,
    timestamp: int | None = None,
    content_type: str = "application/json",
) -> dict[str, str]:
    """Headers of a Slack request carrying `body`."""
    timestamp = int(time.time()) if timestamp is None else timestamp
    return {
        "content-type": content_type,
        "x-slack-request-timestamp": str(timestamp),
        "x-slack-signature": sign_slack(secret.encode(), timestamp, body),
    }


def github_payload(name: str) -> bytes:
    """The bytes of a fixture payload, as GitHub sends them."""
    return (PAYLOADS / f"{name}.json").read_bytes()


def json_body(data: Any) -> bytes:
    return json.dumps(data).encode()


def content_of(event: Event) -> dict[str, Any]:
    """The structured content of an event the ingress made."""
    assert isinstance(event.content, dict), event.content
    return event.content
