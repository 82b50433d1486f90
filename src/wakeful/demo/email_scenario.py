"""Experiment 4-4, the email agent: real mail servers, a real mailbox, a scripted model.

`run_email_demo` starts Dovecot (IMAP, with LMTP delivery) and an SMTP relay into it on
127.0.0.1 in a temporary directory, and a Runtime whose email channel follows the INBOX with
IMAP IDLE. Four mails are sent over SMTP, one after the other, and the agent handles each as it
arrives, with the mail tools against the same server:

- the meeting invitation: it reads the .ics the channel saved, checks the user's calendar for the
  meeting's time, finds the dentist there, and saves a reply to Drafts declining and proposing
  another time, then tells the user;
- the customer complaint: it flags the mail (\\Flagged, high priority) and tells the user its key
  facts with urgency "high";
- the marketing mail: it moves it to Archive, and tells the user nothing;
- the social network's notification: the channel's filter (`senders_deny`) keeps it from the
  agent; it is stored, counted, and costs no model call.

With `restart_after`, the runtime is stopped after that many mails were handled and a new one is
started on the same store, as after a crash or an upgrade: the channel's cursor and the events'
stable ids make sure nothing is handled twice and nothing is skipped.

The model's part is played by a :class:`FunctionModel` that reads each session's trajectory as a
real model would; `model` replaces it (e.g. a configured provider) for the same flow.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from ..agent.session import SessionObserver
from ..agent.session_config import SessionConfig
from ..channels.filters import ChannelFilter
from ..channels.registry import ChannelSpec
from ..events import EMAIL_RECEIVED
from ..messages import AssistantMessage, Message, ToolMessage, UserMessage
from ..models import FunctionModel, Turn, call, say, use
from ..models.base import Model, ModelRequest, StreamPart, ToolDefinition
from ..runtime.runtime import Runtime
from ..services import Outbox
from ..toolkits.mail.settings import MailSettings
from ..toolkits.mail.tools import MAIL_TOOLS
from ..toolkits.perception.calendar import calendar_events
from ..toolkits.perception.read_file import read_file
from .email_fixtures import CALENDAR_ICS, USER_ADDRESS, DemoMail, demo_mails
from .mail_servers import DovecotServer, SmtpRelay, start_dovecot

__all__ = ["CALENDAR_PATH", "EmailDemoResult", "run_email_demo", "secretary_script"]

CALENDAR_PATH = "calendars/personal.ics"
PASSWORD_ENV = "WAKEFUL_DEMO_IMAP_PASSWORD"
SYSTEM_PROMPT = (
    "You are the user's secretary. Mail arrives as events. Check invitations against the user's "
    f"calendar ({CALENDAR_PATH}) and draft replies; flag complaints and tell the user their key "
    "facts; archive marketing. Never send mail yourself: save drafts."
)
ARRIVAL_TIMEOUT_S = 60.0
# The social network's notifications never wake the agent.
DEMO_FILTER = ChannelFilter(senders_deny=["@socialnet.example"])


@dataclass
class EmailDemoResult:
    """What the demo did: the mailbox afterwards, what the user was told, and the counts."""

    transcripts: dict[str, list[Message]] = field(default_factory=dict)
    told_user: list[dict[str, Any]] = field(default_factory=list)
    events: int = 0
    filtered: int = 0
    model_calls: int = 0
    restarts: int = 0
    # Each mailbox's messages afterwards, read over IMAP: subject, flags and In-Reply-To.
    mailboxes: dict[str, list[StoredMail]] = field(default_factory=dict)


@dataclass(frozen=True)
class StoredMail:
    """One message in a mailbox as IMAP shows it after the demo."""

    subject: str
    flags: frozenset[str]
    in_reply_to: str
    message_id: str


# --- the model's part ----------------------------------------------------------------------


def _mail_of(messages: Sequence[Message]) -> dict[str, Any] | None:
    """The email event's payload this session was started by, as the model reads it."""
    for message in messages:
        if isinstance(message, UserMessage) and f"({EMAIL_RECEIVED})" in message.content:
            text = message.content
            try:
                payload, _ = json.JSONDecoder().raw_decode(text[text.index("{") :])
            except (ValueError, json.JSONDecodeError):
                return None
            return payload if isinstance(payload, dict) else None
    return None


def _results(messages: Sequence[Message]) -> list[str]:
    return [m.content for m in messages if isinstance(m, ToolMessage)]


def _calls(messages: Sequence[Message]) -> list[str]:
    return [c.name for m in messages if isinstance(m, AssistantMessage) for c in m.tool_calls]


def _mail_ref(mail: dict[str, Any]) -> dict[str, Any]:
    ref: dict[str, Any] = {"uid": mail["uid"], "mailbox": mail.get("mailbox", "INBOX")}
    if mail.get("uidvalidity") is not None:
        ref["uidvalidity"] = mail["uidvalidity"]
    return ref


_ICS_TIME = re.compile(r"\b(DTSTART|DTEND)[^:\n]*:(\d{8}T\d{6}Z)\b")


