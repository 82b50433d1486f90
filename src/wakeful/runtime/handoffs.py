"""Hand-overs: what a worker of a cluster asks the worker running a pulling channel to send.

A message for the user on a channel in standby is handed over to the worker running it (a
session runs on the worker owning it, often not the one running its user's channel): while
another worker holds the role (at the last look, every third of the lease time),
:meth:`~wakeful.runtime.channels.RuntimeChannels.reachable` counts the channel, and
:meth:`~wakeful.runtime.channels.RuntimeChannels.send_to_user` records the stored message for
the holder (:meth:`~wakeful.core.channel.RoleLeases.hand_over`) and raises
:class:`~wakeful.core.channel.HandedOver`, which the outbox takes as "left queued": the delivery
stays "queued", neither failed nor tried elsewhere. The holder looks for hand-overs every
HANDOFF_POLL_SECONDS from when it takes the role (so the first look finds those made while
nobody held it, up to a day old, oldest first), sends each message whose delivery on the
channel is still "queued" through the outbox (which records "sent" with the copy's id, or
"failed"), and then forgets the hand-over. One task per channel sends them one by one
(:func:`send_handed_over`), so a holder sends a message once; a holder killed between its send
and its record leaves the hand-over, and the next holder sends it again (at least once across
holders). The holder sends from its own process, where the channel's connection is: an email
copy is recorded where the polling worker recognises it, a Telegram copy is traced to the
user's reads by the polling bot.

A digest is handed over the same way, as the ids of the messages it stands for
(:func:`digest_handoffs`): the holder sends one digest of those still "queued" there (one alone
goes as itself; deleted ones are left out, and with none left nothing is sent) and records each
with the digest's copy id, so a read on that copy reads them all. The outbox of the session's
worker follows what it handed over, so its listeners (an open console page, the delivery
policy) hear what the holder records (:mod:`wakeful.delivery.handed_over`); a message read
there (the console page) is shown read on the holder's copy by a hand-over too
(:func:`read_handoff`), which the holder records "read". An IM notice to a collaborator (the
tool send_im_notification) on a worker where the XMPP channel stands by is handed over too, with
its address and text in the hand-over's name (:func:`notice_handoff`, so at most
HANDOFF_NAME_MAX_BYTES): the holder sends it once, and logs one it could not send.
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final, Protocol

import anyio

from ..channels.registry import ChannelSpec
from ..core.channel import Channel, ChannelHealth, RoleLeases, UserReach
from ..core.records import OutboundMessage
from ..delivery.dispatcher import digest_message
from ..errors import StoreError, UserError

if TYPE_CHECKING:
    from ..services import Services

__all__ = [
    "HANDOFF_POLL_SECONDS",
    "HoldingChannel",
    "digest_handoffs",
    "notice_handoff",
    "read_handoff",
    "send_handed_over",
]

log = logging.getLogger(__name__)

# How often the holder of a pulling channel's role looks for messages handed over to it by
# other workers, how many it takes at a time, and how old a hand-over it still sends.
HANDOFF_POLL_SECONDS: Final = 0.5
HANDOFF_BATCH: Final = 100
HANDOFF_MAX_AGE_SECONDS: Final = 24 * 3600.0
# What a hand-over names (the `message_id` of a role_handoffs row): a stored message's id; a
# digest, "digest:" and the ids of the stored messages it stands for, comma-separated; a read
# to show on a message's copy, "read:" and the message's id; or an IM notice to a collaborator,
# "im:" and a JSON object {"id", "to", "text"} (a notice is not stored anywhere else). The name
# is part of the table's key, whose index entries PostgreSQL keeps under about 2.7 kB: a digest
# is handed over in parts of at most HANDOFF_DIGEST_PARTS messages, and a notice whose name
# would be longer than HANDOFF_NAME_MAX_BYTES is refused.
DIGEST_HANDOFF: Final = "digest:"
READ_HANDOFF: Final = "read:"
NOTICE_HANDOFF: Final = "im:"
HANDOFF_DIGEST_PARTS: Final = 60
HANDOFF_NAME_MAX_BYTES: Final = 2000


class HoldingChannel(Protocol):
    """A pulling channel as the worker holding its role runs it (the runtime's record of it)."""

    spec: ChannelSpec
    channel: Channel | None

    def health(self) -> ChannelHealth: ...


# --- what the standing-by worker hands over -------------------------------------------------


def digest_handoffs(parts: Sequence[str]) -> list[str]:
    """The hand-overs of a digest standing for the stored messages `parts` (several for more
    than HANDOFF_DIGEST_PARTS messages)."""
    ids = list(parts)
    return [
        DIGEST_HANDOFF + ",".join(ids[start : start + HANDOFF_DIGEST_PARTS])
        for start in range(0, len(ids), HANDOFF_DIGEST_PARTS)
    ]


def read_handoff(message_id: str) -> str:
    """The hand-over asking the holder to show on its copy that `message_id` was read."""
    return READ_HANDOFF + message_id


def notice_handoff(to: str, text: str, channel: str) -> str:
    """The hand-over of an IM notice for `to` over `channel`; UserError when it would be too
    long to hand over."""
    notice = {"id": secrets.token_hex(8), "to": to, "text": text}
    name = NOTICE_HANDOFF + json.dumps(notice, ensure_ascii=False)
    size = len(name.encode())
    if size > HANDOFF_NAME_MAX_BYTES:
        raise UserError(
            f"The notice is too long to hand over to the worker running {channel} ({size} "
            f"bytes with the address; at most {HANDOFF_NAME_MAX_BYTES} on a worker where the "
            "channel stands by): shorten the text and send it again."
        )
    return name


# --- what the holder sends -------------------------------------------------------------------


async def send_handed_over(
    running: HoldingChannel, roles: RoleLeases, role: str, services: Services
) -> None:
    """While this worker holds the channel's role: every HANDOFF_POLL_SECONDS, send the
    messages other workers handed over to it, oldest first (the first look, at the take,
    finds those handed over while nobody ran the channel). This one task sends them all, one
    after the other, each only while its delivery here is still "queued", so no message is
    sent twice by this worker."""
    while True:
        if running.health().state == "running":
            try:
                handed = await roles.handed_over(
                    role, within_s=HANDOFF_MAX_AGE_SECONDS, limit=HANDOFF_BATCH
                )
                for name in handed:
                    if name.startswith(NOTICE_HANDOFF):
                        await _send_handed_notice(running, name)
                        await roles.done_with(role, name)
                    elif name.startswith(DIGEST_HANDOFF):
                        await _send_handed_digest(running, roles, role, services, name)
                    elif name.startswith(READ_HANDOFF):
                        await _show_handed_read(running, services, name)
                        await roles.done_with(role, name)
                    else:
                        await _send_one_handed_over(running, roles, role, services, name)
            except (StoreError, UserError) as exc:  # the store's trouble: tried again
                log.warning(
                    "channel %s could not send the messages handed over to it: %s; trying "
                    "again in %g s",
                    running.spec.full_name,
                    exc,
                    HANDOFF_POLL_SECONDS,
                )
        await anyio.sleep(HANDOFF_POLL_SECONDS)


async def _send_one_handed_over(
    running: HoldingChannel, roles: RoleLeases, role: str, services: Services, message_id: str
) -> None:
    """Send one handed-over message through the outbox (which records it "sent" with the
    copy's id, or "failed"), unless its delivery here is no longer "queued"; forget the
    hand-over once the delivery left "queued" (it stays for the next holder otherwise)."""
    name, outbox = running.spec.full_name, services.outbox
    message = await outbox.messages.get(message_id)
    if message is not None and queued_on(message, name):
        await outbox.deliver(message, name)
        message = await outbox.messages.get(message_id)
    if message is None or not queued_on(message, name):
        await roles.done_with(role, message_id)


async def _send_handed_digest(
    running: HoldingChannel, roles: RoleLeases, role: str, services: Services, name: str
) -> None:
    """Send a handed-over digest: of its messages, those still stored and "queued" here
    (one alone goes as itself), through the outbox, which records each; forget the
    hand-over once none of them is "queued" here any more (none left: nothing is sent)."""
    channel, outbox = running.spec.full_name, services.outbox
    ids = [part for part in name.removeprefix(DIGEST_HANDOFF).split(",") if part]
    found = [await outbox.messages.get(part) for part in ids]
    queued = [m for m in found if m is not None and queued_on(m, channel)]
    if len(queued) == 1:
        await outbox.deliver(queued[0], channel)
    elif queued:
        await outbox.deliver_digest(queued, channel, digest_message(queued))
    for message in queued:
        now = await outbox.messages.get(message.id)
        if now is not None and queued_on(now, channel):
            return  # handed over again (this worker lost the role): the row stays
    await roles.done_with(role, name)


async def _show_handed_read(running: HoldingChannel, services: Services, name: str) -> None:
    """Show on this channel's copy of a message that it was read elsewhere (a read handed
    over by the worker where it was read), and record the copy "read" when the channel
    could; nothing for a message gone, or without a copy sent here."""
    channel, outbox = running.spec.full_name, services.outbox
    message = await outbox.messages.get(name.removeprefix(READ_HANDOFF))
    copy = None
    if message is not None:
        copy = next(
            (
                d.channel_message_id
                for d in message.deliveries
                if d.channel == channel and d.state in ("sent", "delivered")
            ),
            None,
        )
    reach = running.channel
    if message is None or copy is None or not isinstance(reach, UserReach):
        return
    try:
        shown = await reach.show_read(message, copy)
    except Exception as exc:  # a channel's failure is reported, never propagated
        log.error("channel %s could not show %s read: %s", channel, message.id, _described(exc))
        return
    if shown:
        await outbox.record_delivery(message.id, channel, "read")


async def _send_handed_notice(running: HoldingChannel, name: str) -> None:
    """Send a handed-over IM notice over the channel (once: a notice that fails, or that
    is not one, is logged and dropped; nothing records it)."""
    channel = running.spec.full_name
    try:
        notice = json.loads(name.removeprefix(NOTICE_HANDOFF))
        to, text = str(notice["to"]), str(notice["text"])
    except (ValueError, TypeError, KeyError) as exc:
        log.error("channel %s dropped a hand-over that is no IM notice: %s", channel, exc)
        return
    send = getattr(running.channel, "send", None)
    if send is None:
        log.error("channel %s cannot send IM notices; the one to %s was dropped", channel, to)
        return
    try:
        await send(to, text)
    except Exception as exc:  # a channel's failure is reported, never propagated
        log.error(
            "channel %s could not send the IM notice handed over to it for %s: %s",
            channel,
            to,
            _described(exc),
        )


def queued_on(message: OutboundMessage, channel: str) -> bool:
    """Whether `message` waits "queued" on `channel` (handed over, not yet sent there)."""
    return any(d.channel == channel and d.state == "queued" for d in message.deliveries)


def _described(exc: BaseException) -> str:
    """One line for a channel's failure, looking through a task group's wrapping."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
