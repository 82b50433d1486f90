"""The audit log: every tool call, who decided what about it, and how it ended, in the store.

A record keeps the call's arguments with secrets redacted (by key name and by the look of the
value), the path of decisions the safety layers took, the result status, the duration and an
error excerpt. :class:`AuditLog` writes records without waiting for their commit and tells the
operator, once, when one tool keeps failing; :func:`export_jsonl` and :func:`stats` read them back
(for `wakeful audit`).
"""

from __future__ import annotations

import json
import math
import re
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING, Any, Final, Literal, TextIO, cast, get_args

import anyio.to_thread

from ..errors import UserError
from ..events import SYSTEM_ALERT, Event, Source
from ..store.events import utc_key
from ..store.reader import AuditRow, StoreReader

if TYPE_CHECKING:
    from ..core.runtime_store import RuntimeStore
    from ..services import Emit
    from ..store.postgres.reader import PostgresReader

__all__ = [
    "ALERT_SESSION",
    "REDACTED",
    "AuditLog",
    "AuditRecord",
    "AuditStatus",
    "ToolStats",
    "export_jsonl",
    "redact",
    "redact_text",
    "stats",
    "store_stats",
]

AuditStatus = Literal["ok", "error", "denied", "cancelled", "timeout"]
FAILURE_STATUSES: Final = frozenset({"error", "timeout"})
ALERT_SESSION: Final = "operator"
REDACTED: Final = "[REDACTED]"
ERROR_EXCERPT_CHARS: Final = 2000
_EXPORT_PAGE: Final = 1000

# Argument names whose values are secrets, wherever they appear in nested arguments. "token" must
# not be followed by a letter, so that `max_tokens` and `tokenizer` stay readable.
_SECRET_KEY = re.compile(
    r"pass(word|wd|phrase)|secret|token(?![a-z])|api[-_]?key|authorization|cookie|"
    r"private[-_]?key|credential|access[-_]?key|signing[-_]?key|^pwd$|^pin$",
    re.IGNORECASE,
)
# Values that look like secrets whatever their argument is called; each is replaced alone, so the
# text around it stays readable.
_SECRET_VALUES: Final = (
    (
        re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----.*?(-----END \1-----|\Z)", re.DOTALL),
        "[REDACTED PEM BLOCK]",
    ),
    (re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9\-._~+/]{8,}=*"), r"\1 " + REDACTED),
    (re.compile(r"\bsk-[A-Za-z0-9_\-]{16,}"), "[REDACTED API KEY]"),
    (re.compile(r"\b(AKIA|ASIA)[0-9A-Z]{16}\b"), "[REDACTED AWS KEY]"),
    (
        re.compile(r"(?i)(aws_secret_access_key\s*[=:]\s*)[A-Za-z0-9/+=]{40}"),
        r"\1" + REDACTED,
    ),
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}"), "[REDACTED GITHUB TOKEN]"),
    (re.compile(r"\bxox[abprs]-[A-Za-z0-9\-]{10,}"), "[REDACTED SLACK TOKEN]"),
    (
        re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]+"),
        "[REDACTED JWT]",
    ),
    (re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://[^\s/:@]+):[^\s/@]+@"), r"\1:" + REDACTED + "@"),
)


def redact_text(text: str) -> str:
    """`text` with every value that looks like a secret replaced by a marker naming its kind."""
    for pattern, replacement in _SECRET_VALUES:
        text = pattern.sub(replacement, text)
    return text


def _redact_value(value: Any) -> Any:
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, Mapping):
        return redact(value)
    if isinstance(value, list | tuple):
        return [_redact_value(item) for item in value]
    return value


