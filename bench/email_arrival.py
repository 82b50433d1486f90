"""Email arrival: from a mail landing in the mailbox to its event stored for its session, with
IMAP IDLE, side by side with polling every 30 seconds (the peers' default).

A real Dovecot runs on loopback in a temporary directory; the mails are delivered the way a
delivery agent does (`doveadm save`), one every `--spacing` seconds, without waiting for the
channel, at moments unrelated to its polls. Latency is from `doveadm save` returning (the mail
is in the mailbox) to the Inbox's store write for its event returning. Each mode has its own
mailbox, store and channel; the same mails go to both. At the end every mail must be one event,
once (a row that finds otherwise fails the benchmark).

Dovecot announces new mail to an IDLE client after a built-in delay of about half a second
(it gathers changes), which sets the floor of the IDLE column.

    python bench/email_arrival.py [--mails 200] [--poll 30] [--quick]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from email.message import EmailMessage
from pathlib import Path

import anyio
import anyio.to_thread

from report import Table, header, percentile, verdict
from wakeful.channels.email import KIND, EmailChannelSettings
from wakeful.core.channel import ChannelContext, Delivery
from wakeful.demo.mail_servers import DovecotServer, dovecot_missing, start_dovecot
from wakeful.events import Event, storable_event
from wakeful.store.sqlite import Store

TARGET_P99_IDLE_S = 1.0
PASSWORD_ENV = "WAKEFUL_BENCH_IMAP_PASSWORD"


class TimedInbox:
    """The Inbox contract over a SQLite store (a redelivered id is a duplicate), noting when
    each mail's event was stored, by subject."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.stored_at: dict[str, float] = {}
        self.duplicates = 0

    async def deliver(self, event: Event, *, filtered: str | None = None) -> Delivery:
        return (await self.deliver_many([(event, filtered)]))[0]

    async def deliver_many(self, events: Sequence[tuple[Event, str | None]]) -> list[Delivery]:
        rows = [(storable_event(event), "pending") for event, _ in events]
        added = await self.store.events.add_new_many(rows)  # type: ignore[arg-type]
        now = time.perf_counter()
        outcomes: list[Delivery] = []
        for new, (event, _) in zip(added, events, strict=True):
            if new:
                assert isinstance(event.content, dict)
                self.stored_at[event.content["subject"]] = now
                outcomes.append("stored")
            else:
                self.duplicates += 1
                outcomes.append("duplicate")
        return outcomes


@dataclass
class Row:
    mode: str
    latencies: list[float]
    events: int
    mails: int
    duplicates: int


def mail(subject: str) -> bytes:
    message = EmailMessage()
    message["From"] = "Alice <alice@example.net>"
    message["To"] = "secretary@example.com"
    message["Subject"] = subject
    message["Message-ID"] = f"<{subject.replace(' ', '.')}@example.net>"
    message.set_content(f"This is {subject}.\n" * 5)
    return message.as_bytes()


async def measure(
    server: DovecotServer, root: Path, *, mode: str, mails: int, spacing: float, poll: float
) -> Row:
    mailbox = "Polled" if mode == "poll" else "INBOX"
    if mailbox != "INBOX":
        server.doveadm("mailbox", "create", "-u", server.user, mailbox)
    settings = EmailChannelSettings(
        host=server.host,
        port=server.port,
        tls="plain",
        username=server.user,
        password_env=PASSWORD_ENV,
        mailbox=mailbox,
        idle=mode == "idle",
        poll_interval_seconds=poll,
        first_sync="new_only",
    )
    async with await Store.open(root / f"{mode}.db", synchronous="normal") as store:
        inbox = TimedInbox(store)
        context = ChannelContext(
            name=f"email:{mode}", inbox=inbox, cursors=store.channel_cursors, workspace=root
        )
        channel = KIND.build(settings, context)
        delivered_at: dict[str, float] = {}
        async with anyio.create_task_group() as group:
            await group.start(channel.run)
            with anyio.fail_after(30):
                while channel.health().state != "running":  # noqa: ASYNC110 - as doctor reads it
                    await anyio.sleep(0.01)
            for n in range(mails):
                subject = f"{mode} mail {n:04}"
                await anyio.to_thread.run_sync(server.deliver, mail(subject), mailbox)
                delivered_at[subject] = time.perf_counter()
                await anyio.sleep(spacing)
            with anyio.move_on_after(poll + 30):
                while len(inbox.stored_at) < mails:  # noqa: ASYNC110 - waiting for the channel
                    await anyio.sleep(0.01)
            group.cancel_scope.cancel()
        counts = await store.events.count()
    latencies = [
        inbox.stored_at[subject] - sent
        for subject, sent in delivered_at.items()
        if subject in inbox.stored_at
    ]
    return Row(mode, latencies, sum(counts.values()), mails, inbox.duplicates)


async def run(mails: int, spacing: float, poll: float) -> list[Row]:
    with tempfile.TemporaryDirectory(prefix="wakeful-email-bench-") as tmp:
        root = Path(tmp)
        server = start_dovecot(root / "dovecot")
        os.environ[PASSWORD_ENV] = server.password
        try:
            return [
                await measure(server, root, mode=mode, mails=mails, spacing=spacing, poll=poll)
                for mode in ("idle", "poll")
            ]
        finally:
            process = server.process
            server.stop()
            if process is not None and process.stderr is not None:
                process.stderr.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mails", type=int, default=200, help="mails per mode (default 200)")
    parser.add_argument("--poll", type=float, default=30.0, help="poll interval, s (default 30)")
    parser.add_argument("--spacing", type=float, default=0.5, help="s between mails (0.5)")
    parser.add_argument("--quick", action="store_true", help="30 mails, polling every 3 s")
    args = parser.parse_args()
    if args.quick:
        args.mails, args.poll, args.spacing = 30, 3.0, 0.2
    missing = dovecot_missing()
    if missing:
        sys.exit(f"This benchmark needs a real Dovecot: {missing}")
    header(
        f"Email arrival → event stored: {args.mails} mails per mode, one every {args.spacing} s, "
        f"IDLE vs polling every {args.poll:g} s (Dovecot on loopback)"
    )
    rows = anyio.run(run, args.mails, args.spacing, args.poll)
    table = Table(["mode", "mails", "events", "dups", "p50 s", "p99 s", "max s", "target"])
    failed = False
    for row in rows:
        complete = row.events == row.mails == len(row.latencies) and row.duplicates == 0
        failed |= not complete
        p99 = percentile(row.latencies, 99) if row.latencies else float("nan")
        target = (
            f"p99 ≤ {TARGET_P99_IDLE_S:g} s {verdict(p99, TARGET_P99_IDLE_S)}"
            if row.mode == "idle"
            else "(reference)"
        )
        table.add(
            "IMAP IDLE" if row.mode == "idle" else f"polling every {args.poll:g} s",
            row.mails,
            row.events,
            row.duplicates,
            percentile(row.latencies, 50) if row.latencies else float("nan"),
            p99,
            max(row.latencies, default=float("nan")),
            target if complete else "FAIL: mails lost or repeated",
        )
    table.print()
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
