"""Alerts for whoever runs the runtime, not for an agent: a tool that keeps failing, a store whose
disk is full. Each is stored (for `wakeful events tail`) as already consumed, so no session is
woken, and sent on the outbox's "operator" channel.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..events import SYSTEM_ALERT, Event, Source

if TYPE_CHECKING:
    from ..core.runtime_store import RuntimeStore
    from ..services import Outbox

__all__ = ["alert_operator", "disk_space_alert"]


async def alert_operator(store: RuntimeStore | None, outbox: Outbox, event: Event) -> None:
    """Store the alert (held in memory while the disk is full: the alert may be about that
    very thing) and send it on the "operator" channel."""
    if store is not None:
        await store.keep_event(event, status="consumed")
    await outbox.send(event.session, event.text, channel="operator", urgency=event.urgency)


def disk_space_alert(store: RuntimeStore, short: bool) -> Event:
    """The alert when the store's disk fills (`short`), or when it has room again. Only a store
    with a file here watches its disk (on PostgreSQL the server's disk is the server's concern),
    so the other wording is for completeness."""
    path = store.path
    where = str(path) if path is not None else "on the database server"
    folder = str(path.parent) if path is not None else "the database server"
    if short:
        text = (
            f"The disk of the store {where} is full (or below the space kept in "
            "reserve). New events are refused: submit raises StoreFull. Running sessions go "
            "on; what they cannot write is kept in memory and written, in order, as soon as "
            f"there is room. Free space on the disk of {folder}; wakeful retries "
            "by itself."
        )
    else:
        text = (
            f"The disk of the store {where} has room again: what was kept in memory is "
            "stored, and new events are accepted."
        )
    return Event(
        kind=SYSTEM_ALERT,
        source=Source(type="system", id="store"),
        content=text,
        context={"disk_full": short},
        urgency="high" if short else "normal",
    )
