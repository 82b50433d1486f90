"""The records the store keeps and returns: tasks, timers, events as stored, and the safety
records (idempotency keys, confirmation tokens, audited calls).

They live in the core so that the store, the tools and the channels all depend on them, and the
store on nothing above the core. A timer's schedule maths stays with the timers channel
(:mod:`wakeful.channels.timer_schedules`); the record only describes the schedule.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, NamedTuple, get_args
from zoneinfo import ZoneInfo

from ..events import Event

__all__ = [
    "AuditRow",
    "ConnectedChannel",
    "DeliveryState",
    "EventStatus",
    "HumanRequestKind",
    "HumanRequestRecord",
    "HumanRequestStatus",
    "IdempotencyEntry",
    "MessageAttachment",
    "MessageDelivery",
    "MessageKind",
    "MissedPolicy",
    "OutboundMessage",
    "StoredConfirmation",
    "StoredEvent",
    "TaskRecord",
    "TaskState",
    "TimerKind",
    "TimerRecord",
    "Urgency",
    "advanced_delivery",
    "iso_utc",
]

# "filtered": stored and countable, but kept from the agent by its channel's filter (the reason
# is in the event's context under "filtered"); never handed to a session, never recovered.
EventStatus = Literal["pending", "consumed", "filtered"]
TaskState = Literal["running", "completed", "failed", "cancelled", "lost"]
MissedPolicy = Literal["fire_once", "skip"]
TimerKind = Literal["once", "every", "cron"]


class StoredEvent(NamedTuple):
    """An event as stored: its position in arrival order, its status, and the event."""

    rowid: int
    status: EventStatus
    event: Event


# --- tasks ---------------------------------------------------------------------------------------


@dataclass
class TaskRecord:
    """The stored, serialisable view of a task."""

    id: str
    session: str
    tool: str
    call_id: str
    description: str
    state: TaskState
    background: bool
    started_at: datetime
    ended_at: datetime | None = None
    percent: float | None = None
    result: str | None = None
    cancel_reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "session": self.session,
            "tool": self.tool,
            "call_id": self.call_id,
            "description": self.description,
            "state": self.state,
            "background": self.background,
            "started_at": self.started_at.isoformat(),
            "ended_at": self.ended_at.isoformat() if self.ended_at else None,
            "percent": self.percent,
            "result": self.result,
            "cancel_reason": self.cancel_reason,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TaskRecord:
        return cls(
            id=data["id"],
            session=data["session"],
            tool=data["tool"],
            call_id=data["call_id"],
            description=data["description"],
            state=data["state"],
            background=bool(data["background"]),
            started_at=datetime.fromisoformat(data["started_at"]),
            ended_at=datetime.fromisoformat(data["ended_at"]) if data.get("ended_at") else None,
            percent=data.get("percent"),
            result=data.get("result"),
            cancel_reason=data.get("cancel_reason"),
        )


# --- timers --------------------------------------------------------------------------------------


@dataclass
class TimerRecord:
    """One timer: the note, the session it wakes, and its schedule.

    `next_fire` is the next scheduled occurrence in UTC, or None once a one-shot timer is done.
    A recurring `every` timer fires at `anchor + k * every_seconds`; a `cron` timer follows its
    expression in `timezone`.
    """

    id: str
    session: str
    note: str
    kind: TimerKind
    next_fire: datetime | None
    active: bool = True
    missed: MissedPolicy = "fire_once"
    every_seconds: float | None = None
    anchor: datetime | None = None
    cron: str | None = None
    timezone: str | None = None
    created_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    last_fired_at: datetime | None = None
    fire_count: int = 0

    def __post_init__(self) -> None:
        if self.kind not in get_args(TimerKind):
            raise ValueError(f"unknown timer kind {self.kind!r}")
        if self.missed not in get_args(MissedPolicy):
            raise ValueError(f"unknown missed policy {self.missed!r}")
        if self.kind == "every" and (self.every_seconds is None or self.anchor is None):
            raise ValueError("an `every` timer needs every_seconds and anchor")
        if self.kind == "cron" and (self.cron is None or self.timezone is None):
            raise ValueError("a `cron` timer needs cron and timezone")
        if self.active and self.next_fire is None:
            raise ValueError("an active timer needs next_fire")

    @property
    def schedule(self) -> str:
        """The schedule in words, e.g. "every 1h", "cron '0 9 * * 5' in Europe/Paris"."""
        if self.kind == "cron":
            return f"cron {self.cron!r} in {self.timezone}"
        if self.kind == "every":
            assert self.every_seconds is not None
            return f"every {_format_seconds(self.every_seconds)}"
        return "once"

    def summary(self) -> dict[str, Any]:
        """The view the timer tools and CLI show."""
        out: dict[str, Any] = {
            "timer_id": self.id,
            "note": self.note,
            "schedule": self.schedule,
            "next_fire": iso_utc(self.next_fire) if self.next_fire else None,
            "missed": self.missed,
            "active": self.active,
            "fire_count": self.fire_count,
        }
        if self.kind == "cron" and self.next_fire is not None and self.timezone:
            out["next_fire_local"] = self.next_fire.astimezone(ZoneInfo(self.timezone)).isoformat()
        if self.last_fired_at is not None:
            out["last_fired_at"] = iso_utc(self.last_fired_at)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "session": self.session,
            "note": self.note,
            "kind": self.kind,
            "next_fire": iso_utc(self.next_fire) if self.next_fire else None,
            "active": self.active,
            "missed": self.missed,
            "every_seconds": self.every_seconds,
            "anchor": iso_utc(self.anchor) if self.anchor else None,
            "cron": self.cron,
            "timezone": self.timezone,
            "created_at": iso_utc(self.created_at),
            "last_fired_at": iso_utc(self.last_fired_at) if self.last_fired_at else None,
            "fire_count": self.fire_count,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TimerRecord:
        """Rebuild a record from :meth:`to_dict` output; ValueError/KeyError if it is malformed."""

        def when(key: str) -> datetime | None:
            value = data.get(key)
            if value is None:
                return None
            parsed = datetime.fromisoformat(value)
            if parsed.tzinfo is None:
                raise ValueError(f"{key} {value!r} has no timezone")
            return parsed.astimezone(UTC)

        every = data.get("every_seconds")
        return cls(
            id=str(data["id"]),
            session=str(data["session"]),
            note=str(data["note"]),
            kind=data["kind"],
            next_fire=when("next_fire"),
            active=bool(data["active"]),
            missed=data.get("missed", "fire_once"),
            every_seconds=float(every) if every is not None else None,
            anchor=when("anchor"),
            cron=data.get("cron"),
            timezone=data.get("timezone"),
            created_at=when("created_at") or datetime.now(UTC),
            last_fired_at=when("last_fired_at"),
            fire_count=int(data.get("fire_count", 0)),
        )


def iso_utc(when: datetime) -> str:
    """`when` in UTC, as RFC 3339 text."""
    return when.astimezone(UTC).isoformat()


def _format_seconds(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


# --- safety records ------------------------------------------------------------------------------


class IdempotencyEntry(NamedTuple):
    """A stored idempotency key: its claim, and the outcome once the action has finished.

    `state` is 'running' (claimed by the store instance `owner`), 'done' (`result` holds the JSON
    of the result) or 'failed' (the action raised or was cancelled: its effect is unknown).
    """

    tool: str
    key: str
    arguments_hash: str
    state: Literal["running", "done", "failed"]
    owner: str
    started_at: str
    finished_at: str | None
    result: str | None
    error: str | None


class StoredConfirmation(NamedTuple):
    """A confirmation token as stored; `field_hashes` maps each top-level argument to its hash."""

    token: str
    tool: str
    arguments_hash: str
    field_hashes: dict[str, str]
    preview: Any
    issued_at: str
    expires_at: str
    state: Literal["issued", "used", "failed"]
    used_at: str | None
    error: str | None


class AuditRow(NamedTuple):
    """One audited tool call; `data` holds its arguments, decisions and error excerpt."""

    seq: int
    ts: str
    session: str
    tool: str
    call_id: str
    status: str
    duration_ms: float
    data: dict[str, Any]


# --- channels ------------------------------------------------------------------------------------


class ConnectedChannel(NamedTuple):
    """A channel the agent connected while running (`connect_channel`), as stored so the next
    start reconnects it: its unique name, its kind, its settings and filter as JSON objects."""

    name: str
    kind: str
    settings: dict[str, Any]
    filter: dict[str, Any]
    connected_at: str


# --- messages to the user ------------------------------------------------------------------------

MessageKind = Literal["text", "card", "notification"]
Urgency = Literal["low", "normal", "high", "urgent"]
# In the order a delivery advances; "failed" stands apart. A delivery never moves back (a channel
# that reports "sent" after the user already read the copy leaves it "read").
DeliveryState = Literal["queued", "sent", "delivered", "read", "failed"]
_DELIVERY_ORDER: dict[str, int] = {"queued": 0, "sent": 1, "delivered": 2, "read": 3}


def advanced_delivery(old: DeliveryState, new: DeliveryState) -> DeliveryState:
    """The state of a delivery at `old` told `new`: it only moves forward, a failure counts
    until the copy was delivered, and a failed delivery may be tried again."""
    if old == "failed" or new == "failed":
        return new if old in ("queued", "sent", "failed") else old
    return new if _DELIVERY_ORDER[new] >= _DELIVERY_ORDER[old] else old


class MessageAttachment(NamedTuple):
    """A workspace file sent with a message, by reference: the user's channel fetches it from
    `path` (resolved, inside the workspace); its bytes never enter the agent's context."""

    path: str
    name: str
    size: int
    type: str


