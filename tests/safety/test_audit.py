"""The audit log against a real store file: redaction, alerts, export filters and statistics."""

from __future__ import annotations

import io
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tool_services import Events
from wakeful.errors import UserError
from wakeful.events import SYSTEM_ALERT
from wakeful.safety.audit import (
    REDACTED,
    AuditLog,
    AuditRecord,
    AuditStatus,
    export_jsonl,
    percentile,
    redact,
    stats,
)
from wakeful.store.sqlite import Store

pytestmark = pytest.mark.anyio

T0 = datetime(2025, 6, 2, 7, 0, tzinfo=UTC)
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\nabc\n-----END RSA PRIVATE KEY-----"
ALLOWED = [{"layer": "policy", "decision": "allow", "reasons": []}]


def call(
    tool: str = "send_email",
    status: AuditStatus = "ok",
    *,
    at: datetime = T0,
    session: str = "main",
    duration_ms: float = 10.0,
    error: str | None = None,
    arguments: dict[str, Any] | None = None,
    call_id: str = "call_1",
) -> AuditRecord:
    return AuditRecord(
        time=at,
        session=session,
        tool=tool,
        call_id=call_id,
        arguments=arguments if arguments is not None else {"to": "ann@example.com"},
        decisions=ALLOWED,
        status=status,
        duration_ms=duration_ms,
        error=error,
    )


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "wakeful.db"


@pytest.fixture
async def store(db_path: Path) -> AsyncIterator[Store]:
    async with await Store.open(db_path) as opened:
        yield opened


async def exported(store: Store, **filters: Any) -> list[dict[str, Any]]:
    out = io.StringIO()
    count = await export_jsonl(store, out, **filters)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert count == len(lines)
    return lines


# --- redaction -----------------------------------------------------------------------------------


def test_secret_names_are_redacted_at_any_depth() -> None:
    arguments = {
        "url": "https://api.example.com/v1",
        "password": "hunter2",
        "headers": {"Authorization": "whatever", "X-Api-Key": "k", "Cookie": "sid=1"},
        "auth": {"client_secret": "s3", "access_token": "at", "refresh_token": "rt"},
        "keys": [{"private_key": "pk", "name": "deploy"}],
        "max_tokens": 500,
        "verify_password": True,
        "api_key": "",
    }
    assert redact(arguments) == {
        "url": "https://api.example.com/v1",
        "password": REDACTED,
        "headers": {"Authorization": REDACTED, "X-Api-Key": REDACTED, "Cookie": REDACTED},
        "auth": {"client_secret": REDACTED, "access_token": REDACTED, "refresh_token": REDACTED},
        "keys": [{"private_key": REDACTED, "name": "deploy"}],
        "max_tokens": 500,
        "verify_password": True,
        "api_key": "",
    }
    assert arguments["password"] == "hunter2", "redact returns a copy"


@pytest.mark.parametrize(
    ("text", "kept", "gone"),
    [
        ("curl -H 'Authorization: Bearer abcdef123456.xyz'", "Bearer [REDACTED]", "abcdef123456"),
        ("use sk-proj-AbCdEf0123456789xyzXYZ now", "[REDACTED API KEY] now", "AbCdEf0123"),
        ("aws AKIAIOSFODNN7EXAMPLE key", "aws [REDACTED AWS KEY] key", "IOSFODNN7"),
        (
            "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "aws_secret_access_key = [REDACTED]",
            "wJalrXUtnFEMI",
        ),
        (f"key:\n{PEM}\nend", "key:\n[REDACTED PEM BLOCK]\nend", "MIIEpAIBAAKCAQEA"),
        ("push to https://bob:pa55w0rd@git.example.com/r", "https://bob:[REDACTED]@git", "pa55w"),
        ("token ghp_" + "a1" * 18, "[REDACTED GITHUB TOKEN]", "a1a1a1"),
    ],
)
def test_secret_looking_values_are_redacted_wherever_they_are(
    text: str, kept: str, gone: str
) -> None:
    redacted = redact({"command": text, "nested": [{"note": text}]})
    assert kept in redacted["command"] and gone not in redacted["command"]
    assert redacted["nested"][0]["note"] == redacted["command"]


def test_ordinary_text_is_left_alone() -> None:
    arguments = {
        "body": "A basic understanding of the task-scheduler; the bearer of good news.",
        "tokenizer": "cl100k",
        "path": "notes/sk-short.txt",
    }
    assert redact(arguments) == arguments


# --- recording and alerts ------------------------------------------------------------------------


async def test_records_are_stored_redacted_and_read_back(store: Store) -> None:
    log = AuditLog(store)
    await log.record(
        call(
            "call_webhook",
            "error",
            arguments={"url": "https://h.example/x", "token": "t0p"},
            error="401 for Bearer abcdefgh12345678",
            duration_ms=12.5,
        )
    )
    await store.flush()
    [line] = await exported(store)
    assert line == {
        "time": "2025-06-02T07:00:00+00:00",
        "session": "main",
        "tool": "call_webhook",
        "call_id": "call_1",
        "arguments": {"url": "https://h.example/x", "token": REDACTED},
        "decisions": ALLOWED,
        "status": "error",
        "duration_ms": 12.5,
        "error": "401 for Bearer [REDACTED]",
    }


