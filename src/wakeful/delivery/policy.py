"""Which channels a message to the user goes to, now and later: the delivery policy.

A pure function of the message's urgency, where the conversation is (its "home" channel), where
the user is (:class:`Presence`), the channels that can reach them, the clock and their
:class:`~wakeful.delivery.settings.DeliverySettings`:

- **low** waits for the next digest (several low messages go out as one), unless the user is
  on the console, which shows them without disturbing anyone;
- **normal** goes to the channel the user is on now, else to the conversation's channel;
- **high** goes there too, plus a push: the first IM or mail channel that is not already used;
- **urgent** goes where the user is (or, when they are away, to the first push channel), then,
  while it stays unread, to the next channel in the list every `escalate_after_minutes`.

The console (terminal and web) never disturbs: it only shows, so it is exempt from quiet hours
and digests. Outside the console, a channel carries only messages at least as urgent as its
`min_urgency`, and during quiet hours only the urgencies they `allow`: the others wait until
the hours end. Reading a message anywhere cancels what is still planned for it (the
dispatcher's job, not this module's).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from .settings import CONSOLE, DeliverySettings, urgency_rank

__all__ = ["Plan", "Presence", "Step", "digest_time", "plan_delivery", "quiet_until"]

# The channels the user's consoles report their input on; both show messages as "console".
CONSOLE_INPUTS = frozenset({"console", "web"})


@dataclass(frozen=True)
class Presence:
    """Where the user is: the channel they were seen on within `active_minutes`, or None."""

    channel: str | None = None
    last_seen: datetime | None = None

    @classmethod
    def of(
        cls, last_seen: datetime | None, last_channel: str, now: datetime, minutes: float
    ) -> Presence:
        if last_seen is None or now - last_seen > timedelta(minutes=minutes):
            return cls(None, last_seen)
        return cls(CONSOLE if last_channel in CONSOLE_INPUTS else last_channel, last_seen)


@dataclass(frozen=True)
class Step:
    """One delivery planned for later: to `channel` at `at`, if still unread by then."""

    at: datetime
    channel: str
    reason: str  # "escalation", "digest" or "quiet hours"


@dataclass(frozen=True)
class Plan:
    """Where a message goes now, and later while it stays unread; `why` says it in a line."""

    now: tuple[str, ...]
    later: tuple[Step, ...] = ()
    why: str = ""


def plan_delivery(
    *,
    urgency: str,
    home: str,
    presence: Presence,
    reachable: Sequence[str],
    settings: DeliverySettings,
    now: datetime,
    created_at: datetime | None = None,
) -> Plan:
    """The plan for one message (see the module docs). `reachable` are the channels that can
    carry messages to the user now, in the order escalation tries them (the console first
    when it is listed); `created_at` (default `now`) anchors escalations and digests, so a plan
    remade after a restart keeps the original times."""
    start = created_at or now
    rank = urgency_rank(urgency)
    channels = [c for c in reachable if c == CONSOLE or rank >= _min_rank(settings, c)]
    if home not in channels and home != CONSOLE and home not in reachable:
        # Not a channel of the user (an operator's log, a caller's own name): as asked.
        return Plan((home,), why=f"{urgency}: to {home}, which the delivery policy does not manage")
    pushes = [c for c in channels if c != CONSOLE]
    here = presence.channel if presence.channel in channels else None
    first = here or (home if home in channels else CONSOLE)

    if rank == 0:  # low
        if first == CONSOLE:
            return Plan((CONSOLE,), why="low: shown on the console, where the user is")
        at = digest_time(start, settings)
        return _quiet(
            Plan((), (Step(at, first, "digest"),), f"low: in the digest for {first}"),
            settings,
            urgency,
            now,
        )
    if rank == 1:  # normal
        return _quiet(Plan((first,), why=f"normal: to {first}"), settings, urgency, now)
    if rank == 2:  # high
        push = next((c for c in pushes if c != first), None)
        targets = (first,) if push is None else (first, push)
        return _quiet(
            Plan(targets, why=f"high: to {' and '.join(targets)}"), settings, urgency, now
        )
    # urgent
    if here is None and pushes:
        first = pushes[0]
    after = timedelta(minutes=settings.escalate_after_minutes)
    rest = [c for c in channels if c != first]
    later = tuple(Step(start + after * (i + 1), c, "escalation") for i, c in enumerate(rest))
    why = f"urgent: to {first}" + (
        f", then {', '.join(rest)} every {settings.escalate_after_minutes:g} min while unread"
        if rest
        else ""
    )
    return _quiet(Plan((first,), later, why), settings, urgency, now)


def digest_time(created: datetime, settings: DeliverySettings) -> datetime:
    """The next digest after `created`: on the grid of `digest_every_minutes` since the epoch,
    so that messages sent close together share one digest."""
    period = settings.digest_every_minutes * 60
    epoch = created.astimezone(UTC).timestamp()
    slot = (int(epoch // period) + 1) * period
    return datetime.fromtimestamp(slot, UTC)


def quiet_until(moment: datetime, settings: DeliverySettings) -> datetime | None:
    """When the quiet hours around `moment` end, or None outside them."""
    quiet = settings.quiet_hours
    if quiet is None:
        return None
    local = moment.astimezone(settings.zone())
    if not quiet.contains(local.time()):
        return None
    end = local.replace(hour=quiet.end.hour, minute=quiet.end.minute, second=0, microsecond=0)
    if end <= local:
        end += timedelta(days=1)
    return end.astimezone(UTC)


def _quiet(plan: Plan, settings: DeliverySettings, urgency: str, now: datetime) -> Plan:
    """`plan` with what would disturb during quiet hours moved to their end (the console still
    shows at once)."""
    quiet = settings.quiet_hours
    if quiet is None or urgency in quiet.allow:
        return plan
    now_targets = [c for c in plan.now if c == CONSOLE]
    later = [
        Step(_after_quiet(step.at, settings), step.channel, step.reason) for step in plan.later
    ]
    end = quiet_until(now, settings)
    held = [c for c in plan.now if c != CONSOLE]
    if end is None:
        now_targets = list(plan.now)
    else:
        later = [Step(end, c, "quiet hours") for c in held] + later
    if now_targets == list(plan.now) and later == list(plan.later):
        return plan
    why = plan.why + (
        f"; held until the quiet hours end at {end:%H:%M} UTC" if end and held else ""
    )
    return Plan(tuple(now_targets), tuple(later), why)


def _after_quiet(at: datetime, settings: DeliverySettings) -> datetime:
    return quiet_until(at, settings) or at


def _min_rank(settings: DeliverySettings, channel: str) -> int:
    minimum = settings.min_urgency.get(channel)
    return urgency_rank(minimum) if minimum else 0
