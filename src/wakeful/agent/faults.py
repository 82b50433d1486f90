"""What a session needs to contain its own faults: naming them, timing out a silent stream, and
the operator's alert (see the fault boundary in :mod:`.session`)."""

from __future__ import annotations

from collections.abc import AsyncGenerator

import anyio

from ..events import SYSTEM_ALERT, Event, Source
from ..models.base import StreamPart
from ..storable_text import replace_lone_surrogates


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
