"""The email channel against a real Dovecot: faults first (a dropped connection, a recreated
mailbox, a refused login, a restart in the middle, a 30 MB attachment), then arrival by IDLE and
by polling, threads and sessions."""

from __future__ import annotations

import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
from email_harness import (
    PASSWORD_ENV,
    deliver,
    doveadm,
    email_channel,
    email_events,
    message,
    runtime_inbox,
    stop_server,
    wait_for_events,
    wait_for_state,
)

from wakeful.errors import StoreError
from wakeful.store.sqlite import Store

pytestmark = pytest.mark.anyio


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    async with await Store.open(tmp_path / "state.db", synchronous="normal") as opened:
        yield opened


@pytest.fixture(autouse=True)
def imap_password(dovecot, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv(PASSWORD_ENV, dovecot.password)


def subjects(events: list) -> list[str]:  # type: ignore[type-arg]
    return sorted(e.content["subject"] for e in events)


# --- faults ------------------------------------------------------------------------------------


async def test_a_dropped_connection_is_reconnected_and_nothing_is_lost(
    dovecot, store: Store, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    channel = email_channel(dovecot, store, tmp_path / "ws")
    async with anyio.create_task_group() as group:
        await group.start(channel.run)
        assert "IDLE" in await wait_for_state(channel, "running")
        await deliver(dovecot, message("before the drop"))
        await wait_for_events(store, 1)

        # A mail lands just as the server dies, before the channel could fetch it.
        await deliver(dovecot, message("as the server died"))
        await anyio.to_thread.run_sync(stop_server, dovecot)
        detail = await wait_for_state(channel, "degraded")
        assert "Reconnecting in" in detail
        # Another lands as it comes back, before the channel has reconnected.
        await anyio.to_thread.run_sync(dovecot.start)
        await deliver(dovecot, message("as the server came back"))

        await wait_for_state(channel, "running")
        await deliver(dovecot, message("after the restart"))
        events = await wait_for_events(store, 4)
        group.cancel_scope.cancel()
    assert subjects(events) == [
        "after the restart",
        "as the server came back",
        "as the server died",
        "before the drop",
    ]


async def test_a_connection_the_server_kicks_is_reconnected(
    dovecot, store: Store, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    channel = email_channel(dovecot, store, tmp_path / "ws")
    async with anyio.create_task_group() as group:
        await group.start(channel.run)
        await wait_for_state(channel, "running")
        for n in range(3):
            doveadm(dovecot, "kick", dovecot.user)
            await deliver(dovecot, message(f"after kick {n}"))
            await wait_for_events(store, n + 1)
        group.cancel_scope.cancel()
    assert subjects(await wait_for_events(store, 3)) == [f"after kick {n}" for n in range(3)]


async def test_a_recreated_mailbox_gives_no_duplicates(
    dovecot, store: Store, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    doveadm(dovecot, "mailbox", "create", "-u", dovecot.user, "Watched")
    first = [message(f"mail {n}") for n in range(3)]
    inbox = runtime_inbox(store)
    channel = email_channel(dovecot, store, tmp_path / "ws", inbox=inbox, mailbox="Watched")
    async with anyio.create_task_group() as group:
        await group.start(channel.run)
        await wait_for_state(channel, "running")
        for raw in first:
            await deliver(dovecot, raw, "Watched")
        await wait_for_events(store, 3)
        group.cancel_scope.cancel()
    before = doveadm(dovecot, "mailbox", "status", "-u", dovecot.user, "uidvalidity", "Watched")

    # The mailbox is deleted and made again (a restore): same mail, new UIDVALIDITY, new UIDs.
    doveadm(dovecot, "mailbox", "delete", "-u", dovecot.user, "Watched")
    doveadm(dovecot, "mailbox", "create", "-u", dovecot.user, "Watched")
    after = doveadm(dovecot, "mailbox", "status", "-u", dovecot.user, "uidvalidity", "Watched")
    assert before != after
    for raw in [*first, message("new after the restore")]:
        await deliver(dovecot, raw, "Watched")

    channel = email_channel(dovecot, store, tmp_path / "ws", inbox=inbox, mailbox="Watched")
    async with anyio.create_task_group() as group:
        await group.start(channel.run)
        events = await wait_for_events(store, 4)
        await wait_for_state(channel, "running")
        group.cancel_scope.cancel()
    assert subjects(events) == ["mail 0", "mail 1", "mail 2", "new after the restore"]
    assert inbox.counts.stored == 4
    assert inbox.counts.duplicate == 3


async def test_a_refused_login_backs_off_long_and_says_so(
    dovecot, store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv(PASSWORD_ENV, "wrong password")
    channel = email_channel(dovecot, store, tmp_path / "ws")
    async with anyio.create_task_group() as group:
        await group.start(channel.run)
        detail = await wait_for_state(channel, "degraded")
        await anyio.sleep(1.5)
        assert channel.health().detail == detail
        group.cancel_scope.cancel()
    assert "refused the login of 'secretary'" in detail
    assert "Retrying in 15 min" in detail and "locked" in detail
    assert dovecot.log().count("auth failed") == 1  # one try, not one every few seconds
    assert channel.health().state == "stopped"


async def test_a_restart_in_the_middle_processes_nothing_twice_and_skips_nothing(
    dovecot, store: Store, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    mails = [message(f"mail {n:02}") for n in range(60)]
    for raw in mails:
        await deliver(dovecot, raw)
    inbox = runtime_inbox(store)
    for round in range(3):
        channel = email_channel(dovecot, store, tmp_path / "ws", inbox=inbox, first_sync_limit=100)
        async with anyio.create_task_group() as group:
            await group.start(channel.run)
            if round < 2:
                await wait_for_events(store, 1 + 20 * round)
            else:
                await wait_for_events(store, 60)
            group.cancel_scope.cancel()
    events = [stored.event for stored in await email_events(store)]
    assert subjects(events) == [f"mail {n:02}" for n in range(60)]
    assert inbox.counts.stored == 60


@pytest.mark.slow
async def test_kill_9_between_receipt_and_processing_loses_and_repeats_nothing(
    dovecot, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    state, workspace = tmp_path / "state.db", tmp_path / "ws"
    script = Path(__file__).with_name("run_email_channel.py")
    command = [sys.executable, str(script), str(state), str(workspace)]
    command += [dovecot.host, str(dovecot.port), dovecot.user]
    expected: list[str] = []

    def stored_subjects() -> list[str]:
        try:
            with Store.read_only(state) as reader:
                rows = reader.recent_events(limit=10_000)
        except StoreError:  # not created yet, or its schema not yet written
            return []
        return [row.event.content["subject"] for row in rows if row.event.kind == "email.received"]  # type: ignore[index]

    async def deliver_some(count: int) -> None:
        for _ in range(count):
            expected.append(f"mail {len(expected):03}")
            await deliver(dovecot, message(expected[-1]))

    await deliver_some(40)
    for kill_after in (1, 45, 70):
        process = await anyio.open_process(command, stdout=None, stderr=None)
        try:
            await deliver_some(15)
            with anyio.fail_after(30):
                while len(stored_subjects()) < kill_after:  # noqa: ASYNC110 - another process
                    await anyio.sleep(0.01)
        finally:
            process.kill()  # kill -9: no cleanup, whatever it was doing
            await process.wait()

    process = await anyio.open_process(command, stdout=None, stderr=None)
    try:
        with anyio.fail_after(30):
            while len(stored_subjects()) < len(expected):  # noqa: ASYNC110 - another process
                await anyio.sleep(0.05)
        await anyio.sleep(1)  # time for a stray second copy to show up, were there one
    finally:
        process.kill()
        await process.wait()
    assert sorted(stored_subjects()) == expected


@pytest.mark.slow
async def test_a_30_mb_attachment_arrives_saved_with_a_small_event(
    dovecot, store: Store, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    from email.message import EmailMessage

    big = bytes(range(256)) * (30 * 1024 * 1024 // 256)
    mail = EmailMessage()
    mail["From"] = "alice@elsewhere.net"
    mail["Subject"] = "The dataset"
    mail["Message-ID"] = "<dataset@elsewhere.net>"
    mail.set_content("Here it is.")
    mail.add_attachment(big, maintype="application", subtype="zip", filename="../../data.zip")
    channel = email_channel(dovecot, store, tmp_path / "ws")
    async with anyio.create_task_group() as group:
        await group.start(channel.run)
        await wait_for_state(channel, "running")
        await deliver(dovecot, mail.as_bytes())
        [event] = await wait_for_events(store, 1, within=60)
        group.cancel_scope.cancel()
    [attachment] = event.content["attachments"]  # type: ignore[index]
    saved = Path(attachment["path"])
    assert saved.parent == tmp_path / "ws" / ".wakeful" / "attachments" / event.id
    assert saved.name == "data.zip"
    assert (await anyio.Path(saved).stat()).st_size == len(big)
    assert len(event.to_json().encode()) < 64 * 1024


async def test_a_mail_to_thousands_of_recipients_lists_a_few(
    dovecot, store: Store, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    crowd = ", ".join(f"person{n}@example.org" for n in range(40_000))
    raw = f"From: alice@elsewhere.net\r\nTo: {crowd}\r\nSubject: to all\r\n\r\nhi\r\n".encode()
    channel = email_channel(dovecot, store, tmp_path / "ws")
    async with anyio.create_task_group() as group:
        await group.start(channel.run)
        await wait_for_state(channel, "running")
        await deliver(dovecot, raw)
        [event] = await wait_for_events(store, 1, within=60)
        group.cancel_scope.cancel()
    content = event.content
    assert isinstance(content, dict)
    assert content["to"][:2] == ["person0@example.org", "person1@example.org"]
    assert len(content["to"]) == 51
    assert re.fullmatch(r"… and \d+ more", content["to"][-1])
    assert content["text"] == "hi"
    assert len(event.to_json().encode()) < 16 * 1024


async def test_a_mail_over_the_runtimes_event_cap_arrives_cut_and_holds_nothing_up(
    dovecot, store: Store, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    inbox = runtime_inbox(store, max_event_bytes=8_000)
    channel = email_channel(dovecot, store, tmp_path / "ws", inbox=inbox)
    async with anyio.create_task_group() as group:
        await group.start(channel.run)
        await wait_for_state(channel, "running")
        await deliver(dovecot, message("long", text="blah " * 3_000))
        await deliver(dovecot, message("short"))
        events = await wait_for_events(store, 2)
        group.cancel_scope.cancel()
    long, short = events
    assert long.content["subject"] == "long"  # type: ignore[index]
    assert long.content["text"].endswith("read it with the mail tools.]")  # type: ignore[index]
    assert short.content["text"] == "Hello."  # type: ignore[index]


# --- arrival -----------------------------------------------------------------------------------


async def test_new_mail_arrives_by_idle_as_an_event(dovecot, store: Store, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    channel = email_channel(dovecot, store, tmp_path / "ws", contacts=["alice@elsewhere.net"])
    async with anyio.create_task_group() as group:
        await group.start(channel.run)
        await wait_for_state(channel, "running")
        await deliver(dovecot, message("Lunch?", text="Shall we have lunch on Friday?"))
        [event] = await wait_for_events(store, 1)
        assert channel.health().last_event_at is not None
        group.cancel_scope.cancel()
    assert event.kind == "email.received"
    assert event.channel == "email:test"
    assert event.source.type == "contact" and event.source.id == "alice@elsewhere.net"
    content = event.content
    assert isinstance(content, dict)
    assert content["subject"] == "Lunch?"
    assert content["text"] == "Shall we have lunch on Friday?"
    assert content["relation"] == "contact"
    assert event.session.startswith("mail:thread-")


async def test_the_first_start_takes_unread_mail_already_there(
    dovecot, store: Store, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    for n in range(3):
        await deliver(dovecot, message(f"waiting {n}"))
    channel = email_channel(dovecot, store, tmp_path / "ws", first_sync_limit=2)
    async with anyio.create_task_group() as group:
        await group.start(channel.run)
        events = await wait_for_events(store, 2)
        await wait_for_state(channel, "running")
        group.cancel_scope.cancel()
    assert subjects(events) == ["waiting 1", "waiting 2"]


async def test_new_only_starts_from_now(dovecot, store: Store, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    await deliver(dovecot, message("old news"))
    channel = email_channel(dovecot, store, tmp_path / "ws", first_sync="new_only")
    async with anyio.create_task_group() as group:
        await group.start(channel.run)
        await wait_for_state(channel, "running")
        await deliver(dovecot, message("fresh"))
        events = await wait_for_events(store, 1)
        group.cancel_scope.cancel()
    assert subjects(events) == ["fresh"]


async def test_without_idle_the_mailbox_is_polled(dovecot, store: Store, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    channel = email_channel(dovecot, store, tmp_path / "ws", idle=False, poll_interval_seconds=0.2)
    async with anyio.create_task_group() as group:
        await group.start(channel.run)
        detail = await wait_for_state(channel, "running")
        await deliver(dovecot, message("polled"))
        events = await wait_for_events(store, 1)
        group.cancel_scope.cancel()
    assert "every 0.2 s" in detail
    assert subjects(events) == ["polled"]


async def test_a_server_without_idle_is_polled(dovecot, store: Store, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    stop_server(dovecot)
    config = dovecot.config.read_text()
    dovecot.config.write_text(
        config + "imap_capability = IMAP4rev1 SASL-IR LOGIN-REFERRALS ID ENABLE LITERAL+\n"
    )
    dovecot.start()
    channel = email_channel(dovecot, store, tmp_path / "ws", poll_interval_seconds=0.2)
    async with anyio.create_task_group() as group:
        await group.start(channel.run)
        detail = await wait_for_state(channel, "running")
        await deliver(dovecot, message("polled for want of IDLE"))
        events = await wait_for_events(store, 1)
        group.cancel_scope.cancel()
    assert "every 0.2 s (the server offers no IDLE)" in detail
    assert subjects(events) == ["polled for want of IDLE"]


async def test_a_reply_carries_its_thread_and_joins_its_session(
    dovecot, store: Store, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    channel = email_channel(dovecot, store, tmp_path / "ws")
    async with anyio.create_task_group() as group:
        await group.start(channel.run)
        await wait_for_state(channel, "running")
        await deliver(
            dovecot,
            message("Q3 plan", text="Here is the plan for Q3.", message_id="<root@elsewhere.net>"),
        )
        await wait_for_events(store, 1)
        await deliver(
            dovecot,
            message(
                "Re: Q3 plan",
                sender="Bob <bob@partner.org>",
                text="Looks good.",
                headers={
                    "In-Reply-To": "<root@elsewhere.net>",
                    "References": "<root@elsewhere.net>",
                },
            ),
        )
        await deliver(dovecot, message("Unrelated"))
        events = await wait_for_events(store, 3)
        group.cancel_scope.cancel()
    root, reply, other = events
    assert reply.content["thread"]["id"] == "<root@elsewhere.net>"  # type: ignore[index]
    [earlier] = reply.content["thread"]["previous"]  # type: ignore[index]
    assert earlier["from"] == "alice@elsewhere.net"
    assert earlier["subject"] == "Q3 plan"
    assert earlier["summary"] == "Here is the plan for Q3."
    assert reply.session == root.session != other.session


async def test_sessions_per_sender_and_one(dovecot, store: Store, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    channel = email_channel(dovecot, store, tmp_path / "ws", sessions="per_sender")
    async with anyio.create_task_group() as group:
        await group.start(channel.run)
        await wait_for_state(channel, "running")
        await deliver(dovecot, message("one", sender="bob@partner.org"))
        [event] = await wait_for_events(store, 1)
        group.cancel_scope.cancel()
    assert event.session == "mail:from-bob@partner.org"


async def test_people_the_user_wrote_to_are_contacts(  # type: ignore[no-untyped-def]
    dovecot, store: Store, tmp_path: Path
) -> None:
    """Past correspondence: the recipients of the user's sent mail are contacts; anyone else
    (even with a look-alike address) stays a stranger."""
    sent = message("Re: the offer", sender="secretary@example.com")
    sent = sent.replace(b"To: secretary@example.com", b"To: Bob <bob@partner.example>")
    sent = sent.replace(b"Subject:", b"Cc: carol@partner.example\nSubject:", 1)
    await deliver(dovecot, sent, mailbox="Sent")
    channel = email_channel(
        dovecot, store, tmp_path / "ws", user_addresses=["secretary@example.com"]
    )
    async with anyio.create_task_group() as group:
        await group.start(channel.run)
        await wait_for_state(channel, "running")
        await deliver(dovecot, message("Thanks", sender="Bob <bob@partner.example>"))
        await deliver(dovecot, message("Me too", sender="carol@partner.example"))
        await deliver(dovecot, message("Hi", sender="Mallory <b0b@partner.example>"))
        events = await wait_for_events(store, 3)
        group.cancel_scope.cancel()
    relation = {event.source.id: (event.source.type, event.content["relation"]) for event in events}  # type: ignore[index]
    assert relation == {
        "bob@partner.example": ("contact", "contact"),
        "carol@partner.example": ("contact", "contact"),
        "b0b@partner.example": ("stranger", "stranger"),
    }


async def test_without_a_sent_mailbox_nothing_is_learned_and_mail_still_arrives(  # type: ignore[no-untyped-def]
    dovecot, store: Store, tmp_path: Path
) -> None:
    channel = email_channel(dovecot, store, tmp_path / "ws", sent_mailbox="Outbox")
    async with anyio.create_task_group() as group:
        await group.start(channel.run)
        await wait_for_state(channel, "running")
        await deliver(dovecot, message("Hello", sender="dave@elsewhere.net"))
        [event] = await wait_for_events(store, 1)
        group.cancel_scope.cancel()
    assert event.source.type == "stranger"