class MessageDelivery(NamedTuple):
    """Where one message went: its state on one channel, with the channel's own id for its copy
    (a Telegram message id, an email Message-ID) and the error of a failed delivery. Times are
    ISO UTC strings."""

    message_id: str
    channel: str
    state: DeliveryState
    updated_at: str
    channel_message_id: str | None = None
    error: str | None = None
    sent_at: str | None = None
    read_at: str | None = None


class OutboundMessage(NamedTuple):
    """A message to the user, as stored: one id (``msg_…``) whatever the channels it went to.

    Read state is one fact about the message: `read_at` is set once, by whichever channel saw it
    read first (`read_on` names it), and stays. `card` is the card's JSON (see
    :mod:`wakeful.toolkits.comms.cards`); `title` is a notification's. `deliveries` are in the
    order they were first recorded.
    """

    id: str
    session: str
    created_at: str
    urgency: str  # one of `Urgency` from the tools; other senders may pass their own word
    kind: MessageKind
    text: str
    attachments: tuple[MessageAttachment, ...] = ()
    card: dict[str, Any] | None = None
    title: str | None = None
    read_at: str | None = None
    read_on: str | None = None
    deliveries: tuple[MessageDelivery, ...] = ()

    @property
    def read(self) -> bool:
        return self.read_at is not None

    @property
    def first_line(self) -> str:
        """The text's first non-empty line (a card's or notification's title when it has no
        text), for lists where a whole message would be too much."""
        for line in self.text.splitlines():
            if line.strip():
                return line.strip()
        if self.card is not None:
            return str(self.card.get("title", ""))
        return self.title or ""


