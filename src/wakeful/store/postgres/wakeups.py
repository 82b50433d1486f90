"""Wake-ups across workers: storing a pending event notifies its session, and every worker
listens, so the worker that owns the session (or, for an unowned one, a worker that claims it)
is woken within milliseconds instead of at its next poll.

Each notification names the session and the worker that held its lease when the event was stored
(none when nobody held it, or its lease had expired): the owner hands the event to the session,
and the other workers ignore it instead of each starting a claim pass for a session that is
taken. Only a session without a live owner sends the workers claiming. Should the named owner be
dead, its lease expires and the workers' periodic claim pass takes the session, as it would
without the event.

The notification is sent with ``pg_notify`` in the transaction that stores the event, so it is
delivered only if that transaction commits, and only after it has (a listener woken for a session
always finds its event stored). PostgreSQL merges identical notifications of one transaction, so
a batch of events for one session wakes it once.

A notification sent while a listener is disconnected is not delivered to it later. The listener
therefore reports every reconnection as a *miss* (`on_missed`), after it is listening again: a
worker answers with one rescan of the store (claiming unowned sessions with pending events and
looking at its own), and anything stored after that rescan began is notified again. Nothing is
lost between; at worst a session is woken twice, which costs one empty look.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from typing import Final

import anyio
import psycopg
from anyio.abc import TaskStatus
from psycopg.rows import TupleRow

from ...errors import StoreError
from .access import database_name

__all__ = [
    "LISTENER_APPLICATION_NAME",
    "WAKEUP_CHANNEL",
    "OnWake",
    "WakeupListener",
    "notify_sessions",
]

log = logging.getLogger(__name__)

# The LISTEN/NOTIFY channel of the store's wake-ups; its payload is the JSON array [session,
# owner], owner null when no worker held the session's lease.
WAKEUP_CHANNEL: Final = "wakeful_events"
# The listener's connection shows under this name in pg_stat_activity.
LISTENER_APPLICATION_NAME: Final = "wakeful-wakeups"
# How long the listener waits on a quiet connection before it checks that the connection lives.
PROBE_EVERY_S: Final = 5.0
PROBE_TIMEOUT_S: Final = 5.0
# The waits between reconnection attempts: doubled from the first up to the last.
RECONNECT_DELAY_S: Final = (0.05, 5.0)


async def notify_sessions(conn: psycopg.AsyncConnection[TupleRow], sessions: Iterable[str]) -> None:
    """In the caller's transaction: wake the listeners of each of `sessions` once it commits,
    naming the worker whose lease on it is live now, if any."""
    unique = sorted(set(sessions))
    if unique:
        await conn.execute(
            "SELECT pg_notify(%s, json_build_array(s, l.owner)::text) "
            "FROM unnest(%s::text[]) AS s LEFT JOIN session_leases l ON l.session = s "
            "AND l.owner IS NOT NULL AND l.expires_at > clock_timestamp()",
            (WAKEUP_CHANNEL, unique),
        )


# Called with a woken session and the worker that held its lease when its event was stored
# (None: nobody did).
OnWake = Callable[[str, str | None], None]


def _parsed(payload: str) -> tuple[str, str | None] | None:
    try:
        session, owner = json.loads(payload)
    except ValueError:
        return None
    if not isinstance(session, str) or not isinstance(owner, str | None):
        return None
    return session, owner


class WakeupListener:
    """Listens, on a connection of its own, for the sessions that got pending events.

    :meth:`run` (in the worker's task group) calls `on_wake(session, owner)` for each notification
    (owner: the worker holding the session's lease when the event was stored, or None) and
    `on_missed()` after each reconnection, once listening again (see the module docs). Both are
    called on the event loop and must return quickly (hand the session on to a stream, set an
    event).
    """

    def __init__(
        self,
        url: str,
        on_wake: OnWake,
        on_missed: Callable[[], None],
        *,
        probe_every_s: float = PROBE_EVERY_S,
    ) -> None:
        self._url = url
        self._where = database_name(url)
        self._on_wake = on_wake
        self._on_missed = on_missed
        self._probe_every_s = probe_every_s
        self.reconnects = 0

    async def _connect(self) -> psycopg.AsyncConnection[TupleRow]:
        return await psycopg.AsyncConnection.connect(
            self._url, autocommit=True, application_name=LISTENER_APPLICATION_NAME
        )

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Listen until cancelled; started once the first LISTEN is in place. A database that
        cannot be reached at the start is a StoreError; later, the listener reconnects."""
        try:
            conn = await self._connect()
        except psycopg.OperationalError as exc:
            raise StoreError(
                f"Could not connect to {self._where} to listen for wake-ups: "
                f"{str(exc).strip()}. Check that the server runs and is reachable."
            ) from exc
        await self._listen(conn, task_status.started)
        delay = RECONNECT_DELAY_S[0]
        while True:
            try:
                conn = await self._connect()
            except psycopg.OperationalError as exc:
                log.warning(
                    "Cannot reconnect to %s to listen for wake-ups (%s); next try in %.2f s",
                    self._where,
                    str(exc).strip(),
                    delay,
                )
                await anyio.sleep(delay)
                delay = min(delay * 2, RECONNECT_DELAY_S[1])
                continue
            delay = RECONNECT_DELAY_S[0]
            self.reconnects += 1
            await self._listen(conn, self._on_missed)

    async def _listen(
        self, conn: psycopg.AsyncConnection[TupleRow], listening: Callable[[], None]
    ) -> None:
        """LISTEN on `conn`, call `listening`, then hand on notifications until the connection
        fails (returns) or the task is cancelled."""
        async with conn:
            try:
                await conn.execute(f"LISTEN {WAKEUP_CHANNEL}")
                listening()
                while True:
                    async for notify in conn.notifies(timeout=self._probe_every_s):
                        woken = _parsed(notify.payload)
                        if woken is None:  # not ours: another program on the channel
                            log.warning("Ignored a wake-up not from wakeful: %r", notify.payload)
                            continue
                        self._on_wake(*woken)
                    # Quiet for a while: make sure the connection is still there (a partition
                    # shows no error until something is sent).
                    with anyio.fail_after(PROBE_TIMEOUT_S):
                        await conn.execute("SELECT 1")
            except (psycopg.OperationalError, TimeoutError) as exc:
                log.warning(
                    "The wake-up listener lost its connection to %s (%s); reconnecting, then "
                    "rescanning for what was missed",
                    self._where,
                    str(exc).strip() or type(exc).__name__,
                )
