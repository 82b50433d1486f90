"""`calendar_events`: the events of a calendar in a time window, recurring ones expanded.

A calendar is an `.ics` file under the root, or a source named in :class:`CalendarSettings`: an
ICS URL (a published or exported calendar) or a CalDAV collection, asked with a REPORT
calendar-query for the window. The model names configured sources only; it cannot make the
tool fetch an arbitrary URL, and credentials stay in the settings. Recurrence (RRULE, RDATE,
EXDATE and moved occurrences) is expanded locally with `recurring_ical_events`, so a CalDAV
server that returns the master event only still gives every occurrence in the window.
"""

from __future__ import annotations

import datetime as dt
import os
import stat
import xml.etree.ElementTree as ET
from typing import Annotated, Any, Literal

import anyio
import icalendar
import recurring_ical_events  # type: ignore[import-untyped]
from pydantic import BaseModel, ConfigDict, Field, SecretStr

from ...errors import ToolError
from ...services import settings_of
from ...tools.spec import Tool, ToolAnnotations, ToolContext, ToolResult, tool
from .cursors import fill_page, make_cursor, query_digest, read_cursor
from .public_http import PublicDataSettings, check_status, fetch
from .shown_text import OUTPUT_LIMIT
from .workspace import open_workspace

MAX_ICS_BYTES = 5 * 1024 * 1024
MAX_WINDOW = dt.timedelta(days=366 * 2)
DEFAULT_LIMIT = 50
MAX_LIMIT = 500
_PAGE_CHARS = OUTPUT_LIMIT - 1_000
_DESCRIPTION_CHARS = 200
_DAV = "{DAV:}"
_CALDAV = "{urn:ietf:params:xml:ns:caldav}"


class CalendarSource(BaseModel):
    """One calendar calendar_events may read by name."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str
    """An http(s) URL of an .ics file, or of a CalDAV calendar collection."""

    kind: Literal["ics", "caldav"] = "ics"
    """"ics" downloads the whole file; "caldav" asks the server for the window only."""

    username: str | None = None
    password: SecretStr | None = None
    """HTTP basic credentials, when the server needs them."""


class CalendarSettings(BaseModel):
    """The named calendars calendar_events may read besides .ics files under the root."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    sources: dict[str, CalendarSource] = Field(default_factory=dict)
    """Calendars by the name the model passes as `source`, e.g. {"work": {"url": "…"}}."""


@tool(
    annotations=ToolAnnotations(read_only=True, idempotent=True),
    examples=(
        {
            "source": "calendars/personal.ics",
            "start": "2024-05-01T00:00:00+02:00",
            "end": "2024-05-08T00:00:00+02:00",
        },
        {"source": "work", "start": "2024-05-13T00:00:00Z", "end": "2024-05-14T00:00:00Z"},
    ),
)
async def calendar_events(
    ctx: ToolContext,
    source: Annotated[
        str,
        Field(
            min_length=1,
            max_length=4096,
            description="A configured calendar's name, or the path of an .ics file under the "
            "root, e.g. 'calendars/personal.ics'.",
        ),
    ],
    start: Annotated[
        str,
        Field(
            min_length=1,
            max_length=64,
            description="Start of the window, RFC 3339 with a time zone offset, e.g. "
            "'2024-05-01T00:00:00+02:00'.",
        ),
    ],
    end: Annotated[
        str,
        Field(
            min_length=1,
            max_length=64,
            description="End of the window (exclusive), RFC 3339 with a time zone offset, at "
            "most two years after start, e.g. '2024-05-08T00:00:00Z'.",
        ),
    ],
    limit: Annotated[
        int,
        Field(ge=1, le=MAX_LIMIT, description=f"Most events per page (1-{MAX_LIMIT}), e.g. 20."),
    ] = DEFAULT_LIMIT,
    cursor: Annotated[
        str | None,
        Field(
            max_length=500,
            description="The next_cursor of the previous result, for the next page of the same "
            "window, e.g. 'eyJxIjoiYTFiMmMzIiwiYXQiOjUwfQ'.",
        ),
    ] = None,
) -> ToolResult:
    """List the events of a calendar that overlap a time window, recurring events expanded.

    Use it to answer what is on the user's schedule, when they are free, or when a meeting is.
    The source is a configured calendar (ICS URL or CalDAV) by name, or an .ics file under the
    root. Give start and end with a time zone offset, e.g. the user's day in their zone.

    It does not accept times without a time zone and cannot change, add or delete events; it
    cannot read URLs that are not configured, nor files outside the root.

    Result: a header "work: 3 events from 2024-05-13T00:00:00+00:00 to …; 1–3 shown", then one
    line per event in start order: start, end, summary and location ("all day" events show
    dates). structuredContent: {"events": [{"summary", "start", "end", "all_day", "location",
    "description", "uid", "recurring"}], "total", "next_cursor"}.

    Cost: a few milliseconds for a file, up to a few seconds for a remote calendar; about 100
    characters per event.
    """
    window_start = _aware("start", start)
    window_end = _aware("end", end)
    if window_end <= window_start:
        raise ToolError(
            f"end ({end}) is not after start ({start}). Pass an end later than start, e.g. "
            "start plus one day."
        )
    if window_end - window_start > MAX_WINDOW:
        raise ToolError(
            f"The window from {start} to {end} is longer than two years. Ask for a shorter "
            "window, e.g. one month."
        )
    digest = query_digest("calendar_events", source=source, start=start, end=end)
    first = 0 if cursor is None else read_cursor(cursor, digest, "calendar_events")
    settings = settings_of(ctx.services, CalendarSettings)
    configured = settings.sources.get(source)
    if configured is not None:
        calendars = await _remote(ctx, source, configured, window_start, window_end)
        shown_source = source
    else:
        calendars, shown_source = await _local(ctx, source, settings)
    events = _expand(calendars, shown_source, window_start, window_end)
    if first and first >= len(events):
        raise ToolError(
            f"The cursor points past the last of the {len(events)} events in the window (the "
            "calendar changed). Leave cursor out to start from the first page."
        )
    page, lines = fill_page(events, first, limit, _line, _PAGE_CHARS)
    last = first + len(page)
    next_cursor = make_cursor(digest, last) if last < len(events) else None
    span = f"from {window_start.isoformat()} to {window_end.isoformat()}"
    if not events:
        text = f"{shown_source}: no events {span}."
    else:
        noun = "event" if len(events) == 1 else "events"
        header = f"{shown_source}: {len(events)} {noun} {span}; {first + 1}–{last} shown"
        text = "\n".join([header, *lines])
        if next_cursor:
            text += f"\n\nMore: pass cursor={next_cursor!r} for the next events."
    return ToolResult(
        text, structured={"events": page, "total": len(events), "next_cursor": next_cursor}
    )


