"""Records as table rows and back, the same on every backend: the columns a row is read with, the
JSON a record's fields are stored as, the checks a stored row must pass, the checks of what a
caller asks to write that both backends make with the same message, and the page queries whose
SQL differs only in its placeholder (and, for timers, two words of dialect).

The SQLite and the PostgreSQL store differ in SQL dialect and in how a time column comes back
(fixed-width UTC text from SQLite, a `datetime` from PostgreSQL); the rest of a row is the same,
so both write and read it here. Decoders take times as the SQLite store writes them (see
:func:`wakeful.store.events.utc_key`): the PostgreSQL repositories convert their time columns
first. A decoder raises ValueError, KeyError or TypeError on a malformed row, which
:func:`decode_row` turns into a StoreError naming the row and the store.

This module imports nothing of the store: both backends' readers and repositories can use it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Literal, TypeVar, get_args

from ..core.records import (
    AuditRow,
    CaseRecord,
    ConnectedChannel,
    DeliveryState,
    HumanRequestRecord,
    HumanRequestStatus,
    MessageAttachment,
    MessageDelivery,
    OutboundMessage,
    StoredConfirmation,
    SubagentRecord,
    TaskRecord,
    TimerRecord,
    advanced_delivery,
)
from ..errors import StoreError, UserError

__all__ = [
    "AUDIT_COLUMNS",
    "CASE_COLUMNS",
    "CONFIRMATION_COLUMNS",
    "DELIVERY_COLUMNS",
    "HUMAN_REQUEST_COLUMNS",
    "IDEMPOTENCY_COLUMNS",
    "MESSAGE_COLUMNS",
    "SUBAGENT_COLUMNS",
    "audit_page_query",
    "audit_row",
    "case_row",
    "check_closing_status",
    "check_delivery_state",
    "confirmation_row",
    "connected_channel_row",
    "decode_audit",
    "decode_case",
    "decode_confirmation",
    "decode_connected_channel",
    "decode_human_request",
    "decode_late_answers",
    "decode_message",
    "decode_row",
    "decode_subagent",
    "delivery_rows",
    "delivery_update",
    "human_request_row",
    "idempotency_state",
    "late_answer",
    "message_body",
    "message_page_filter",
    "message_row",
    "subagent_row",
    "task_from_json",
    "timer_from_json",
    "timer_list_query",
    "timer_row",
]

T = TypeVar("T")
# The time a backend stores: UTC text in SQLite, a datetime in PostgreSQL.
W = TypeVar("W")

IDEMPOTENCY_COLUMNS: Final = (
    "tool, key, arguments_hash, state, owner, started_at, finished_at, result, error"
)
CONFIRMATION_COLUMNS: Final = (
    "token, tool, arguments_hash, field_hashes, preview, issued_at, expires_at, state, used_at, "
    "error"
)
AUDIT_COLUMNS: Final = "seq, ts, session, tool, call_id, status, duration_ms, data"
CASE_COLUMNS: Final = (
    "number, session, kind, tool, request, reasons, context, decision, reason, decided_at, "
    "timed_out, request_id, answer"
)
# A message's columns, its table named `m` (the reads join it with its deliveries); also the
# order of `message_row`.
MESSAGE_COLUMNS: Final = (
    "m.id, m.session, m.created_at, m.urgency, m.kind, m.body, m.read_at, m.read_on"
)
# A delivery's columns, in the order of `MessageDelivery` and of `delivery_rows`.
DELIVERY_COLUMNS: Final = (
    "message_id, channel, state, updated_at, channel_message_id, error, sent_at, read_at"
)
# The order of `SubagentRecord` and of `subagent_row`.
SUBAGENT_COLUMNS: Final = (
    "id, parent, parent_call, root, depth, agent, task, mode, status, created_at, finished_at, "
    "result, error, tokens, delivered, context_strategy"
)
# The order of `HumanRequestRecord` and of `human_request_row`.
HUMAN_REQUEST_COLUMNS: Final = (
    "id, session, kind, question, priority, opened_at, deadline, data, status, decision, "
    "closed_at, delivered, late"
)


def decode_row(where: object, what: str, decode: Callable[[], T]) -> T:
    """Run `decode` on a stored row, turning a malformed row into a StoreError that names it and
    `where` it is stored (a SQLite file's path, a PostgreSQL database)."""
    try:
        return decode()
    except (ValueError, KeyError, TypeError, UserError) as exc:
        raise StoreError(
            f"The {what} stored in {where} cannot be read ({exc}). The row was left as it is; "
            "it was probably written by a different wakeful version or edited by hand."
        ) from exc


# -- idempotency keys --


def idempotency_state(result: str | None) -> Literal["done", "failed"]:
    """The state of a finished claim: 'done' with a result, 'failed' without one (the action
    raised or was cancelled, its effect unknown)."""
    return "done" if result is not None else "failed"


# -- confirmation tokens --


def confirmation_row(entry: StoredConfirmation) -> tuple[str, str, str, str, str, str, str, str]:
    """The values of a new token's row: (token, tool, arguments_hash, field_hashes, preview,
    issued_at, expires_at, state), its hashes and preview as JSON text."""
    return (
        entry.token,
        entry.tool,
        entry.arguments_hash,
        json.dumps(entry.field_hashes, sort_keys=True),
        json.dumps(entry.preview, ensure_ascii=False, default=str),
        entry.issued_at,
        entry.expires_at,
        entry.state,
    )


def decode_confirmation(row: Sequence[Any]) -> StoredConfirmation:
    """A token from its row (`CONFIRMATION_COLUMNS`, `used_at` as UTC text)."""
    token, tool, arguments_hash, field_hashes, preview, *rest = row
    return StoredConfirmation(
        token, tool, arguments_hash, json.loads(field_hashes), json.loads(preview), *rest
    )


# -- the audit log --


def audit_row(
    ts: W,
    session: str,
    tool: str,
    call_id: str,
    status: str,
    duration_ms: float,
    data: dict[str, Any],
) -> tuple[W, str, str, str, str, float, str]:
    """The values of an audited call's row, in the insert's column order, `data` as JSON text."""
    data_json = json.dumps(data, ensure_ascii=False, default=str)
    return (ts, session, tool, call_id, status, duration_ms, data_json)


def decode_audit(row: Sequence[Any]) -> AuditRow:
    """An audited call from its row (`AUDIT_COLUMNS`, `ts` as UTC text)."""
    seq, ts, session, tool, call_id, status, duration_ms, data = row
    return AuditRow(
        int(seq), ts, session, tool, call_id, status, float(duration_ms), json.loads(data)
    )


def audit_page_query(
    placeholder: str,
    *,
    since: object | None,
    session: str | None,
    tool: str | None,
    after_seq: int,
    limit: int,
) -> tuple[str, list[object]]:
    """The select of audited calls in the order they were recorded, the first `limit` after
    `after_seq`, filtered by the ones of `since`, `session` and `tool` that are given; with the
    dialect's `placeholder` ('?' or '%s') and `since` as the backend stores times."""
    where: list[str] = [f"seq > {placeholder}"]
    params: list[object] = [after_seq]
    for column, op, value in (("ts", ">=", since), ("session", "=", session), ("tool", "=", tool)):
        if value is not None:
            where.append(f"{column} {op} {placeholder}")
            params.append(value)
    sql = (
        f"SELECT {AUDIT_COLUMNS} FROM audit WHERE {' AND '.join(where)} "
        f"ORDER BY seq LIMIT {placeholder}"
    )
    return sql, [*params, max(0, limit)]


# -- cases --


def case_row(case: CaseRecord) -> tuple[object, ...]:
    """The values of a new case's row, every column but its number (the store gives that), its
    reasons and answer as JSON text."""
    answer = json.dumps(case.answer, ensure_ascii=False) if case.answer is not None else None
    return (
        case.session,
        case.kind,
        case.tool,
        case.request,
        json.dumps(list(case.reasons), ensure_ascii=False),
        case.context,
        case.decision,
        case.reason,
        case.decided_at,
        # A bool: PostgreSQL's column is boolean, SQLite stores it as the integer 0 or 1.
        case.timed_out,
        case.request_id,
        answer,
    )


def decode_case(row: Sequence[Any]) -> CaseRecord:
    """A case from its row (`CASE_COLUMNS`)."""
    values = list(row)
    reasons = json.loads(values[5])
    answer = json.loads(values[12]) if values[12] is not None else None
    if not isinstance(reasons, list) or not isinstance(answer, dict | None):
        raise ValueError("its reasons are not a list, or its answer not an object")
    values[0] = int(values[0])
    values[5] = tuple(str(reason) for reason in reasons)
    values[10] = bool(values[10])
    values[12] = answer
    return CaseRecord(*values)


# -- connected channels --


def connected_channel_row(
    name: str, kind: str, settings: Mapping[str, Any], filter: Mapping[str, Any], connected_at: W
) -> tuple[str, str, str, str, W]:
    """The values of a connected channel's row, its settings and filter as JSON objects' text
    (keys sorted, so an unchanged channel is stored the same)."""
    return (name, kind, _json_object(settings), _json_object(filter), connected_at)


def decode_connected_channel(
    name: str, kind: str, settings: str, filter_: str, connected_at: str | None
) -> ConnectedChannel:
    """A connected channel from its row's values (`connected_at` as UTC text)."""
    settings_object, filter_object = json.loads(settings), json.loads(filter_)
    if not isinstance(settings_object, dict) or not isinstance(filter_object, dict):
        raise ValueError("its settings and filter must be JSON objects")
    return ConnectedChannel(name, kind, settings_object, filter_object, connected_at or "")


def _json_object(value: Mapping[str, Any]) -> str:
    return json.dumps(dict(value), ensure_ascii=False, sort_keys=True, default=str)


# -- messages to the user --


def message_body(message: OutboundMessage) -> str:
    """The JSON stored in `messages.body`: what the message says, without its bookkeeping."""
    body: dict[str, object] = {"text": message.text}
    if message.attachments:
        body["attachments"] = [item._asdict() for item in message.attachments]
    if message.card is not None:
        body["card"] = message.card
    if message.title is not None:
        body["title"] = message.title
    return json.dumps(body, ensure_ascii=False, sort_keys=True)


def message_row(message: OutboundMessage) -> tuple[str | None, ...]:
    """The values of a new message's row, in the order of `MESSAGE_COLUMNS`."""
    return (
        message.id,
        message.session,
        message.created_at,
        message.urgency,
        message.kind,
        message_body(message),
        message.read_at,
        message.read_on,
    )


def delivery_rows(message: OutboundMessage) -> list[tuple[str | None, ...]]:
    """The values of a new message's delivery rows, in the order of `DELIVERY_COLUMNS`."""
    return [(message.id, *delivery[1:]) for delivery in message.deliveries]


def decode_message(row: Sequence[Any], deliveries: tuple[MessageDelivery, ...]) -> OutboundMessage:
    """A stored message from its row (`MESSAGE_COLUMNS`) and its deliveries."""
    message_id, session, created_at, urgency, kind, body, read_at, read_on = row
    data = json.loads(body)
    if not isinstance(data, dict):
        raise ValueError("its body must be a JSON object")
    return OutboundMessage(
        id=message_id,
        session=session,
        created_at=created_at,
        urgency=urgency,
        kind=kind,
        text=str(data.get("text", "")),
        attachments=tuple(MessageAttachment(**item) for item in data.get("attachments", ())),
        card=data.get("card"),
        title=data.get("title"),
        read_at=read_at,
        read_on=read_on,
        deliveries=deliveries,
    )


def check_delivery_state(state: str) -> None:
    """Refuse (UserError) a delivery state that is not one of `DeliveryState`."""
    if state not in get_args(DeliveryState):
        raise UserError(
            f"Unknown delivery state {state!r}; use one of {', '.join(get_args(DeliveryState))}."
        )


def delivery_update(
    stored: DeliveryState,
    state: DeliveryState,
    now: str,
    channel_message_id: str | None,
    error: str | None,
) -> tuple[str | None, ...]:
    """The values of a delivery's update to `state` from the `stored` one, in the order (state,
    updated_at, sent_at, read_at, channel_message_id, error): the state only ever advances, and
    the time it was sent or read is set once (the update keeps a stored one)."""
    return (
        advanced_delivery(stored, state),
        now,
        now if state in ("sent", "delivered") else None,
        now if state == "read" else None,
        channel_message_id,
        error,
    )


def message_page_filter(
    placeholder: str, *, session: str | None, unread_only: bool, before: str | None
) -> tuple[str, list[object]]:
    """The condition on `messages m` of a page of messages (see `MessageRepository.list`), with
    the dialect's `placeholder` ('?' or '%s'), and its parameters."""
    where: list[str] = ["1 = 1"]
    params: list[object] = []
    if session is not None:
        where.append(f"m.session = {placeholder}")
        params.append(session)
    if unread_only:
        where.append("m.read_at IS NULL")
    if before is not None:
        where.append(f"m.seq < coalesce((SELECT seq FROM messages WHERE id = {placeholder}), -1)")
        params.append(before)
    return " AND ".join(where), params


# -- subagents --


def subagent_row(record: SubagentRecord) -> tuple[object, ...]:
    """The values of a new subagent's row, in the order of `SUBAGENT_COLUMNS` (`delivered` a
    bool: PostgreSQL's column is boolean, SQLite stores it as the integer 0 or 1)."""
    return tuple(record)


def decode_subagent(row: Sequence[Any]) -> SubagentRecord:
    """A subagent from its row (`SUBAGENT_COLUMNS`)."""
    values = list(row)
    values[14] = bool(values[14])
    return SubagentRecord(*values)


# -- requests to a person --


def human_request_row(record: HumanRequestRecord) -> tuple[object, ...]:
    """The values of a new request's row, in the order of `HUMAN_REQUEST_COLUMNS`: its id in
    lower case (ids are compared so), `delivered` a bool (see `subagent_row`)."""
    return tuple(record._replace(id=record.id.lower()))


def decode_human_request(row: Sequence[Any]) -> HumanRequestRecord:
    """A request to a person from its row (`HUMAN_REQUEST_COLUMNS`)."""
    values = list(row)
    values[11] = bool(values[11])
    return HumanRequestRecord(*values)


def check_closing_status(request_id: str, status: HumanRequestStatus) -> None:
    """Refuse (UserError) closing a request with the status 'open'."""
    if status == "open":
        raise UserError(
            f"Request {request_id} cannot be closed with the status 'open'; close it as "
            "'answered', 'timed_out' or 'ended'."
        )


def late_answer(request_id: str, answer: str) -> Any:
    """The value of a late answer given as JSON text; UserError when it is not JSON."""
    try:
        return json.loads(answer)
    except ValueError as exc:
        raise UserError(
            f"The late answer to request {request_id} is not JSON text ({exc}); pass it "
            "through json.dumps."
        ) from exc


def decode_late_answers(text: str) -> list[Any]:
    """A request's stored late answers (a JSON list); ValueError for anything else."""
    late = json.loads(text)
    if not isinstance(late, list):
        raise ValueError("its late answers are not a list")
    return late


# -- tasks and timers: a record stored as JSON --


def task_from_json(data: str) -> TaskRecord:
    return TaskRecord.from_dict(json.loads(data))


def timer_from_json(data: str) -> TimerRecord:
    return TimerRecord.from_dict(json.loads(data))


def timer_row(record: TimerRecord, next_fire: W) -> tuple[str, str, bool, W, str]:
    """The values of a timer's row: (id, session, active, next_fire, data), `next_fire` as the
    backend stores times, the record as JSON text (`active` a bool, see `subagent_row`)."""
    return (record.id, record.session, record.active, next_fire, json.dumps(record.to_dict()))


def timer_list_query(
    placeholder: str,
    *,
    session: str | None,
    active_only: bool,
    true: str,
    insertion_order: str,
) -> tuple[str, list[object]]:
    """The select of stored timers (`id, data`), active ones soonest first, then finished ones;
    of `session` and only active ones when asked. The dialect gives its `placeholder` ('?' or
    '%s'), its word for a true `active` ('1' or 'true') and the column that keeps the order
    rows were inserted in ('rowid' or 'seq')."""
    where: list[str] = []
    params: list[object] = []
    if session is not None:
        where.append(f"session = {placeholder}")
        params.append(session)
    if active_only:
        where.append(f"active = {true}")
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    sql = (
        f"SELECT id, data FROM timers{clause} "
        f"ORDER BY active DESC, next_fire IS NULL, next_fire, {insertion_order}"
    )
    return sql, params
