"""`create_calendar_event`: add one event to an .ics file in the workspace or a CalDAV calendar.

Creating an event is idempotent by its UID: the UID is the one the model gives, or is derived from
its `idempotency_key`, so the same event asked for twice is found rather than added twice (the
.ics file already holds that UID; the CalDAV server answers 412 to a PUT with `If-None-Match: *`).

An existing .ics file is changed by inserting the new VEVENT (and a VTIMEZONE it needs) before its
final `END:VCALENDAR`; every other byte of the file stays as it was, so existing events keep their
exact text, and the file is replaced atomically.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import re
import threading
import zoneinfo
from dataclasses import dataclass
from email.utils import parseaddr
from typing import Annotated, Any
from urllib.parse import quote

import anyio
import httpx2
import icalendar
from pydantic import Field

from ...errors import ToolError
from ...safety.beneath import Placement
from ...safety.idempotency import IdempotencyLedger
from ...services import Services, settings_of
from ...tools.http import HttpErrors, http_client
from ...tools.spec import Tool, ToolAnnotations, ToolContext, ToolResult, tool
from ..perception.workspace import open_workspace
from .file_targets import open_existing, refuse_protected, write_atomically
from .settings import CalendarWriteSettings

CALDAV = "caldav"
MAX_ICS_BYTES = 20 * 1024 * 1024
MAX_DURATION = dt.timedelta(days=366)
_PRODID = "-//wakeful//create_calendar_event//EN"
_ADDRESS = re.compile(r"^[^@\s<>,;:\"]+@[^@\s<>,;:\"]+\.[^@\s<>,;:\"]+$")
# One writer at a time for .ics files, so two events added at once do not lose one.
_ICS_LOCK = threading.Lock()


@dataclass(frozen=True, slots=True)
class _When:
    start: dt.date | dt.datetime
    end: dt.date | dt.datetime
    all_day: bool
    timezone: str | None


@tool(
    root_paths=("calendar",),
    annotations=ToolAnnotations(
        read_only=False, destructive=False, idempotent=True, open_world=True
    ),
    examples=(
        {
            "calendar": "calendars/team.ics",
            "summary": "Release review",
            "start": "2025-06-03T14:00",
            "end": "2025-06-03T15:00",
            "timezone": "Europe/Berlin",
            "attendees": ["ana@example.com"],
            "idempotency_key": "release-review-2025-06-03",
        },
        {
            "calendar": "caldav",
            "summary": "Company holiday",
            "start": "2025-12-24",
            "end": "2025-12-27",
            "uid": "holiday-2025-12-24@example.com",
        },
    ),
)
async def create_calendar_event(
    ctx: ToolContext,
    calendar: Annotated[
        str,
        Field(
            min_length=1,
            max_length=4096,
            description="An .ics file under the workspace root (created if missing), or "
            "'caldav' for the configured CalDAV calendar, e.g. 'calendars/team.ics'.",
        ),
    ],
    summary: Annotated[
        str,
        Field(min_length=1, max_length=1000, description="The title, e.g. 'Release review'."),
    ],
    start: Annotated[
        str,
        Field(
            min_length=10,
            max_length=40,
            description="ISO 8601 local time (with timezone) or time with offset, or a date "
            "for an all-day event, e.g. '2025-06-03T14:00'.",
        ),
    ],
    end: Annotated[
        str | None,
        Field(
            min_length=10,
            max_length=40,
            description="When it ends, same form as start; an all-day event's end date is the "
            "day after its last day and may be left out for one day, e.g. '2025-06-03T15:00'.",
        ),
    ] = None,
    timezone: Annotated[
        str | None,
        Field(
            min_length=1,
            max_length=64,
            description="The IANA time zone of start and end when they have no offset, "
            "e.g. 'Europe/Berlin'.",
        ),
    ] = None,
    description: Annotated[
        str,
        Field(max_length=20_000, description="Notes, e.g. 'Agenda: blockers, dates.'."),
    ] = "",
    location: Annotated[
        str,
        Field(max_length=1000, description="Where, e.g. 'Room 4.12'."),
    ] = "",
    attendees: Annotated[
        tuple[Annotated[str, Field(min_length=3, max_length=320)], ...],
        Field(
            max_length=100,
            description="Email addresses of attendees (listed; no invitations are sent), "
            "e.g. ['ana@example.com'].",
        ),
    ] = (),
    uid: Annotated[
        str | None,
        Field(
            min_length=1,
            max_length=255,
            description="The event's UID, if it must be a given one, e.g. 'review-42@example.com'.",
        ),
    ] = None,
    idempotency_key: Annotated[
        str | None,
        Field(
            min_length=1,
            max_length=200,
            description="A key for this one event; the UID is derived from it, so a repeat "
            "finds the event instead of adding it again, e.g. 'release-review-2025-06-03'.",
        ),
    ] = None,
) -> ToolResult:
    """Add one event to a calendar: an .ics file in the workspace, or the CalDAV calendar.

    Use it to put a meeting, deadline or reminder into a calendar the user reads. Pass an
    idempotency_key (or a uid): the event's UID comes from it, and if the calendar already holds
    an event with that UID the tool returns it and adds nothing, so repeating a call is safe.
    Times are local to `timezone` (an IANA name such as 'America/New_York') unless they carry
    an offset ('2025-06-03T14:00+02:00'); a date without a time makes an all-day event.

    It cannot send invitations (attendees are listed in the event only), change or delete an
    existing event, or make recurring events. It does not write outside the workspace root.

    Result: "Added 'Release review' (2025-06-03 14:00–15:00 Europe/Berlin) to calendars/team.ics"
    or "… already holds an event with UID …: nothing added"; structuredContent holds uid,
    calendar, created, start, end and all_day.

    Cost: an .ics file is read and rewritten once (a few milliseconds; up to 20 MB); CalDAV is
    one HTTP PUT (0.1-2 s). The result is a few hundred characters.
    """
    if uid is None and idempotency_key is None:
        raise ToolError(
            "create_calendar_event needs an idempotency_key (or a uid) so that a repeated call "
            "finds the event instead of adding it twice. Pass idempotency_key, e.g. "
            "'release-review-2025-06-03'."
        )
    event_uid = uid if uid is not None else _uid_from_key(idempotency_key or "")
    _check_uid(event_uid)
    when = _when(start, end, timezone)
    checked_attendees = [_attendee(a) for a in attendees]
    event = _event(event_uid, summary, when, description, location, checked_attendees)
    arguments: dict[str, Any] = {
        "calendar": calendar,
        "summary": summary,
        "start": start,
        "end": end,
        "timezone": timezone,
        "description": description,
        "location": location,
        "attendees": list(attendees),
        "uid": uid,
    }

    async def create() -> ToolResult:
        if calendar == CALDAV:
            settings = settings_of(ctx.services, CalendarWriteSettings)
            return await _put_caldav(ctx.services, settings, event, when, summary)
        return await _add_to_ics(ctx, calendar, event, when, summary)

    if idempotency_key is None:
        return await create()
    ledger = IdempotencyLedger.of(ctx.services)
    return await ledger.run_once(ctx.tool_name, idempotency_key, arguments, create)


def _uid_from_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:32] + "@wakeful"


def _check_uid(uid: str) -> None:
    if not uid.isprintable() or any(c in uid for c in " \t/\\"):
        raise ToolError(
            f"The uid {uid!r} cannot be used: a UID is printable text without spaces, slashes "
            "or line breaks. Use something like 'review-42@example.com'."
        )


def _parse_time(text: str, field: str) -> dt.date | dt.datetime:
    try:
        if len(text) == 10:
            return dt.date.fromisoformat(text)
        return dt.datetime.fromisoformat(text)
    except ValueError as exc:
        raise ToolError(
            f"{field}={text!r} is not an ISO 8601 date or time. Use '2025-06-03T14:00' (with "
            "timezone), '2025-06-03T14:00+02:00', or '2025-06-03' for an all-day event."
        ) from exc


def _when(start: str, end: str | None, timezone: str | None) -> _When:
    first = _parse_time(start, "start")
    all_day = not isinstance(first, dt.datetime)
    if all_day:
        if timezone is not None:
            raise ToolError(
                f"start={start!r} is a date, which makes an all-day event, and all-day events "
                "have no time zone. Leave timezone out, or give start and end with a time."
            )
        if end is not None:
            last = _parse_time(end, "end")
        elif first >= dt.date.max:
            raise ToolError(
                f"start={start!r} is the last day of the calendar, so an all-day event on it "
                "has no day after to end on. Give a date before 9999-12-31."
            )
        else:
            last = first + dt.timedelta(days=1)
        if isinstance(last, dt.datetime):
            raise ToolError(
                f"start={start!r} is a date but end={end!r} has a time. Give both as dates "
                "(all-day) or both with times."
            )
    else:
        if end is None:
            raise ToolError(
                f"start={start!r} has a time, so end is needed too, e.g. one hour later. (A "
                "date without a time, '2025-06-03', makes an all-day event without an end.)"
            )
        last = _parse_time(end, "end")
        if not isinstance(last, dt.datetime):
            raise ToolError(
                f"start={start!r} has a time but end={end!r} is a date. Give both with times, "
                "or both as dates for an all-day event."
            )
        assert isinstance(first, dt.datetime)
        first, last = _zoned(first, timezone, "start"), _zoned(last, timezone, "end")
    if last <= first:  # both dates, or both aware datetimes
        raise ToolError(
            f"end={end!r} is not after start={start!r}; an event ends after it starts. (An "
            "all-day event's end is the day after its last day.)"
        )
    if last - first > MAX_DURATION:
        raise ToolError(
            f"The event from {start!r} to {end!r} lasts more than {MAX_DURATION.days} days, "
            "which is surely a mistake. Check the dates."
        )
    return _When(first, last, all_day, timezone)


def _zoned(moment: dt.datetime, timezone: str | None, field: str) -> dt.datetime:
    if moment.tzinfo is not None:
        if timezone is not None:
            raise ToolError(
                f"{field}={moment.isoformat()!r} has an offset and timezone={timezone!r} is "
                "given too; one must say where the time is. Drop the offset to use the time "
                "zone (which follows daylight saving), or leave timezone out."
            )
        return moment
    if timezone is None:
        raise ToolError(
            f"{field}={moment.isoformat()!r} has no offset and no timezone is given, so the "
            "moment is unknown. Pass timezone (an IANA name such as 'Europe/Berlin') or add an "
            "offset, e.g. '2025-06-03T14:00+02:00'."
        )
    try:
        zone = zoneinfo.ZoneInfo(timezone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError) as exc:
        raise ToolError(
            f"timezone={timezone!r} is not an IANA time zone name. Use one such as "
            "'Europe/Berlin', 'America/New_York' or 'UTC'."
        ) from exc
    return moment.replace(tzinfo=zone)


def _attendee(text: str) -> tuple[str, str]:
    name, address = parseaddr(text)
    if any(c in text for c in "\r\n\0") or not _ADDRESS.match(address):
        raise ToolError(
            f"The attendee {text!r} is not an email address. Give one address per entry, as "
            "'ana@example.com' or 'Ana Lima <ana@example.com>'."
        )
    return name, address


def _event(
    uid: str,
    summary: str,
    when: _When,
    description: str,
    location: str,
    attendees: list[tuple[str, str]],
) -> icalendar.Event:
    event = icalendar.Event()
    event.add("uid", uid)
    event.add("dtstamp", dt.datetime.now(dt.UTC).replace(microsecond=0))
    event.add("summary", summary)
    event.add("dtstart", when.start)
    event.add("dtend", when.end)
    if description:
        event.add("description", description)
    if location:
        event.add("location", location)
    for name, address in attendees:
        attendee = icalendar.vCalAddress(f"mailto:{address}")
        if name:
            attendee.params["CN"] = icalendar.vText(name)
        event.add("attendee", attendee, encode=False)
    return event


def _describe(summary: str, when: _When) -> str:
    if when.all_day:
        last = when.end - dt.timedelta(days=1)
        days = f"{when.start}" if last == when.start else f"{when.start} to {last}"
        return f"{summary!r} ({days}, all day)"
    assert isinstance(when.start, dt.datetime) and isinstance(when.end, dt.datetime)
    zone = f" {when.timezone}" if when.timezone else ""
    same_day = when.start.date() == when.end.date()
    end = when.end.strftime("%H:%M") if same_day else when.end.isoformat(" ", "minutes")
    begin = (
        when.start.isoformat(" ", "minutes")
        if when.timezone is None
        else (when.start.strftime("%Y-%m-%d %H:%M"))
    )
    if when.timezone is not None and not same_day:
        end = when.end.strftime("%Y-%m-%d %H:%M")
    return f"{summary!r} ({begin}–{end}{zone})"


def _structured(uid: str, calendar: str, when: _When, *, created: bool) -> dict[str, Any]:
    return {
        "uid": uid,
        "calendar": calendar,
        "created": created,
        "start": when.start.isoformat(),
        "end": when.end.isoformat(),
        "all_day": when.all_day,
        "timezone": when.timezone,
    }


# --- .ics files ----------------------------------------------------------------------------------


async def _add_to_ics(
    ctx: ToolContext, calendar: str, event: icalendar.Event, when: _When, summary: str
) -> ToolResult:
    if not calendar.lower().endswith(".ics"):
        raise ToolError(
            f"calendar={calendar!r} is neither an .ics file nor 'caldav'. Name a file ending in "
            "'.ics' under the workspace root, e.g. 'calendars/team.ics', or pass 'caldav'."
        )

    def write() -> ToolResult:
        with open_workspace(ctx) as root, root.place(calendar) as place:
            refuse_protected(place)
            if place.missing:
                raise ToolError(
                    f"There is no file or directory {place.relative.parent.as_posix()!r} under "
                    f"the root {str(root.path)!r}, and create_calendar_event does not create "
                    "directories. Name an .ics file in an existing directory, e.g. 'team.ics'."
                )
            return _write_ics(place, event, when, summary)

    return await anyio.to_thread.run_sync(write)


def _write_ics(place: Placement, event: icalendar.Event, when: _When, summary: str) -> ToolResult:
    shown = place.shown
    uid = str(event["UID"])
    with _ICS_LOCK:
        existing = _existing_ics(place)
        if existing is None or not existing.strip():
            data = _new_calendar(event)
        else:
            parsed = _parse_ics(existing, shown)
            found = _event_with_uid(parsed, uid)
            if found is not None:
                return _already_there(found, shown, uid, when)
            data = _inserted(existing, parsed, event, shown)
        write_atomically(place, data)
    text = f"Added {_describe(summary, when)} to {shown} with UID {uid}."
    return ToolResult(text, structured=_structured(uid, shown, when, created=True))


def _existing_ics(place: Placement) -> bytes | None:
    """The calendar file's bytes, read in its directory's descriptor; None if it is new."""
    file = open_existing(place)
    if file is None:
        return None
    with file:
        file.regular_file(
            limit=MAX_ICS_BYTES,
            not_regular="{shown!r} is not a regular file. Name an .ics file, e.g. "
            "'calendars/team.ics'.",
            too_big="{shown} has {size:,} bytes, over the {limit:,}-byte limit for a calendar "
            "file this tool rewrites. Use another (new) .ics file.",
        )
        return file.read_bytes()


def _parse_ics(data: bytes, shown: str) -> icalendar.Calendar:
    try:
        parsed = icalendar.Calendar.from_ical(data)
    except ValueError as exc:
        raise ToolError(
            f"{shown} is not a valid iCalendar file ({exc}), so no event was added to it. "
            "Fix the file, or name another .ics file."
        ) from exc
    if not isinstance(parsed, icalendar.Calendar):
        raise ToolError(
            f"{shown} holds several calendars or no VCALENDAR, so no event was added to it. "
            "Name a file with one VCALENDAR."
        )
    return parsed


def _event_with_uid(parsed: icalendar.Calendar, uid: str) -> icalendar.Event | None:
    for component in parsed.walk("VEVENT"):
        if str(component.get("UID", "")) == uid:
            assert isinstance(component, icalendar.Event)
            return component
    return None


def _already_there(found: icalendar.Event, shown: str, uid: str, when: _When) -> ToolResult:
    title = str(found.get("SUMMARY", "(no title)"))
    start = found.get("DTSTART")
    at = start.dt.isoformat() if start is not None else "?"
    text = (
        f"{shown} already holds an event with UID {uid}: {title!r} starting {at}. Nothing was "
        "added (the same event is never added twice). To add a different event, use another "
        "idempotency_key or uid."
    )
    structured = _structured(uid, shown, when, created=False)
    structured["existing"] = {"summary": title, "start": at}
    return ToolResult(text, structured=structured)


def _new_calendar(event: icalendar.Event) -> bytes:
    calendar = icalendar.Calendar()
    calendar.add("prodid", _PRODID)
    calendar.add("version", "2.0")
    calendar.add_component(event)
    calendar.add_missing_timezones()
    return bytes(calendar.to_ical())


def _inserted(
    existing: bytes, parsed: icalendar.Calendar, event: icalendar.Event, shown: str
) -> bytes:
    """`existing` with the event (and a VTIMEZONE it needs) before its last END:VCALENDAR."""
    at = existing.rfind(b"END:VCALENDAR")
    if at == -1 or (at > 0 and existing[at - 1 : at] not in (b"\n", b"\r")):
        raise ToolError(
            f"{shown} has no END:VCALENDAR line, so there is nowhere to add the event. Fix the "
            "file, or name another .ics file."
        )
    known = {str(tz.get("TZID")) for tz in parsed.walk("VTIMEZONE")}
    block = b""
    for tzid in sorted(_tzids(event) - known):
        block += bytes(icalendar.Timezone.from_tzid(tzid).to_ical())
    block += bytes(event.to_ical())
    if b"\r\n" not in existing:
        block = block.replace(b"\r\n", b"\n")  # keep the file's own line endings
    return existing[:at] + block + existing[at:]


def _tzids(event: icalendar.Event) -> set[str]:
    found = set()
    for name in ("DTSTART", "DTEND"):
        tzid = event[name].params.get("TZID") if name in event else None
        if tzid:
            found.add(str(tzid))
    return found


# --- CalDAV --------------------------------------------------------------------------------------


async def _put_caldav(
    services: Services,
    settings: CalendarWriteSettings,
    event: icalendar.Event,
    when: _When,
    summary: str,
) -> ToolResult:
    if settings.caldav_url is None:
        raise ToolError(
            "calendar='caldav' needs a CalDAV calendar, and none is configured (caldav_url in "
            "the calendar settings). Name an .ics file under the workspace instead, or ask the "
            "operator to configure one."
        )
    auth: httpx2.BasicAuth | None = None
    if settings.username is not None:
        password = ""
        if settings.password_env is not None:
            found = os.environ.get(settings.password_env)
            if found is None:
                raise ToolError(
                    f"The CalDAV password is read from the environment variable "
                    f"{settings.password_env!r}, which is not set. Set it where the server runs "
                    "(or change password_env in the calendar settings)."
                )
            password = found
        auth = httpx2.BasicAuth(settings.username, password)
    uid = str(event["UID"])
    url = settings.caldav_url.rstrip("/") + "/" + quote(uid, safe="") + ".ics"
    body = _new_calendar(event)
    errors = _caldav_errors(settings, url)
    try:
        async with http_client(services, timeout_seconds=settings.timeout_seconds) as client:
            response = await client.put(
                url,
                content=body,
                auth=auth or httpx2.USE_CLIENT_DEFAULT,
                headers={"Content-Type": "text/calendar; charset=utf-8", "If-None-Match": "*"},
            )
    except (httpx2.HTTPError, httpx2.InvalidURL) as exc:
        raise errors.for_exception(exc) from exc
    status = response.status_code
    structured = _structured(uid, CALDAV, when, created=status in (200, 201, 204))
    structured["href"] = url
    if status in (200, 201, 204):
        text = f"Added {_describe(summary, when)} to the CalDAV calendar with UID {uid} ({url})."
        return ToolResult(text, structured=structured)
    if status == 412:
        text = (
            f"The CalDAV calendar already holds an event with UID {uid} ({url}). Nothing was "
            "added (the same event is never added twice). To add a different event, use "
            "another idempotency_key or uid."
        )
        return ToolResult(text, structured=structured)
    raise errors.for_status(response)


def _caldav_errors(settings: CalendarWriteSettings, url: str) -> HttpErrors:
    """How a failed PUT is explained; a repeat is safe, since an existing event answers 412."""
    missing = "The calendar collection does not exist; check caldav_url in the settings."
    login = "The server refused the login; check username and password_env in the settings."
    return HttpErrors(
        target=f"the CalDAV server at {settings.caldav_url} (PUT {url})",
        timeout_seconds=settings.timeout_seconds,
        check="No event was added; check caldav_url in the settings and the network.",
        retry="Wait a minute, then try again with the same idempotency_key or uid: an event "
        "that exists is found, not added twice.",
        changes=True,
        status_advice={401: login, 403: login, 404: missing, 409: missing},
        refused="The server refused the event; check caldav_url and the event's fields.",
    )


CALENDAR_WRITE_TOOLS: tuple[Tool, ...] = (create_calendar_event,)
