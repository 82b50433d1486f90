"""Requests to a person as the store keeps them (:class:`~wakeful.core.records.
HumanRequestRecord`): a request's stored form, the request rebuilt from it after a restart, how
a stored request ended, and the `human.answer` event that hands an outcome to its session.

A stored request that cannot be rebuilt (its data damaged, or written by another version) is
not lost without a word: a stand-in keeps its id, so that a late answer to it is told it ended,
and its session gets an event saying that no answer will come (:func:`restart_answer_event`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any, Final

from ..core.channel import source_event_id
from ..core.records import HumanRequestRecord, iso_utc
from ..events import HUMAN_ANSWER, Event, Source, utc_now
from .decisions import HumanDecision, LateAnswer, quoted
from .human_requests import AnsweredIn, ApprovalRequest, HumanRequest, InputForm, InputRequest

__all__ = [
    "NOT_RESTORED",
    "RESTART_ENDED",
    "FormOf",
    "answer_event",
    "answered_in_of",
    "record_of",
    "request_of",
    "restart_answer_event",
    "set_ending",
    "stand_in",
]

log = logging.getLogger(__name__)

FormOf = Callable[[Mapping[str, Any]], InputForm]
"""Rebuilds a stored request's form from its JSON schema (raises ValueError when it cannot)."""

# Why a request read back from the store ended without a decision: its call ended with the
# restart, or it could not be rebuilt at all.
RESTART_ENDED: Final = "the call it was for ended with a restart"
NOT_RESTORED: Final = "it could not be restored after a restart"


def record_of(request: ApprovalRequest | InputRequest, timeout: float) -> HumanRequestRecord:
    """The stored form of a new request: what rebuilds it goes in `data`."""
    data: dict[str, Any] = {
        "answered_in": request.answered_in,
        "call_id": request.call_id,
        "timeout_seconds": timeout,
        "context": request.context,
    }
    if isinstance(request, ApprovalRequest):
        question = request.summary
        data |= {
            "shape": "yes_no",
            "tool": request.tool,
            "reasons": list(request.reasons),
            "asker": request.asker,
            "options": list(request.options),
            "default": request.default,
        }
    else:
        question = request.message
        data |= {
            "shape": "form",
            "asker": request.asker,
            "call": request.call,
            "url": request.url,
            "from_agent": request.from_agent,
            "default": request.default,
            "choice_field": request.choice_field,
            "schema": request.schema,
        }
    return HumanRequestRecord(
        id=request.id,
        session=request.session,
        kind=request.kind,
        question=question,
        priority=request.priority,
        opened_at=iso_utc(request.created),
        deadline=iso_utc(request.created + timedelta(seconds=timeout)),
        data=json.dumps(data, ensure_ascii=False),
    )


def request_of(
    record: HumanRequestRecord, form_of: FormOf | None, timeout: float
) -> ApprovalRequest | InputRequest:
    """A stored request rebuilt, its clock set to the time it has been open; ValueError (or
    KeyError, TypeError) for data it cannot be rebuilt from."""
    data = json.loads(record.data)
    if not isinstance(data, dict):
        raise ValueError("its data is not an object")
    created = datetime.fromisoformat(record.opened_at)
    common: dict[str, Any] = {
        "created": created,
        "priority": record.priority,
        "timeout_seconds": float(data.get("timeout_seconds", timeout)),
        "started": time.monotonic() - max((utc_now() - created).total_seconds(), 0.0),
        "context": str(data.get("context", "")),
        "call_id": str(data.get("call_id", "")),
        "answered_in": "event" if data.get("answered_in") == "event" else "call",
    }
    if data.get("shape") == "yes_no":
        yes, no = (str(option) for option in data["options"])
        default = data.get("default")
        return ApprovalRequest(
            record.id,
            record.session,
            str(data.get("tool", "")),
            record.question,
            tuple(str(reason) for reason in data.get("reasons", ())),
            asker=str(data.get("asker", "")),
            options=(yes, no),
            default=None if default is None else str(default),
            **common,
        )
    schema = data.get("schema")
    form: InputForm | None = None
    if schema is not None and form_of is not None:
        form = form_of(schema)
    elif common["answered_in"] == "event":
        raise ValueError("its form cannot be rebuilt (no schema, or no way to read one)")
    default_values = data.get("default")
    if default_values is not None and not isinstance(default_values, dict):
        raise ValueError("its default is not an object")
    url = data.get("url")
    choice_field = data.get("choice_field")
    return InputRequest(
        record.id,
        record.session,
        str(data.get("asker", "")),
        str(data.get("call", "")),
        record.question,
        form,
        None if url is None else str(url),
        from_agent=bool(data.get("from_agent", False)),
        default=default_values,
        choice_field=None if choice_field is None else str(choice_field),
        schema=schema,
        **common,
    )