async def test_repeated_failures_alert_the_operator_once_until_a_success(store: Store) -> None:
    events = Events()
    log = AuditLog(store, emit=events.emit, failure_threshold=3)
    await log.record(call(status="error", error="SMTP 421"))
    await log.record(call(status="denied"))
    await log.record(call(status="timeout", at=T0 + timedelta(hours=2)))
    assert events.seen == []
    await log.record(call(status="error", error="SMTP 421 try later", at=T0 + timedelta(hours=3)))
    [alert] = events.seen
    assert alert.kind == SYSTEM_ALERT and alert.session == "operator"
    assert alert.context == {
        "tool": "send_email",
        "failures": 3,
        "last_error": "SMTP 421 try later",
    }
    assert "send_email failed 3 times" in alert.text and "SMTP 421 try later" in alert.text
    for _ in range(5):
        await log.record(call(status="error", error="still down"))
    assert len(events.seen) == 1
    await log.record(call(status="ok"))
    for _ in range(3):
        await log.record(call(status="timeout"))
    assert len(events.of_kind(SYSTEM_ALERT)) == 2


async def test_failures_within_the_window_alert_even_between_successes(store: Store) -> None:
    events = Events()
    log = AuditLog(store, emit=events.emit, failure_threshold=3, window_seconds=600)

    async def error_then_ok(minutes: int, tool: str = "send_email") -> None:
        await log.record(call(tool, "error", at=T0 + timedelta(minutes=minutes)))
        await log.record(call(tool, "ok", at=T0 + timedelta(minutes=minutes, seconds=1)))

    # Never two in a row, and never three within ten minutes: no alert.
    for minutes in (0, 8, 16, 24):
        await error_then_ok(minutes)
    assert events.seen == []
    # Three within ten minutes, successes between them: one alert, for that tool only.
    for minutes in (30, 31, 32):
        await error_then_ok(minutes)
    await log.record(call("other_tool", "error", at=T0 + timedelta(minutes=32)))
    [alert] = events.seen
    assert alert.context["tool"] == "send_email" and alert.context["failures"] == 3


async def test_bad_records_and_settings_are_refused(store: Store) -> None:
    log = AuditLog(store)
    with pytest.raises(UserError, match="audit status 'broken' of call call_1 is unknown"):
        await log.record(call(status="broken"))  # type: ignore[arg-type]
    with pytest.raises(UserError, match=r"duration -1\.0 ms of call call_1 is not a finite"):
        await log.record(call(duration_ms=-1.0))
    with pytest.raises(UserError, match="has no time zone"):
        await log.record(call(at=datetime(2025, 1, 1)))
    with pytest.raises(UserError, match="failure_threshold >= 1"):
        AuditLog(store, failure_threshold=0)
    await store.flush()
    assert await exported(store) == []


# --- export and statistics -----------------------------------------------------------------------


async def test_export_filters_by_time_session_and_tool(store: Store) -> None:
    log = AuditLog(store)
    await log.record(call("send_email", at=T0, session="a", call_id="c1"))
    await log.record(call("call_webhook", at=T0 + timedelta(hours=1), session="a", call_id="c2"))
    await log.record(call("send_email", at=T0 + timedelta(hours=2), session="b", call_id="c3"))
    await store.flush()
    ids = [line["call_id"] for line in await exported(store)]
    assert ids == ["c1", "c2", "c3"]
    assert [r["call_id"] for r in await exported(store, since=T0 + timedelta(hours=1))] == [
        "c2",
        "c3",
    ]
    assert [r["call_id"] for r in await exported(store, session="a")] == ["c1", "c2"]
    assert [r["call_id"] for r in await exported(store, tool="send_email", session="b")] == ["c3"]
    assert await exported(store, tool="nothing") == []


async def test_export_pages_through_many_records_from_a_reader(store: Store, db_path: Path) -> None:
    log = AuditLog(store)
    for i in range(2500):
        await log.record(call(call_id=f"c{i}", at=T0 + timedelta(seconds=i)))
    await store.flush()
    out = io.StringIO()
    with Store.read_only(db_path) as reader:
        assert await export_jsonl(reader, out) == 2500
    lines = out.getvalue().splitlines()
    assert json.loads(lines[0])["call_id"] == "c0" and json.loads(lines[-1])["call_id"] == "c2499"


def test_percentiles_interpolate_between_neighbours() -> None:
    assert percentile([], 0.5) is None
    assert percentile([7.0], 0.95) == 7.0
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 0.5) == pytest.approx(50.5)
    assert percentile(values, 0.95) == pytest.approx(95.05)


async def test_stats_count_and_time_each_tool(store: Store, db_path: Path) -> None:
    log = AuditLog(store)
    for ms in range(1, 21):
        status: AuditStatus = "error" if ms <= 4 else "ok"
        await log.record(call("send_email", status, duration_ms=float(ms)))
    await log.record(call("send_email", "timeout", duration_ms=30000.0))
    await log.record(call("send_email", "denied", duration_ms=0.0))
    await log.record(call("call_webhook", "denied", duration_ms=0.0, at=T0 + timedelta(days=1)))
    await store.flush()
    with Store.read_only(db_path) as reader:
        webhook, email = stats(reader)
        recent = stats(reader, since=T0 + timedelta(hours=1))
    assert (email.tool, email.calls, email.errors, email.timeouts, email.denied) == (
        "send_email",
        22,
        4,
        1,
        1,
    )
    assert email.error_rate == pytest.approx(5 / 22)
    ran = sorted([float(ms) for ms in range(1, 21)] + [30000.0])
    assert email.p50_ms == percentile(ran, 0.5) == 11.0
    assert email.p95_ms == pytest.approx(percentile(ran, 0.95))
    assert (webhook.calls, webhook.denied, webhook.p50_ms, webhook.error_rate) == (1, 1, None, 0)
    assert [s.tool for s in recent] == ["call_webhook"]