# --- subagents -----------------------------------------------------------------------------------

SubagentStatus = Literal["running", "done", "failed", "cancelled"]
SubagentMode = Literal["sync", "async", "stream"]


class SubagentRecord(NamedTuple):
    """One child agent: whose it is (`parent` session and the call that spawned it), where it
    sits in its tree (`root` session, `depth` 1 for a child of a top-level session), what it was
    asked, and how it ended. `result` is the child's result as JSON text; `delivered` says the
    parent has it (as the spawn call's result or as a `subagent.result` event), so a result is
    handed over exactly once, also across restarts. Times are ISO UTC strings."""

    id: str
    parent: str
    parent_call: str
    root: str
    depth: int
    agent: str
    task: str
    mode: SubagentMode
    status: SubagentStatus
    created_at: str
    finished_at: str | None = None
    result: str | None = None
    error: str | None = None
    tokens: int = 0
    delivered: bool = False
    context_strategy: str = "minimal"


# --- human decisions (cases) ---------------------------------------------------------------------

CaseKind = Literal["approval", "input"]
CaseDecision = Literal["approved", "denied", "answered", "declined"]


class CaseRecord(NamedTuple):
    """One decision on a request to a person, kept so later requests can learn from it.

    What was asked (`kind`, the `tool` it was about or "", the `request` in words and the
    `reasons` it needed a person), the `context` it arose in (the last thing the user asked, in
    short), what was decided and the person's `reason`. `timed_out` marks a decision nobody made:
    the default applied when no answer came in time (`reason` then says so). `number` is the
    case's id, shown as "case 12"; the store gives it. `answer` holds the values of an answered
    input request. Times are ISO UTC strings.
    """

    number: int
    session: str
    kind: CaseKind
    tool: str
    request: str
    reasons: tuple[str, ...]
    context: str
    decision: CaseDecision
    reason: str
    decided_at: str
    timed_out: bool = False
    request_id: str = ""
    answer: dict[str, Any] | None = None

    @property
    def label(self) -> str:
        """How the case is named to people and models: "case 12"."""
        return f"case {self.number}"


# --- requests to a person ------------------------------------------------------------------------

HumanRequestKind = Literal["approval", "input"]
# "open": waiting for the person; "answered": the person decided (approved, denied, answered or
# declined); "timed_out": nobody answered in time, the default applied; "ended": it ended without
# a decision (the call it belonged to ended, e.g. with a restart or a cancellation).
HumanRequestStatus = Literal["open", "answered", "timed_out", "ended"]


class HumanRequestRecord(NamedTuple):
    """One request to a person (the safety gate's approval, an MCP server's input request, the
    agent's request_human_approval / request_human_input), kept so that an open request, its
    answer and the answer's delivery to the session survive a restart.

    `id` is the short id the person types ("/approve 3fa2"), stored lower-case. `data` is JSON
    text holding what rebuilds the request (options, the form's schema, the default, the tool and
    reasons, the call and task it belongs to); `decision` is JSON text of how it ended; `late` is
    JSON text of a list of the answers that came after it ended. `deadline` is when the default
    applies (None: no deadline). `delivered` says the session has the outcome (as an event or as
    the call's result), so it is handed over exactly once, also across restarts. Times are ISO
    UTC strings.
    """

    id: str
    session: str
    kind: HumanRequestKind
    question: str
    priority: str
    opened_at: str
    deadline: str | None
    data: str
    status: HumanRequestStatus = "open"
    decision: str | None = None
    closed_at: str | None = None
    delivered: bool = False
    late: str = "[]"