def redact(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of `arguments` fit for the audit log: secrets replaced, everything else kept.

    A value under a secret-sounding name (password, token, api_key, authorization, cookie, …) is
    replaced whole, unless it is a boolean or empty; other strings, at any depth, keep their text
    with only secret-looking parts (bearer tokens, `sk-…` keys, AWS keys, PEM blocks, …) replaced.
    """
    redacted: dict[str, Any] = {}
    for name, value in arguments.items():
        secret_name = isinstance(name, str) and _SECRET_KEY.search(name) is not None
        if secret_name and value not in (None, "", True, False):
            redacted[str(name)] = REDACTED
        else:
            redacted[str(name)] = _redact_value(value)
    return redacted


@dataclass
class AuditRecord:
    """One tool call as the audit log keeps it.

    `decisions` is the path the call took through the safety layers, outermost first: dicts like
    ``{"layer": "policy", "decision": "allow", "reasons": []}``.
    """

    time: datetime
    session: str
    tool: str
    call_id: str
    arguments: dict[str, Any]
    decisions: list[dict[str, Any]]
    status: AuditStatus
    duration_ms: float
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "time": self.time.astimezone(UTC).isoformat(),
            "session": self.session,
            "tool": self.tool,
            "call_id": self.call_id,
            "arguments": self.arguments,
            "decisions": self.decisions,
            "status": self.status,
            "duration_ms": self.duration_ms,
            "error": self.error,
        }

    @classmethod
    def from_row(cls, row: AuditRow) -> AuditRecord:
        return cls(
            time=datetime.fromisoformat(row.ts),
            session=row.session,
            tool=row.tool,
            call_id=row.call_id,
            arguments=row.data.get("arguments", {}),
            decisions=row.data.get("decisions", []),
            status=row.status,  # type: ignore[arg-type]
            duration_ms=row.duration_ms,
            error=row.data.get("error"),
        )


def _check(record: AuditRecord) -> None:
    if record.status not in get_args(AuditStatus):
        raise UserError(
            f"The audit status {record.status!r} of call {record.call_id} is unknown; use one "
            f"of {', '.join(get_args(AuditStatus))}."
        )
    if not (record.duration_ms >= 0 and math.isfinite(record.duration_ms)):
        raise UserError(
            f"The duration {record.duration_ms!r} ms of call {record.call_id} is not a finite, "
            "non-negative number of milliseconds; measure it with time.monotonic()."
        )
    if record.time.tzinfo is None:
        raise UserError(
            f"The time {record.time.isoformat()} of call {record.call_id} has no time zone; "
            "give an aware UTC time, e.g. datetime.now(UTC)."
        )


@dataclass
class _ToolHealth:
    """Recent failures of one tool, and whether the operator has been told."""

    consecutive: int = 0
    recent: deque[datetime] = field(default_factory=deque)
    alerted: bool = False


class AuditLog:
    """Records tool calls in the store and alerts the operator when a tool keeps failing.

    After `failure_threshold` failures or timeouts of one tool in a row, or that many within
    `window_seconds`, one ``system.alert`` event goes to the session ``"operator"``; the next
    comes only after that tool has succeeded once. Denied and cancelled calls count neither way.
    """

    def __init__(
        self,
        store: RuntimeStore,
        *,
        emit: Emit | None = None,
        failure_threshold: int = 3,
        window_seconds: float = 600,
    ) -> None:
        if failure_threshold < 1 or not window_seconds > 0:
            raise UserError(
                f"An audit log needs failure_threshold >= 1 and window_seconds > 0, got "
                f"{failure_threshold!r} and {window_seconds!r}; the defaults are 3 and 600."
            )
        self.store = store
        self.emit = emit
        self.failure_threshold = failure_threshold
        self.window = timedelta(seconds=window_seconds)
        self._health: dict[str, _ToolHealth] = {}

    async def record(self, record: AuditRecord) -> None:
        """Store `record` with its secrets redacted, without waiting for the commit."""
        _check(record)
        error = redact_text(record.error)[:ERROR_EXCERPT_CHARS] if record.error else None
        self.store.add_audit_nowait(
            ts=record.time,
            session=record.session,
            tool=record.tool,
            call_id=record.call_id,
            status=record.status,
            duration_ms=record.duration_ms,
            data={
                "arguments": redact(record.arguments),
                "decisions": record.decisions,
                "error": error,
            },
        )
        await self._watch(record, error)

    async def _watch(self, record: AuditRecord, error: str | None) -> None:
        health = self._health.setdefault(record.tool, _ToolHealth())
        if record.status == "ok":
            # Failures within the window still count after a success; a streak does not.
            health.consecutive, health.alerted = 0, False
            return
        if record.status not in FAILURE_STATUSES:
            return
        health.consecutive += 1
        health.recent.append(record.time)
        while health.recent and health.recent[0] <= record.time - self.window:
            health.recent.popleft()
        count = max(health.consecutive, len(health.recent))
        if health.alerted or count < self.failure_threshold:
            return
        # The alert covers these failures: the next one needs a fresh set.
        health.alerted, health.consecutive = True, 0
        health.recent.clear()
        if self.emit is not None:
            await self.emit(self._alert(record, count, error))

    def _alert(self, record: AuditRecord, count: int, error: str | None) -> Event:
        minutes = self.window.total_seconds() / 60
        last = f"{record.status}: {error}" if error else record.status
        return Event(
            kind=SYSTEM_ALERT,
            source=Source(type="system", id="audit"),
            content=(
                f"The tool {record.tool} failed {count} times (in a row, or within "
                f"{minutes:g} minutes); the last failure was {last}. Check what it depends on "
                f"(`wakeful audit stats` shows every tool). This is not repeated until "
                f"{record.tool} succeeds once."
            ),
            context={"tool": record.tool, "failures": count, "last_error": error},
            urgency="high",
            session=ALERT_SESSION,
        )


async def export_jsonl(
    source: RuntimeStore | StoreReader | PostgresReader,
    out: TextIO,
    *,
    since: datetime | None = None,
    session: str | None = None,
    tool: str | None = None,
) -> int:
    """Write the audited calls, oldest first, as one JSON object a line; return how many."""
    since_key = utc_key(since)
    after, written = 0, 0
    while True:
        read = partial(_page, source, since=since, since_key=since_key, session=session, tool=tool)
        rows = await read(after_seq=after)
        if not rows:
            return written
        text = "".join(
            json.dumps(AuditRecord.from_row(row).to_json(), ensure_ascii=False, default=str) + "\n"
            for row in rows
        )
        await anyio.to_thread.run_sync(out.write, text)
        written += len(rows)
        after = rows[-1].seq


async def _page(
    source: RuntimeStore | StoreReader | PostgresReader,
    *,
    since: datetime | None,
    since_key: str | None,
    session: str | None,
    tool: str | None,
    after_seq: int,
) -> list[AuditRow]:
    reader = _reader_of(source)
    if reader is not None:
        read = partial(
            reader.audit_rows,
            since=since_key,
            session=session,
            tool=tool,
            after_seq=after_seq,
            limit=_EXPORT_PAGE,
        )
        return await anyio.to_thread.run_sync(read)
    store = cast("RuntimeStore", source)
    return await store.audit_rows(
        since=since, session=session, tool=tool, after_seq=after_seq, limit=_EXPORT_PAGE
    )


@dataclass(frozen=True)
class ToolStats:
    """How one tool's calls went. `error_rate` is the share that failed (error or timeout);
    the percentiles cover the calls that ran (denied ones did not), None when none did."""

    tool: str
    calls: int
    errors: int
    error_rate: float
    timeouts: int
    denied: int
    cancelled: int
    p50_ms: float | None
    p95_ms: float | None

    def to_json(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "errors": self.errors,
            "error_rate": self.error_rate,
            "timeouts": self.timeouts,
            "denied": self.denied,
            "cancelled": self.cancelled,
            "p50_ms": self.p50_ms,
            "p95_ms": self.p95_ms,
        }


def percentile(ordered: Sequence[float], q: float) -> float | None:
    """The q-quantile (0..1) of sorted values, interpolating linearly between neighbours."""
    if not ordered:
        return None
    position = (len(ordered) - 1) * q
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _reader_of(
    source: RuntimeStore | StoreReader | PostgresReader,
) -> StoreReader | PostgresReader | None:
    """`source` when it is a synchronous reader (of a file or a database), None for a store."""
    if isinstance(source, StoreReader):
        return source
    try:  # the PostgreSQL reader needs psycopg, which a SQLite-only install may lack
        from ..store.postgres.reader import PostgresReader
    except ImportError:
        return None
    return source if isinstance(source, PostgresReader) else None


def stats(
    reader: StoreReader | PostgresReader, *, since: datetime | None = None
) -> list[ToolStats]:
    """Per tool, sorted by name: call counts, error rate and p50/p95 durations since `since`."""
    return _tool_stats(reader.audit_durations(utc_key(since)))


async def store_stats(store: RuntimeStore, *, since: datetime | None = None) -> list[ToolStats]:
    """:func:`stats` of a running store's audit log, on either backend (the web console's
    figures): a SQLite file is read on its own read-only connection, in a thread; a PostgreSQL
    database through the store's pool."""
    path = store.path
    if path is None:
        from ..store.postgres.audit import PostgresAuditLog

        audit_log = store.audit_log
        if not isinstance(audit_log, PostgresAuditLog):
            raise TypeError(f"No audit statistics for a store of type {type(store).__name__}.")
        return _tool_stats(await audit_log.durations(since))

    def read() -> list[ToolStats]:
        from ..store.sqlite import Store

        with Store.read_only(path) as reader:
            return stats(reader, since=since)

    return await anyio.to_thread.run_sync(read)


def _tool_stats(durations: Iterable[tuple[str, str, float]]) -> list[ToolStats]:
    by_tool: dict[str, list[tuple[str, float]]] = {}
    for tool, status, duration_ms in durations:
        by_tool.setdefault(tool, []).append((status, duration_ms))
    result = []
    for tool, calls in sorted(by_tool.items()):
        statuses = [status for status, _ in calls]
        errors, timeouts = statuses.count("error"), statuses.count("timeout")
        ran = sorted(ms for status, ms in calls if status != "denied")
        result.append(
            ToolStats(
                tool=tool,
                calls=len(calls),
                errors=errors,
                error_rate=(errors + timeouts) / len(calls),
                timeouts=timeouts,
                denied=statuses.count("denied"),
                cancelled=statuses.count("cancelled"),
                p50_ms=percentile(ran, 0.5),
                p95_ms=percentile(ran, 0.95),
            )
        )
    return result
