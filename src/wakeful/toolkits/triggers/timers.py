"""The tools an agent uses to wake itself later: `set_timer`, `cancel_timer`, `list_timers`.

They are thin: each finds the runtime's :class:`TimerService`, calls it for the caller's session,
and turns its refusals into tool errors the model can act on.
"""

from __future__ import annotations

from typing import Annotated, Any, Final

from pydantic import Field

from ...channels.timer_schedules import EXAMPLE_AT, InvalidTimer, MissedPolicy
from ...channels.timers import MIN_INTERVAL_SECONDS, TimerService, UnknownTimer
from ...errors import ToolError
from ...tools.spec import Tool, ToolAnnotations, ToolContext, tool

__all__ = ["TIMER_TOOLS", "cancel_timer", "list_timers", "set_timer"]


def _service(ctx: ToolContext, tool_name: str) -> TimerService:
    timers = ctx.services.timers
    if timers is None:
        raise ToolError(
            f"Timers are not enabled in this runtime, so {tool_name} cannot work. Do the work "
            "now, or tell the user that reminders need timers enabled in the configuration."
        )
    return timers


@tool(  # `tool` returns Any
    examples=(
        {"note": "Check whether the nightly build passed and tell the user", "delay_seconds": 1800},
        {
            "note": "Send the user the weekly summary",
            "cron": "0 9 * * 5",
            "timezone": "Europe/Paris",
        },
        {"note": "Remind the user of the dentist at 10:00", "at": EXAMPLE_AT, "missed": "skip"},
    ),
)
async def set_timer(
    ctx: ToolContext,
    note: Annotated[
        str,
        Field(
            min_length=1,
            description="What you want to be told when the timer fires; it comes back to you as "
            "the event text, e.g. 'Check whether the nightly build passed and tell the user'.",
        ),
    ],
    at: Annotated[
        str | None,
        Field(
            description="When to fire once, as an RFC 3339 time with a timezone offset, e.g. "
            f"'{EXAMPLE_AT}' or '2025-06-02T07:00:00Z'. With every_seconds: the first fire.",
        ),
    ] = None,
    delay_seconds: Annotated[
        float | None,
        Field(
            ge=0,
            description="Fire after this many seconds instead of at a time, e.g. 1800 for "
            "half an hour. With every_seconds: the delay before the first fire.",
        ),
    ] = None,
    every_seconds: Annotated[
        float | None,
        Field(
            ge=MIN_INTERVAL_SECONDS,
            description="Repeat every this many seconds (at least 1), e.g. "
            "3600 for hourly. The first fire is at `at`, after `delay_seconds`, or one interval "
            "from now.",
        ),
    ] = None,
    cron: Annotated[
        str | None,
        Field(
            description="A five-field cron schedule (minute hour day-of-month month "
            "day-of-week), e.g. '0 9 * * 5' for Fridays at 09:00. Needs `timezone`; not combined "
            "with the others.",
        ),
    ] = None,
    timezone: Annotated[
        str | None,
        Field(
            description="The IANA timezone the cron schedule is read in, e.g. 'Europe/Paris' or "
            "'UTC'. Only for `cron`.",
        ),
    ] = None,
    missed: Annotated[
        MissedPolicy,
        Field(
            description="What to do if the runtime was not running when the timer was due: "
            "'fire_once' (fire one late event, however many times it was missed) or 'skip' (stay "
            "quiet and wait for the next time), e.g. 'skip' for a reminder that is useless late.",
        ),
    ] = "fire_once",
) -> dict[str, Any]:
    """Set a timer that wakes you later with your own note, as a [TIMER <timer_id>] event.

    Use it to come back to something later: check on a long job, remind the user at a given
    time, or do recurring work every N seconds or on a cron schedule in a timezone. Give one of
    `at`, `delay_seconds` or `cron` (`every_seconds` may replace or accompany `at`/`delay_seconds`).
    It cannot do anything by itself when it fires: it only wakes you with the note, and you then
    decide what to do. It is precise to about a second; intervals are at least 1 second. If the
    runtime was down when a timer was due, it fires once when the runtime is back (marked late),
    never once per missed occurrence, or not at all with missed='skip'.
    Returns {"timer_id": "tmr_…", "note": …, "schedule": "once" | "every 1h" | "cron '…' in …",
    "next_fire": "<UTC RFC 3339 time>", "missed": …, "active": true, "fire_count": 0}.
    Cost: free and instant, no model or network call; the result is about 250 characters plus
    the note. Cancel it with cancel_timer.
    """
    service = _service(ctx, "set_timer")
    try:
        record = await service.set_timer(
            session=ctx.session,
            note=note,
            at=at,
            delay_seconds=delay_seconds,
            every_seconds=every_seconds,
            cron=cron,
            timezone=timezone,
            missed=missed,
        )
    except InvalidTimer as exc:
        raise ToolError(str(exc)) from exc
    return record.summary()


@tool(
    annotations=ToolAnnotations(destructive=True, idempotent=True),
    examples=({"timer_id": "tmr_3f9a1c2b7d4e"},),
)
async def cancel_timer(
    ctx: ToolContext,
    timer_id: Annotated[
        str,
        Field(
            min_length=1,
            description="The id set_timer or list_timers gave, e.g. 'tmr_3f9a1c2b7d4e'.",
        ),
    ],
) -> dict[str, Any]:
    """Cancel one of your active timers so that it never fires again.

    Use it when a reminder or a recurring timer is no longer needed. It cannot cancel a timer of
    another session, undo a fire that already happened, or pause a timer (cancel it and set a new
    one). Returns {"cancelled": "<timer_id>", "note": …, "schedule": …}. Cost: free and instant;
    about 100 characters plus the note.
    """
    service = _service(ctx, "cancel_timer")
    try:
        record = await service.cancel_timer(timer_id, session=ctx.session)
    except UnknownTimer as exc:
        raise ToolError(str(exc)) from exc
    return {"cancelled": record.id, "note": record.note, "schedule": record.schedule}


@tool(annotations=ToolAnnotations(read_only=True, idempotent=True), examples=({},))
async def list_timers(ctx: ToolContext) -> dict[str, Any]:
    """List your active timers, soonest first.

    Use it to check what you have scheduled, or to find a timer_id for cancel_timer. It shows
    only this session's timers that have not finished; it cannot show fired one-shot timers,
    which are gone. Returns {"count": 2, "timers": [{"timer_id": "tmr_…", "note": …,
    "schedule": …, "next_fire": "<UTC RFC 3339 time>", "missed": …, "active": true,
    "fire_count": 3}, …]}. Cost: free and instant; about 250 characters per timer.
    """
    service = _service(ctx, "list_timers")
    records = service.list_timers(ctx.session)
    return {"count": len(records), "timers": [r.summary() for r in records]}


TIMER_TOOLS: Final[tuple[Tool, ...]] = (set_timer, cancel_timer, list_timers)