def _rfc3339(ics_time: str) -> str:
    return (
        f"{ics_time[0:4]}-{ics_time[4:6]}-{ics_time[6:8]}T"
        f"{ics_time[9:11]}:{ics_time[11:13]}:{ics_time[13:15]}Z"
    )


def secretary_script(messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> Turn:
    """The secretary's decisions for one mail, step by step, from what it has seen so far."""
    mail = _mail_of(messages)
    if mail is None or "uid" not in mail:
        return say("")
    done = _calls(messages)
    results = _results(messages)
    subject = str(mail.get("subject", ""))
    sender = str(mail.get("from", ""))
    attachments = [a for a in mail.get("attachments") or [] if isinstance(a, dict)]
    invite = next((a for a in attachments if str(a.get("name", "")).endswith(".ics")), None)

    if invite is not None:
        if "read_file" not in done:
            return use(call("read_file", path=str(invite["path"])))
        times = dict(_ICS_TIME.findall(results[0] if results else ""))
        if "calendar_events" not in done:
            if "DTSTART" not in times or "DTEND" not in times:
                return use(
                    call("reply_to_user", text=f"I could not read the invitation {subject!r}.")
                )
            start, end = _rfc3339(times["DTSTART"]), _rfc3339(times["DTEND"])
            return use(call("calendar_events", source=CALENDAR_PATH, start=start, end=end))
        busy = results[-1] if done[-1] == "calendar_events" else ""
        if "draft_reply" not in done:
            clash = re.search(r"Dentist|Team stand-up", busy)
            body = (
                "Hi,\n\nThank you for the invitation. I am not available at that time"
                + (f" ({clash.group(0).lower()})" if clash else "")
                + ". Could we meet the same day from 16:00 to 17:00 UTC instead?\n\nBest regards,"
                "\nRobin"
                if clash
                else "Hi,\n\nThank you, that time works for me.\n\nBest regards,\nRobin"
            )
            return use(call("draft_reply", body=body, **_mail_ref(mail)))
        if "reply_to_user" not in done:
            return use(
                call(
                    "reply_to_user",
                    text=f"{sender} invited you to {subject!r}. It clashes with your dentist "
                    "appointment, so I saved a draft in Drafts declining and proposing 16:00-17:00 "
                    "the same day. Send it from your mail app if it is right.",
                )
            )
        return say("")

    if "refund" in subject.lower() or "broken" in subject.lower():
        if "flag_mail" not in done:
            return use(call("flag_mail", flags=["\\Flagged"], **_mail_ref(mail)))
        if "reply_to_user" not in done:
            text = str(mail.get("text", ""))
            orders = ", ".join(dict.fromkeys(re.findall(r"#\d+", text)))
            amount = re.search(r"\d+\.\d\d EUR", text)
            deadline = re.search(r"by ([A-Z][a-z]+ \d+ [A-Z][a-z]+)", text)
            facts = [
                f"orders {orders}" if orders else "",
                f"amount {amount.group(0)}" if amount else "",
                f"wants a full refund by {deadline.group(1)}" if deadline else "",
                "threatens a payment dispute" if "dispute" in text else "",
                "second time this happened" if "second time" in text else "",
            ]
            summary = "; ".join(f for f in facts if f)
            return use(
                call(
                    "reply_to_user",
                    text=f"Complaint from {sender}: {summary}. I flagged it as high priority.",
                    urgency="high",
                )
            )
        return say("")

    if "archive_mail" not in done:
        return use(call("archive_mail", **_mail_ref(mail)))
    return say("")


# --- the demo --------------------------------------------------------------------------------


def _runtime(
    model: Model,
    workdir: Path,
    store_path: Path,
    server: DovecotServer,
    *,
    outbox: Outbox,
    observer: SessionObserver | None,
    channel_filter: ChannelFilter,
) -> Runtime:
    mail = MailSettings(
        host=server.host,
        port=server.port,
        security="none",
        username=server.user,
        password_env=PASSWORD_ENV,
        from_address=f"Robin Lee <{USER_ADDRESS}>",
    )
    channel = ChannelSpec(
        kind="email",
        name="inbox",
        settings={
            "host": server.host,
            "port": server.port,
            "tls": "plain",
            "username": server.user,
            "password_env": PASSWORD_ENV,
            "user_addresses": [USER_ADDRESS],
            "contacts": ["dana@partner.example"],
            "sessions": "per_thread",
            "session": "mail",
            "first_sync": "unseen",
            "poll_interval_seconds": 30.0,
        },
        filter=channel_filter,
        origin="the email demo",
    )
    return Runtime(
        model=model,
        tools=[read_file, calendar_events, *MAIL_TOOLS],
        with_timers=False,
        store_path=store_path,
        workdir=workdir,
        settings=[mail],
        session_config=SessionConfig(system_prompt=SYSTEM_PROMPT),
        channels=[channel],
        outbox=outbox,
        observer=observer,
    )


async def run_email_demo(
    *,
    store_path: Path,
    workdir: Path | None = None,
    model: Model | None = None,
    restart_after: int | None = None,
    observer: SessionObserver | None = None,
    on_mail: Callable[[DemoMail], None] | None = None,
    channel_filter: ChannelFilter = DEMO_FILTER,
) -> EmailDemoResult:
    """Run the demo (see the module docs); needs Dovecot (`dovecot_missing()` says why not)."""
    counting = _CountingModel(model or FunctionModel(secretary_script, name="secretary (scripted)"))
    result = EmailDemoResult()
    outbox = Outbox()
    with tempfile.TemporaryDirectory(prefix="wakeful-email-demo-") as tmp:
        root = Path(tmp)
        work = workdir or root / "workspace"
        (work / "calendars").mkdir(parents=True, exist_ok=True)
        (work / CALENDAR_PATH).write_text(CALENDAR_ICS)
        server = start_dovecot(root / "mail-server")
        relay = SmtpRelay(server)
        relay.start()
        previous = os.environ.get(PASSWORD_ENV)
        os.environ[PASSWORD_ENV] = server.password
        try:
            mails = demo_mails()
            sent = 0
            while sent < len(mails):
                rt = _runtime(
                    counting,
                    work,
                    store_path,
                    server,
                    outbox=outbox,
                    observer=observer,
                    channel_filter=channel_filter,
                )
                async with rt:
                    stop = len(mails) if restart_after is None or result.restarts else restart_after
                    while sent < stop:
                        mail = mails[sent]
                        if on_mail is not None:
                            on_mail(mail)
                        before = await _stored(rt)
                        await anyio.to_thread.run_sync(_send, relay, mail)
                        await _arrived(rt, before)
                        await rt.wait_idle()
                        sent += 1
                    result.transcripts.update(
                        {sid: list(s.trajectory.messages) for sid, s in rt.sessions.items()}
                    )
                    counts = await rt.store.events.count() if rt.store is not None else {}
                if sent < len(mails):
                    result.restarts += 1
            result.events = sum(counts.values())
            result.filtered = counts.get("filtered", 0)
            result.told_user = list(outbox.sent)
            result.model_calls = counting.calls
            result.mailboxes = await anyio.to_thread.run_sync(read_mailboxes, server)
        finally:
            if previous is None:
                os.environ.pop(PASSWORD_ENV, None)
            else:
                os.environ[PASSWORD_ENV] = previous
            relay.stop()
            server.stop()
            if workdir is None:
                shutil.rmtree(work, ignore_errors=True)
    return result


def _send(relay: SmtpRelay, mail: DemoMail) -> None:
    relay.send(mail.raw, sender=mail.sender, recipients=[USER_ADDRESS])


async def _stored(rt: Runtime) -> int:
    assert rt.store is not None
    return sum((await rt.store.events.count()).values())


async def _arrived(rt: Runtime, before: int) -> None:
    """Wait until the channel has stored the mail just sent (delivered or filtered)."""
    with anyio.fail_after(ARRIVAL_TIMEOUT_S, reason="the mail did not arrive through IMAP IDLE"):
        # The store has no signal for "a channel stored an event"; a demo can afford polling.
        while await _stored(rt) <= before:  # noqa: ASYNC110
            await anyio.sleep(0.02)


class _CountingModel(Model):
    """The demo's model, counting the requests made to it (the filter saves one)."""

    def __init__(self, inner: Model) -> None:
        self.inner = inner
        self.name = inner.name
        self.calls = 0

    def stream(self, request: ModelRequest) -> AsyncGenerator[StreamPart, None]:
        self.calls += 1
        return self.inner.stream(request)


def read_mailboxes(
    server: DovecotServer, names: Sequence[str] = ("INBOX", "Drafts", "Archive")
) -> dict[str, list[StoredMail]]:
    """What each mailbox holds, read over IMAP (read-only: nothing is marked seen)."""
    import email
    import email.policy
    import imaplib

    found: dict[str, list[StoredMail]] = {}
    client = imaplib.IMAP4(server.host, server.port)
    try:
        client.login(server.user, server.password)
        for name in names:
            client.select(name, readonly=True)
            _, data = client.uid("SEARCH", "ALL")
            mails = []
            for uid in data[0].split():
                _, parts = client.uid("FETCH", uid, "(FLAGS BODY.PEEK[HEADER])")
                meta, header = parts[0] if isinstance(parts[0], tuple) else (b"", b"")
                flags = frozenset(
                    re.findall(rb"\\?\$?\w+", meta.split(b"FLAGS (", 1)[-1].split(b")")[0])
                )
                message = email.message_from_bytes(header, policy=email.policy.default)
                mails.append(
                    StoredMail(
                        subject=str(message.get("Subject", "")),
                        flags=frozenset(f.decode() for f in flags),
                        in_reply_to=str(message.get("In-Reply-To", "")),
                        message_id=str(message.get("Message-ID", "")),
                    )
                )
            found[name] = mails
    finally:
        client.logout()
    return found
