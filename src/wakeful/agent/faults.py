"""What a session needs to contain its own faults: naming them, timing out a silent stream, and
the operator's alert and its reporter (see the fault boundary in :mod:`.session`)."""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Awaitable, Callable

import anyio

from ..events import SYSTEM_ALERT, Event, Source
from ..models.base import StreamPart
from ..services import Outbox
from ..storable_text import replace_lone_surrogates

log = logging.getLogger(__name__)


class StreamIdle(Exception):
    """A model stream sent nothing for longer than `model_stream_idle_seconds`."""


def describe_exception(exc: BaseException, limit: int = 300) -> str:
    """`Type: message`, short enough for an alert and with text the store can encode."""
    text = replace_lone_surrogates(f"{type(exc).__name__}: {exc}")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def single_exception(exc: Exception) -> Exception:
    """The one exception inside task-group wrappers (anyio groups even a single failure)."""
    while isinstance(exc, ExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


async def until_idle(
    parts: AsyncGenerator[StreamPart, None], limit: float | None
) -> AsyncGenerator[StreamPart, None]:
    """The parts of a stream, failing with `StreamIdle` when none comes for `limit` seconds
    (None: wait forever); a hung connection would otherwise block its session."""
    while True:
        with anyio.move_on_after(limit if limit is not None else float("inf")) as idle:
            try:
                part = await anext(parts)
            except StopAsyncIteration:
                return
        if idle.cancelled_caught:
            raise StreamIdle(
                f"no part of the model's stream arrived for {limit:g} s "
                "(agent.model_stream_idle_seconds)"
            )
        yield part


def fault_alert(session: str, text: str, exc: BaseException | None, *, faults: int) -> Event:
    """The `system.alert` for the operator about a fault (`exc`) or a repair (None)."""
    return Event(
        kind=SYSTEM_ALERT,
        source=Source(type="system", id="runtime"),
        content=replace_lone_surrogates(text),
        context={
            "fault": type(exc).__name__ if exc is not None else "repaired",
            "session_faults": faults,
        },
        urgency="high",
        session=session,
    )


class FaultReporter:
    """Where one session's faults and repairs are reported: a `system.alert` for the operator
    (through `alert`, else the outbox's "operator" channel). A failure to report is logged,
    never raised, so reporting cannot fault the session."""

    def __init__(
        self, session: str, outbox: Outbox, alert: Callable[[Event], Awaitable[None]] | None
    ) -> None:
        self.session = session
        self.outbox = outbox
        self.alert = alert
        self.faults = 0  # faults contained so far, for whoever watches the session

    async def fault(self, text: str, exc: BaseException | None) -> None:
        """Alert the operator about a fault (`exc`), or a repair (None)."""
        event = fault_alert(self.session, text, exc, faults=self.faults)
        try:
            if self.alert is not None:
                await self.alert(event)
            else:
                await self.outbox.send(
                    self.session, event.text, channel="operator", urgency=event.urgency
                )
        except Exception as alert_exc:
            log.error("session %s: could not alert the operator", self.session, exc_info=alert_exc)

    async def repair(self, what: str) -> None:
        """Something the session could not use as it came was repaired; the session goes on."""
        text = f"Session {self.session!r}: {what}."
        log.warning("%s", text)
        await self.fault(text, None)

    async def tell_user(self, text: str) -> None:
        """A high-urgency message to the user about the fault; a failure is only logged."""
        try:
            await self.outbox.send(self.session, text, urgency="high")
        except Exception as send_exc:
            log.error("session %s: could not tell the user", self.session, exc_info=send_exc)