def _aware(name: str, value: str) -> dt.datetime:
    text = value.strip()
    if text[-1:] in ("z", "Z"):
        text = text[:-1] + "+00:00"
    try:
        parsed = dt.datetime.fromisoformat(text)
    except ValueError as exc:
        raise ToolError(
            f"{name}={value!r} is not an RFC 3339 date-time. Pass one like "
            "'2024-05-01T09:00:00+02:00'."
        ) from exc
    if parsed.tzinfo is None or parsed.utcoffset() is None:
        raise ToolError(
            f"{name}={value!r} has no time zone, so it could mean any of 24 hours. Add the "
            "offset, e.g. '2024-05-01T09:00:00+02:00' or '2024-05-01T07:00:00Z'."
        )
    return parsed


async def _local(
    ctx: ToolContext, source: str, settings: CalendarSettings
) -> tuple[list[icalendar.Calendar], str]:
    if not source.lower().endswith(".ics"):
        names = ", ".join(sorted(settings.sources)) or "none are configured"
        raise ToolError(
            f"{source!r} is neither a configured calendar ({names}) nor an .ics file path. "
            "Pass a configured name or the path of an .ics file under the root."
        )

    def read() -> tuple[str, bytes]:
        with open_workspace(ctx) as root, root.open(source) as found:
            shown = found.shown
            info = os.fstat(found.fd)
            if not stat.S_ISREG(info.st_mode):
                raise ToolError(f"{shown!r} is not a file. Pass the path of an .ics file.")
            if info.st_size > MAX_ICS_BYTES:
                raise ToolError(
                    f"{shown} is bigger than {MAX_ICS_BYTES:,} bytes, more than calendar_events "
                    "reads. Split it, or serve it over CalDAV."
                )
            return shown, found.read_bytes()

    shown, data = await anyio.to_thread.run_sync(read)
    return [_parse(data, shown)], shown


async def _remote(
    ctx: ToolContext,
    name: str,
    source: CalendarSource,
    window_start: dt.datetime,
    window_end: dt.datetime,
) -> list[icalendar.Calendar]:
    public = settings_of(ctx.services, PublicDataSettings)
    auth = None
    if source.username is not None:
        password = source.password.get_secret_value() if source.password else ""
        auth = (source.username, password)
    service = f"the calendar {name!r}"
    if source.kind == "ics":
        response = await fetch(
            public, "calendar_events", service, source.url, auth=auth, services=ctx.services
        )
        check_status(response, service, "Check the calendar's URL and credentials in settings.")
        return [_parse(response.content, name)]
    response = await fetch(
        public,
        "calendar_events",
        service,
        source.url,
        method="REPORT",
        content=_calendar_query(window_start, window_end).encode(),
        headers={"Depth": "1", "Content-Type": "application/xml; charset=utf-8"},
        auth=auth,
        services=ctx.services,
    )
    check_status(response, service, "Check the CalDAV collection URL and credentials.")
    try:
        status = ET.fromstring(response.content)
    except ET.ParseError as exc:
        raise ToolError(
            f"The CalDAV server of {name!r} answered with XML that does not parse ({exc}). "
            "Check that the URL is a CalDAV calendar collection."
        ) from exc
    parts = [
        element.text
        for element in status.iter(f"{_CALDAV}calendar-data")
        if element.text and element.text.strip()
    ]
    return [_parse(part.encode(), name) for part in parts]


