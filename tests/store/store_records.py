"""What the store tests write and check, built one way for every file: sample records, the types of
the `open_store` and `write_raw` fixtures (tests/conftest.py) and the error a hand-edited row
is reported by."""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from wakeful.core.records import CaseRecord, HumanRequestRecord, MessageDelivery, OutboundMessage
from wakeful.core.runtime_store import RuntimeStore

# Opens the test's store (the same file or database each time), on one backend, as `async with`.
OpenStore = Callable[[], AbstractAsyncContextManager[RuntimeStore]]
# One SQL statement (with %s placeholders) and its parameters, run behind the store's back.
WriteRaw = Callable[[str, tuple[Any, ...]], Awaitable[None]]


def unreadable(what: str) -> str:
    """The StoreError of a malformed row, as a pattern: it names the row and the store it is in."""
    return rf"The {re.escape(what)} stored in .+ cannot be read"


def message(
    message_id: str, session: str = "main", channels: tuple[str, ...] = ("console",)
) -> OutboundMessage:
    now = "2026-12-01T10:00:00Z"
    return OutboundMessage(
        id=message_id,
        session=session,
        created_at=now,
        urgency="normal",
        kind="text",
        text=f"text of {message_id}\nsecond line",
        deliveries=tuple(MessageDelivery(message_id, name, "queued", now) for name in channels),
    )


def case(request: str, **changes: Any) -> CaseRecord:
    made = CaseRecord(
        number=0,
        session="main",
        kind="approval",
        tool="send_email",
        request=request,
        reasons=("send_email cannot be undone.", "第二個理由"),
        context="send Bob the invoice",
        decision="approved",
        reason="Bob is our accountant",
        decided_at="2026-12-01T10:00:00+00:00",
        request_id="a3f9",
    )
    return made._replace(**changes)


def human_request(request_id: str, **changes: Any) -> HumanRequestRecord:
    made = HumanRequestRecord(
        id=request_id,
        session="main",
        kind="approval",
        question="Pay 4,200 EUR to ACME? «urgent» 付款",
        priority="high",
        opened_at="2026-12-01T10:00:00+00:00",
        deadline="2026-12-01T10:05:00+00:00",
        data=json.dumps({"options": ["approve", "deny"], "answered_in": "event"}),
    )
    return made._replace(**changes)
