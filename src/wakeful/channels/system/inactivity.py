"""`system.user_inactive`: the user has not been seen for N minutes.

One event per inactivity period, not one per check. A period starts at the user's last
activity (or, before any was seen, when the channel first started) and ends at the next; its
event says since when and for how long, where the user was last seen, and — the "active again"
fact — when the previous period ended and how long it lasted, so the agent learns the user's
rhythm without a query. The user's return is not an event of its own: it is their next message.

The event's id is derived from the start of the period ("inactive since <ts>"), and that start
is kept in the channel's cursors, so after a restart the same period is recognised (the Inbox
drops the redelivery) rather than reported twice.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ...activity import UserActivity
from ...core.channel import source_event_id
from ...core.repositories import ChannelCursorRepository
from ...events import SYSTEM_USER_INACTIVE, Event, Source
from .deliver import Deliver

__all__ = ["InactivityMonitor"]

log = logging.getLogger(__name__)

CURSOR_KEY = "user_inactive"


@dataclass
class _Period:
    """Where the monitor stands: the start of the current period, whether it was reported,
    and the last period that ended (None before the first)."""

    since: datetime
    reported: bool = False
    previous: dict[str, Any] | None = None

    def dump(self) -> str:
        return json.dumps(
            {"since": self.since.isoformat(), "reported": self.reported, "previous": self.previous}
        )

    @classmethod
    def load(cls, text: str) -> _Period:
        data = json.loads(text)
        return cls(datetime.fromisoformat(data["since"]), bool(data["reported"]), data["previous"])


class InactivityMonitor:
    """Reports, once per period, that the user has been away `after` (see the module docs)."""

    def __init__(
        self,
        *,
        channel: str,
        session: str,
        after: timedelta,
        activity: UserActivity,
        cursors: ChannelCursorRepository,
        deliver: Deliver,
    ) -> None:
        self._channel = channel
        self._session = session
        self._after = after
        self._activity = activity
        self._cursors = cursors
        self._deliver = deliver
        self._period: _Period | None = None

    @property
    def away_since(self) -> datetime | None:
        """The start of the current period once it has been reported, else None."""
        period = self._period
        return period.since if period is not None and period.reported else None

    async def check(self, now: datetime) -> None:
        period = await self._current(now)
        seen = self._activity.last_seen
        if seen is not None and seen > period.since:
            previous = period.previous
            if period.reported:
                previous = {
                    "inactive_since": period.since.isoformat(),
                    "active_again_at": seen.isoformat(),
                    "inactive_minutes": _minutes(seen - period.since),
                }
            period = self._period = _Period(seen, previous=previous)
            await self._cursors.put(self._channel, CURSOR_KEY, period.dump())
        if period.reported or now - period.since < self._after:
            return
        await self._deliver(self._event(period, now))
        period.reported = True
        await self._cursors.put(self._channel, CURSOR_KEY, period.dump())

    async def _current(self, now: datetime) -> _Period:
        """The period in memory, or the one a previous run kept, or one starting now."""
        if self._period is not None:
            return self._period
        stored = await self._cursors.get(self._channel, CURSOR_KEY)
        period = None
        if stored is not None:
            try:
                period = _Period.load(stored)
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("%s: ignoring a damaged %s cursor (%s)", self._channel, CURSOR_KEY, exc)
        if period is None:
            period = _Period(now)
            await self._cursors.put(self._channel, CURSOR_KEY, period.dump())
        self._period = period
        return period

    def _event(self, period: _Period, now: datetime) -> Event:
        minutes = _minutes(now - period.since)
        seen = self._activity.last_seen is not None or period.previous is not None
        where = self._activity.last_channel
        if seen:
            summary = f"The user has not been active for {minutes:g} minutes: last seen at "
            summary += period.since.isoformat() + (f" on {where}." if where else ".")
        else:
            summary = f"The user has not been active for {minutes:g} minutes: not seen since "
            summary += f"the runtime started at {period.since.isoformat()}."
        summary += " What needs them now should go where they will notice it."
        return Event(
            id=source_event_id(self._channel, f"inactive since {period.since.isoformat()}"),
            kind=SYSTEM_USER_INACTIVE,
            source=Source(type="system", id="user_inactive"),
            channel=self._channel,
            session=self._session,
            urgency="low",
            content={
                "summary": summary,
                "inactive_since": period.since.isoformat(),
                "inactive_minutes": minutes,
                "threshold_minutes": _minutes(self._after),
                "last_seen_on": where if seen else None,
                "previous_inactivity": period.previous,
            },
        )


def _minutes(delta: timedelta) -> float:
    return round(delta.total_seconds() / 60, 1)