def _calendar_query(window_start: dt.datetime, window_end: dt.datetime) -> str:
    def stamp(moment: dt.datetime) -> str:
        return moment.astimezone(dt.UTC).strftime("%Y%m%dT%H%M%SZ")

    return (
        '<?xml version="1.0" encoding="utf-8"?>\n'
        '<c:calendar-query xmlns:d="DAV:" xmlns:c="urn:ietf:params:xml:ns:caldav">'
        "<d:prop><c:calendar-data/></d:prop>"
        '<c:filter><c:comp-filter name="VCALENDAR"><c:comp-filter name="VEVENT">'
        f'<c:time-range start="{stamp(window_start)}" end="{stamp(window_end)}"/>'
        "</c:comp-filter></c:comp-filter></c:filter></c:calendar-query>"
    )


def _parse(data: bytes, shown: str) -> icalendar.Calendar:
    try:
        calendar = icalendar.Calendar.from_ical(data)
    except ValueError as exc:
        raise ToolError(
            f"{shown} is not a valid iCalendar (.ics) file: {exc}. Check that it starts with "
            "BEGIN:VCALENDAR, or export the calendar again."
        ) from exc
    if not isinstance(calendar, icalendar.Calendar):
        raise ToolError(f"{shown} holds no VCALENDAR. Pass an iCalendar (.ics) file.")
    return calendar


def _expand(
    calendars: list[icalendar.Calendar],
    shown: str,
    window_start: dt.datetime,
    window_end: dt.datetime,
) -> list[dict[str, Any]]:
    zone = window_start.tzinfo
    found: list[tuple[dt.datetime, dict[str, Any]]] = []
    # Expanded occurrences all carry RECURRENCE-ID and lose RRULE, so ask the originals.
    repeating = {
        str(component.get("UID"))
        for calendar in calendars
        for component in calendar.walk("VEVENT")
        if any(key in component for key in ("RRULE", "RDATE", "RECURRENCE-ID"))
    }
    for calendar in calendars:
        try:
            occurrences = recurring_ical_events.of(calendar).between(window_start, window_end)
        except (ValueError, TypeError, KeyError) as exc:
            raise ToolError(
                f"The events of {shown} cannot be expanded: {exc}. The file has an invalid "
                "date or recurrence rule; fix or export it again."
            ) from exc
        except OverflowError as exc:
            # Expanding looks a little before and after the window; at year 1 or 9999 that
            # leaves the dates Python can hold.
            raise ToolError(
                f"The window from {window_start.isoformat()} to {window_end.isoformat()} is too "
                "close to year 1 or year 9999 to look for events around it. Ask for a window "
                "between the years 2 and 9998."
            ) from exc
        for event in occurrences:
            begin = event.get("DTSTART")
            if begin is None:
                continue
            start_value = begin.dt
            finish = event.get("DTEND")
            end_value = finish.dt if finish is not None else None
            all_day = not isinstance(start_value, dt.datetime)
            description = str(event.get("DESCRIPTION", "") or "")
            if len(description) > _DESCRIPTION_CHARS:
                description = description[: _DESCRIPTION_CHARS - 1] + "…"
            found.append(
                (
                    _sort_key(start_value, zone),
                    {
                        "summary": str(event.get("SUMMARY", "") or "(no title)"),
                        "start": _shown_time(start_value, zone),
                        "end": _shown_time(end_value, zone) if end_value is not None else None,
                        "all_day": all_day,
                        "location": str(event.get("LOCATION", "")) or None,
                        "description": description or None,
                        "uid": str(event.get("UID", "")) or None,
                        "recurring": str(event.get("UID")) in repeating,
                    },
                )
            )
    found.sort(key=lambda pair: (pair[0], pair[1]["summary"]))
    return [event for _, event in found]


def _sort_key(value: dt.date, zone: dt.tzinfo | None) -> dt.datetime:
    if isinstance(value, dt.datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=zone)
    return dt.datetime.combine(value, dt.time(), tzinfo=zone)


def _shown_time(value: dt.date, zone: dt.tzinfo | None) -> str:
    if isinstance(value, dt.datetime):
        # Floating times (no zone in the file) are taken as the window's zone.
        aware = value if value.tzinfo is not None else value.replace(tzinfo=zone)
        return aware.astimezone(zone).isoformat()
    return value.isoformat()


def _line(event: dict[str, Any]) -> str:
    if event["all_day"]:
        when = f"{event['start']} (all day)"
        if event["end"]:
            when = f"{event['start']} – {event['end']} (all day, end exclusive)"
    else:
        when = f"{event['start']} – {event['end'] or '?'}"
    line = f"{when}  {event['summary']}"
    if event["location"]:
        line += f" @ {event['location']}"
    if event["recurring"]:
        line += "  (recurring)"
    return line


CALENDAR_TOOLS: tuple[Tool, ...] = (calendar_events,)
"""calendar_events: read-only access to .ics files under the root and configured calendars."""

__all__ = ["CALENDAR_TOOLS", "CalendarSettings", "CalendarSource", "calendar_events"]