def set_ending(request: HumanRequest, record: HumanRequestRecord) -> None:
    """Give a request read back from the store how it ended: its decision, or why it ended
    without one, and the late answers it had."""
    request.ended = RESTART_ENDED
    if record.decision is not None:
        try:
            request.decision = HumanDecision.from_json(record.decision)
            request.ended = ""
        except (ValueError, KeyError, TypeError):
            with contextlib.suppress(ValueError):
                ended = json.loads(record.decision)
                if isinstance(ended, dict) and ended.get("ended"):
                    request.ended = str(ended["ended"])
    try:
        late = json.loads(record.late)
        request.late = [
            LateAnswer(
                str(item["answer"]),
                datetime.fromisoformat(item["at"]),
                str(item["why_not_applied"]),
            )
            for item in late
        ]
    except (ValueError, KeyError, TypeError) as exc:
        log.warning("the late answers to request %s could not be read: %s", record.id, exc)


def answer_event(request: HumanRequest, decision: HumanDecision) -> Event:
    """The `human.answer` event that hands a decision to the request's session. Its id is the
    same each time (from the request's id and when it opened), so the store recognises a
    second hand-over after a crash."""
    return Event(
        id=_answer_event_id(request.id, iso_utc(request.created)),
        kind=HUMAN_ANSWER,
        source=Source(type="system", id=request.id),
        content=decision.text(),
        context={**decision.as_dict(), "call_id": request.call_id},
        session=request.session,
    )


def restart_answer_event(record: HumanRequestRecord, decision: HumanDecision | None) -> Event:
    """The `human.answer` event for a stored request that cannot be rebuilt: its stored
    `decision`, or (None) the word that it has no answer and will get none. Its id is the one
    :func:`answer_event` gives the request, so it too is handed over once."""
    call_id = _call_id_of(record)
    if decision is not None:
        content = decision.text()
        context: dict[str, Any] = {**decision.as_dict(), "call_id": call_id}
    else:
        content = (
            f"The request [{record.id}] ({quoted(record.question)}) could not be restored after "
            "the restart and has no answer: ask again if it is still needed."
        )
        context = {
            "request_id": record.id,
            "kind": record.kind,
            "status": "not_restored",
            "call_id": call_id,
        }
    return Event(
        id=_answer_event_id(record.id, _opened_words(record)),
        kind=HUMAN_ANSWER,
        source=Source(type="system", id=record.id),
        content=content,
        context=context,
        session=record.session,
    )


def _answer_event_id(request_id: str, opened_at: str) -> str:
    """The same id each time for a request's answer: from its id and when it opened."""
    return source_event_id("human.answer", f"{request_id}\0{opened_at}")


def _opened_words(record: HumanRequestRecord) -> str:
    """When the request opened, as :func:`answer_event` writes it (the stored text itself
    when it is no time)."""
    try:
        return iso_utc(datetime.fromisoformat(record.opened_at))
    except ValueError:
        return record.opened_at


def answered_in_of(record: HumanRequestRecord) -> AnsweredIn | None:
    """Where a stored request's outcome goes, as far as its data says (for one that cannot be
    rebuilt); None when the data cannot say."""
    data = _data_of(record)
    answered_in = data.get("answered_in") if data is not None else None
    if answered_in == "event":
        return "event"
    return "call" if answered_in == "call" else None


def stand_in(record: HumanRequestRecord, ended: str) -> ApprovalRequest | InputRequest:
    """A request that could not be rebuilt, kept by its id, question and session only, ended
    (`ended` says why): what a late answer to it is told."""
    try:
        created = datetime.fromisoformat(record.opened_at)
    except ValueError:
        created = utc_now()
    common: dict[str, Any] = {"created": created, "call_id": _call_id_of(record), "ended": ended}
    if record.kind == "approval":
        return ApprovalRequest(record.id, record.session, "", record.question, (), **common)
    return InputRequest(record.id, record.session, "", "", record.question, **common)


def _call_id_of(record: HumanRequestRecord) -> str:
    data = _data_of(record)
    call_id = data.get("call_id") if data is not None else None
    return call_id if isinstance(call_id, str) else ""


def _data_of(record: HumanRequestRecord) -> dict[str, Any] | None:
    """A stored request's data, or None when it is not a JSON object."""
    try:
        data = json.loads(record.data)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None
