"""Hand-overs to the worker running a pulling channel, beyond single messages (on one real
PostgreSQL, as in test_channel_handoff.py): a digest is handed over and sent by the holder as one
digest, recorded on each of its messages (and what is left of one whose messages were deleted
meanwhile); an IM notice to a collaborator on a worker where XMPP is in standby is handed over
and sent by the holder; and the session's worker hears when the holder records a handed-over
message sent and then read, as it would for a local send (its console page, its delivery policy).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from test_channel_handoff import (
    CHANNEL,
    ROLE,
    SENT,
    PullChat,
    answer,
    deliveries,
    handoffs,
    sql,
    standby_under,
    until,
    worker,
)

from tool_services import call, refused
from wakeful.channels.registry import ChannelSpec
from wakeful.core.channel import ChannelContext
from wakeful.core.records import OutboundMessage, iso_utc
from wakeful.delivery.dispatcher import digest_message
from wakeful.models import FunctionModel
from wakeful.runtime import Runtime
from wakeful.runtime.worker import SessionCluster
from wakeful.services import new_message_id
from wakeful.toolkits.collaboration.notify import send_im_notification
from wakeful.toolkits.collaboration.settings import CollaborationSettings

pytestmark = pytest.mark.anyio

IM_CHANNEL = "xmpp:im"
IM_ROLE = f"channel:{IM_CHANNEL}"
CAROL = "carol@example.org"

# What the IM channels of this process sent to collaborators: (workspace, to, text).
IMS: list[tuple[str, str, str]] = []
# The reads they showed on their copies: (workspace, message id, copy id).
SHOWN: list[tuple[str, str, str]] = []


@pytest.fixture(autouse=True)
def nothing_sent() -> None:
    SENT.clear()
    IMS.clear()
    SHOWN.clear()


async def stored(rt: Runtime, session: str, text: str) -> OutboundMessage:
    """A low-urgency message to the user, stored but not yet sent anywhere (as one waiting for
    a digest is)."""
    message = OutboundMessage(
        id=new_message_id(),
        session=session,
        created_at=iso_utc(datetime.now(UTC)),
        urgency="low",
        kind="text",
        text=text,
    )
    await rt.outbox.messages.add(message)
    return message


def steal_role(url: str, role: str) -> None:
    """A worker that is not running ("ghost") takes `role` for an hour."""
    sql(
        url,
        "UPDATE role_leases SET owner = 'ghost', epoch = epoch + 1, "
        "expires_at = clock_timestamp() + interval '1 hour' WHERE role = %s",
        (role,),
    )


def give_back_role(url: str, role: str) -> None:
    sql(
        url,
        "UPDATE role_leases SET owner = NULL, expires_at = clock_timestamp() WHERE role = %s",
        (role,),
    )


# --- digests ---------------------------------------------------------------------------------


async def test_a_digest_for_a_channel_another_worker_runs_is_sent_once_by_the_holder(
    postgres_url: str, tmp_path: Path
) -> None:
    async with worker(postgres_url, tmp_path / "h", "holder", 1.5) as holder:
        await until(lambda: holder.channels[CHANNEL].state == "running", 20, "the holder's run")
        async with worker(postgres_url, tmp_path / "o", "owner", 1.5) as owner:
            await until(lambda: standby_under(owner, "holder"), 20, "the owner's standby")
            parts = [await stored(owner, "away", f"Update {n}") for n in (1, 2, 3)]
            digest = digest_message(parts)
            assert await owner.outbox.deliver_digest(parts, CHANNEL, digest)
            # Handed over, not failed: each part waits "queued" for the holder.
            assert deliveries(postgres_url, "away") in (
                [(CHANNEL, "queued", None)] * 3,
                [(CHANNEL, "sent", "h:1")] * 3,  # the holder was quick
            )
            await until(lambda: bool(SENT), 20, "the digest on the channel")
            await until(lambda: not handoffs(postgres_url), 10, "the hand-over done with")
            assert [("h", digest.text)] == SENT
            assert digest.text.startswith("3 updates while you were away:")
            assert deliveries(postgres_url, "away") == [(CHANNEL, "sent", "h:1")] * 3


async def test_a_handed_over_digest_whose_messages_were_deleted_sends_what_is_left(
    postgres_url: str, tmp_path: Path
) -> None:
    async with worker(postgres_url, tmp_path / "o", "owner", 1.5) as owner:
        await until(lambda: owner.channels[CHANNEL].state == "running", 20, "the channel's run")
        steal_role(postgres_url, ROLE)  # held by a worker that sends nothing: hand-overs wait
        await until(lambda: standby_under(owner, "ghost"), 20, "the standby")
        parts = [await stored(owner, "away", f"Update {n}") for n in (1, 2, 3)]
        assert await owner.outbox.deliver_digest(parts, CHANNEL, digest_message(parts))
        gone = [await stored(owner, "gone", f"Gone {n}") for n in (1, 2)]
        assert await owner.outbox.deliver_digest(gone, CHANNEL, digest_message(gone))
        assert len(handoffs(postgres_url)) == 2
        # Meanwhile the first part and both of the second digest are deleted; a hand-over
        # naming no message and one naming a digest of none are in the table too.
        for message in [parts[0], *gone]:
            sql(postgres_url, "DELETE FROM message_deliveries WHERE message_id = %s", (message.id,))
            sql(postgres_url, "DELETE FROM messages WHERE id = %s", (message.id,))
        for key in ("digest:", "digest:msg_0000000000000000,msg_1111111111111111"):
            sql(
                postgres_url,
                "INSERT INTO role_handoffs (role, message_id, handed_at) "
                "VALUES (%s, %s, clock_timestamp())",
                (ROLE, key),
            )
        give_back_role(postgres_url, ROLE)
        await until(lambda: owner.channels[CHANNEL].state == "running", 20, "the take")
        await until(lambda: not handoffs(postgres_url), 10, "the hand-overs done with")
        # What is left of the first digest goes as a digest of two; nothing else is sent.
        assert [("o", digest_message(parts[1:]).text)] == SENT
        assert deliveries(postgres_url, "away") == [(CHANNEL, "sent", "o:1")] * 2
        assert deliveries(postgres_url, "gone") == []


# --- the session's worker hears what the holder records ---------------------------------------


async def test_the_sessions_worker_hears_when_the_holder_sends_and_the_user_reads(
    postgres_url: str, tmp_path: Path
) -> None:
    async with worker(postgres_url, tmp_path / "h", "holder", 1.5) as holder:
        await until(lambda: holder.channels[CHANNEL].state == "running", 20, "the holder's run")
        async with worker(postgres_url, tmp_path / "o", "owner", 1.5) as owner:
            await until(lambda: standby_under(owner, "holder"), 20, "the owner's standby")
            heard: list[tuple[str, str, str, str | None]] = []
            reads: list[tuple[list[str], str]] = []

            async def on_deliveries(message: OutboundMessage) -> None:
                heard.extend(
                    (message.id, d.channel, d.state, d.channel_message_id)
                    for d in message.deliveries
                )

            async def on_read(ids: list[str], channel: str) -> None:
                reads.append((ids, channel))

            # What the web console and the delivery policy listen to.
            owner.outbox.delivery_listeners.append(on_deliveries)
            owner.outbox.read_listeners.append(on_read)
            message = await owner.outbox.send("trip", "Your flight moved.", channel=CHANNEL)
            await until(
                lambda: (message.id, CHANNEL, "sent", "h:1") in heard, 20, "the owner told sent"
            )
            # The user answers the copy on the holder's channel: read, on the owner too.
            assert await holder.outbox.copy_read(CHANNEL, "h:1") == [message.id]
            await until(lambda: reads == [([message.id], CHANNEL)], 20, "the owner told read")
            await until(
                lambda: (message.id, CHANNEL, "read", "h:1") in heard, 20, "the read delivery"
            )
            assert SENT == [("h", "Your flight moved.")]


async def test_a_read_on_a_handed_over_digests_copy_reads_every_part_on_both_workers(
    postgres_url: str, tmp_path: Path
) -> None:
    async with worker(postgres_url, tmp_path / "h", "holder", 1.5) as holder:
        await until(lambda: holder.channels[CHANNEL].state == "running", 20, "the holder's run")
        async with worker(postgres_url, tmp_path / "o", "owner", 1.5) as owner:
            await until(lambda: standby_under(owner, "holder"), 20, "the owner's standby")
            heard: list[str] = []

            async def on_read(ids: list[str], channel: str) -> None:
                heard.extend(ids)

            owner.outbox.read_listeners.append(on_read)
            # Parts of two sessions: a read through the copy reaches beyond either session.
            parts = [
                await stored(owner, session, f"Update {n}")
                for n, session in enumerate(("away", "trip", "away"))
            ]
            assert await owner.outbox.deliver_digest(parts, CHANNEL, digest_message(parts))
            await until(lambda: not handoffs(postgres_url), 20, "the digest sent by the holder")
            ids = sorted(m.id for m in parts)
            # The user answers the digest's copy on the holder's channel: every part read.
            assert sorted(await holder.outbox.copy_read(CHANNEL, "h:1", through=True)) == ids
            assert deliveries(postgres_url, "away") == [(CHANNEL, "read", "h:1")] * 2
            assert deliveries(postgres_url, "trip") == [(CHANNEL, "read", "h:1")]
            # The session's worker, which handed the digest over, hears each read.
            await until(lambda: sorted(heard) == ids, 20, "the owner told of every read")
            assert [("h", digest_message(parts).text)] == SENT


# --- IM notices to collaborators ---------------------------------------------------------------


class ImChat(PullChat):
    """A stand-in for the XMPP channel, run on the holder only: sends notices to collaborators,
    and shows on its copies that they were read elsewhere."""

    async def send(self, to: str, text: str) -> None:
        IMS.append((self._context.workspace.name, to, text))

    async def show_read(self, message: OutboundMessage, channel_message_id: str) -> bool:
        SHOWN.append((self._context.workspace.name, message.id, channel_message_id))
        return True


class ImSettings(BaseModel):
    pass


@dataclass(frozen=True)
class ImKind:
    kind: str = "xmpp"
    pulls: bool = True

    @property
    def settings_model(self) -> type[BaseModel]:
        return ImSettings

    def build(self, settings: Any, context: ChannelContext) -> ImChat:
        return ImChat(context)


@asynccontextmanager
async def im_worker(url: str, workdir: Path, name: str) -> AsyncIterator[Runtime]:
    """A worker of the cluster with the IM channel; Carol on its allow-list."""
    async with im_runtime(url, workdir, name) as rt:
        rt.services.settings[CollaborationSettings] = CollaborationSettings(im_addresses=(CAROL,))
        yield rt


def im_runtime(url: str, workdir: Path, name: str) -> Runtime:
    workdir.mkdir(parents=True, exist_ok=True)
    rt = Runtime(
        model=FunctionModel(answer),
        workdir=workdir,
        store_url=url,
        with_timers=False,
        channels=[ChannelSpec("xmpp", "im")],
        channel_kinds={"xmpp": ImKind()},
    )
    rt.cluster = SessionCluster(lease_seconds=1.5, name=name)
    return rt


def im_standby_under(rt: Runtime, holder: str) -> bool:
    health = rt.channels[IM_CHANNEL]
    return health.state == "standby" and f"run by worker {holder} " in health.detail


async def test_an_im_notice_on_a_worker_where_xmpp_stands_by_is_sent_by_the_holder(
    postgres_url: str, tmp_path: Path
) -> None:
    async with im_worker(postgres_url, tmp_path / "h", "holder") as holder:
        await until(lambda: holder.channels[IM_CHANNEL].state == "running", 20, "the run")
        async with im_worker(postgres_url, tmp_path / "o", "owner") as owner:
            await until(lambda: im_standby_under(owner, "holder"), 20, "the owner's standby")
            result = await call(
                owner.services, send_im_notification, to=CAROL, text="Approval [a3f9] waits."
            )
            assert result.content == (
                f"Handed over to the worker running {IM_CHANNEL} (holder), which sends it to "
                f"{CAROL} over IM."
            )
            # The same text twice is two notices.
            await call(
                owner.services, send_im_notification, to=CAROL, text="Approval [a3f9] waits."
            )
            await until(lambda: len(IMS) == 2, 20, "the notices over IM")
            await until(lambda: not handoffs(postgres_url), 10, "the hand-overs done with")
            assert IMS == [("h", CAROL, "Approval [a3f9] waits.")] * 2
            # Too long to hand over: refused with the limit, nothing handed over.
            got = await refused(owner.services, send_im_notification, to=CAROL, text="é" * 1500)
            assert got.startswith(f"The message to {CAROL} was not sent: ")
            assert "too long to hand over" in got
            assert handoffs(postgres_url) == []
            # On the holder it is sent there, as before.
            sent = await call(holder.services, send_im_notification, to=CAROL, text="Hi.")
            assert sent.content == f"Sent to {CAROL} over IM."
            assert IMS[-1] == ("h", CAROL, "Hi.")


async def test_an_im_notice_handed_over_while_the_holder_is_away_is_sent_by_the_next(
    postgres_url: str, tmp_path: Path
) -> None:
    async with im_worker(postgres_url, tmp_path / "o", "owner") as owner:
        await until(lambda: owner.channels[IM_CHANNEL].state == "running", 20, "the run")
        steal_role(postgres_url, IM_ROLE)  # held by a worker that sends nothing
        await until(lambda: im_standby_under(owner, "ghost"), 20, "the standby")
        result = await call(owner.services, send_im_notification, to=CAROL, text="Waits.")
        assert result.content == (
            f"Handed over to the worker running {IM_CHANNEL} (ghost), which sends it to "
            f"{CAROL} over IM."
        )
        assert [role for role, _ in handoffs(postgres_url)] == [IM_ROLE]
        # Hand-overs that are no notice: dropped, logged; the others still sent.
        for name in ("im:{broken", 'im:["a list"]', 'im:{"to": "x@example.org"}'):
            sql(
                postgres_url,
                "INSERT INTO role_handoffs (role, message_id, handed_at) "
                "VALUES (%s, %s, clock_timestamp())",
                (IM_ROLE, name),
            )
        give_back_role(postgres_url, IM_ROLE)
        await until(lambda: bool(IMS), 20, "the notice by the next holder")
        await until(lambda: not handoffs(postgres_url), 10, "the hand-overs done with")
        assert IMS == [("o", CAROL, "Waits.")]


async def test_a_message_read_in_the_owners_console_is_shown_read_on_the_holders_copy(
    postgres_url: str, tmp_path: Path
) -> None:
    async with im_worker(postgres_url, tmp_path / "h", "holder") as holder:
        await until(lambda: holder.channels[IM_CHANNEL].state == "running", 20, "the run")
        async with im_worker(postgres_url, tmp_path / "o", "owner") as owner:
            await until(lambda: im_standby_under(owner, "holder"), 20, "the owner's standby")
            heard: list[tuple[str, str, str | None]] = []

            async def on_deliveries(message: OutboundMessage) -> None:
                heard.extend((d.channel, d.state, d.channel_message_id) for d in message.deliveries)

            owner.outbox.delivery_listeners.append(on_deliveries)
            message = await owner.outbox.send("trip", "Gate changed.", channel=IM_CHANNEL)
            await until(lambda: (IM_CHANNEL, "sent", "h:1") in heard, 20, "the copy sent")
            # The user reads it in the console page on the owner: the holder shows it read on
            # its copy, and the owner's page hears that.
            assert await owner.outbox.mark_read([message.id]) == [message.id]
            await until(lambda: [("h", message.id, "h:1")] == SHOWN, 20, "the read shown")
            await until(lambda: (IM_CHANNEL, "read", "h:1") in heard, 20, "the copy read")
            await until(lambda: not handoffs(postgres_url), 10, "the hand-overs done with")
            assert deliveries(postgres_url, "trip") == [(IM_CHANNEL, "read", "h:1")]
