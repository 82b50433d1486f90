"""create_calendar_event into .ics files in the workspace and a CalDAV-like server.

The CalDAV server is reached over a real socket on 127.0.0.1 by one test, and in-process through
a mock transport where the wire is not the point.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import icalendar
import pytest
from world_servers import Answer, RecordingHTTP, Seen, closed_port, serve_http, world_services

from tool_services import call
from tool_services import refused as refused_by
from wakeful.services import Services
from wakeful.toolkits.execution.calendar_events import (
    CALENDAR_WRITE_TOOLS,
    create_calendar_event,
)
from wakeful.toolkits.execution.settings import CalendarWriteSettings
from wakeful.tools.lint import lint_tool

pytestmark = pytest.mark.anyio

EXISTING = (
    b"BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//Someone//Else//EN\r\n"
    b"BEGIN:VEVENT\r\nUID:old-1@example.com\r\nDTSTAMP:20240101T000000Z\r\n"
    b"DTSTART:20240105T090000Z\r\nDTEND:20240105T100000Z\r\n"
    b"SUMMARY:Caf\xc3\xa9 \xe2\x80\x9cstand-up\xe2\x80\x9d\r\nX-CUSTOM:kept as is\r\n"
    b"END:VEVENT\r\nEND:VCALENDAR\r\n"
)

EVENT: dict[str, Any] = {
    "calendar": "team.ics",
    "summary": "Release “review”",
    "start": "2025-06-03T14:00",
    "end": "2025-06-03T15:00",
    "timezone": "Europe/Berlin",
    "location": "Room 4.12",
    "description": "Agenda: blockers.",
    "attendees": ["Ana Lima <ana@example.com>", "bo@example.com"],
    "idempotency_key": "review-1",
}


@pytest.fixture
async def services(tmp_path: Path) -> AsyncIterator[Services]:
    async with world_services(tmp_path) as services:
        yield services


def events(path: Path) -> list[icalendar.Event]:
    calendar = icalendar.Calendar.from_ical(path.read_bytes())
    return [e for e in calendar.walk("VEVENT") if isinstance(e, icalendar.Event)]


async def refused(services: Services, **arguments: Any) -> str:
    return await refused_by(services, create_calendar_event, **arguments)


def test_the_tool_meets_the_description_standard() -> None:
    assert [t.name for t in CALENDAR_WRITE_TOOLS] == ["create_calendar_event"]
    assert lint_tool(create_calendar_event) == []
    assert create_calendar_event.spec.annotations.idempotent is True


async def test_a_new_file_gets_the_event_with_its_time_zone(
    services: Services, tmp_path: Path
) -> None:
    result = await call(services, create_calendar_event, **EVENT)
    assert not result.is_error
    assert result.content.startswith(
        "Added 'Release “review”' (2025-06-03 14:00–15:00 Europe/Berlin) to team.ics"
    )
    path = tmp_path / "root" / "team.ics"
    [event] = events(path)
    assert str(event["SUMMARY"]) == "Release “review”"
    assert str(event["UID"]) == result.structured["uid"]
    start = event["DTSTART"].dt
    assert start.isoformat() == "2025-06-03T14:00:00+02:00"
    assert str(start.tzinfo) == "Europe/Berlin"
    assert [str(a) for a in event.get("ATTENDEE")] == [
        "mailto:ana@example.com",
        "mailto:bo@example.com",
    ]
    assert b"TZID:Europe/Berlin" in path.read_bytes()  # a VTIMEZONE for other readers


async def test_the_same_event_twice_is_not_duplicated(services: Services, tmp_path: Path) -> None:
    first = await call(services, create_calendar_event, **EVENT)
    second = await call(services, create_calendar_event, **EVENT)
    assert "nothing ran again" in second.content
    path = tmp_path / "root" / "team.ics"
    assert len(events(path)) == 1
    # Without the ledger (a given uid, no key), the file itself is checked for the UID.
    by_uid = EVENT | {"idempotency_key": None, "uid": first.structured["uid"]}
    third = await call(services, create_calendar_event, **by_uid)
    assert third.structured["created"] is False
    assert "already holds an event with UID" in third.content
    assert len(events(path)) == 1


async def test_an_existing_calendar_keeps_its_bytes(services: Services, tmp_path: Path) -> None:
    path = tmp_path / "root" / "team.ics"
    path.write_bytes(EXISTING)
    all_day = {"calendar": "team.ics", "summary": "Holiday", "start": "2025-12-24"}
    result = await call(services, create_calendar_event, **all_day, uid="hol-1@example.com")
    assert result.content.startswith("Added 'Holiday' (2025-12-24, all day)")
    data = path.read_bytes()
    end = EXISTING.index(b"END:VCALENDAR")
    assert data.startswith(EXISTING[:end])
    assert data.endswith(b"END:VCALENDAR\r\n")
    old, new = events(path)
    assert str(old["X-CUSTOM"]) == "kept as is"
    assert new["DTSTART"].dt == dt.date(2025, 12, 24)
    assert new["DTEND"].dt == dt.date(2025, 12, 25)
    again = await call(services, create_calendar_event, **all_day, uid="old-1@example.com")
    assert again.structured["created"] is False
    assert "'Café “stand-up”'" in again.content


async def test_a_file_with_lf_endings_keeps_them(services: Services, tmp_path: Path) -> None:
    path = tmp_path / "root" / "lf.ics"
    path.write_bytes(EXISTING.replace(b"\r\n", b"\n"))
    await call(services, create_calendar_event, **(EVENT | {"calendar": "lf.ics"}))
    assert b"\r\n" not in path.read_bytes()
    assert len(events(path)) == 2


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"end": "2025-06-03T13:00"}, "is not after start"),
        ({"end": None}, "end is needed too"),
        ({"end": "2025-06-04"}, "is a date"),
        ({"timezone": "Mars/Olympus"}, "not an IANA time zone"),
        ({"timezone": None}, "no offset and no timezone"),
        ({"start": "2025-06-03T14:00+02:00"}, "has an offset and timezone"),
        ({"start": "June 3rd 2025"}, "not an ISO 8601"),
        ({"start": "2025-06-03", "timezone": None}, "has a time"),
        ({"start": "2025-06-03", "end": "2025-06-03T15:00"}, "all-day events have no time zone"),
        ({"end": "2027-06-03T15:00"}, "more than 366 days"),
        ({"start": "9999-12-31", "end": None, "timezone": None}, "no day after"),
        ({"attendees": ["not-an-address"]}, "is not an email address"),
        ({"calendar": "notes.txt"}, "neither an .ics file"),
        ({"calendar": "../escape.ics"}, "outside the root"),
        ({"calendar": "missing/dir.ics"}, "There is no file"),
        ({"calendar": ".git/hooks/team.ics"}, "'.git' is protected"),
        ({"calendar": ".wakeful/team.ics"}, "'.wakeful' is protected"),
        ({"idempotency_key": None}, "needs an idempotency_key"),
        ({"uid": "a b", "idempotency_key": None}, "cannot be used"),
        ({"summary": ""}, "`summary`"),
        ({"attendees": "ana@example.com"}, "`attendees`"),
        ({"description": "d" * 20_001}, "`description`"),
        ({"calendar": "caldav"}, "none is configured"),
    ],
)
async def test_bad_input_is_refused_and_nothing_is_written(
    services: Services, tmp_path: Path, arguments: dict[str, Any], expected: str
) -> None:
    message = await refused(services, **(EVENT | arguments))
    assert expected in message
    assert sorted(p.name for p in (tmp_path / "root").iterdir()) == []


async def test_a_broken_ics_file_is_left_alone(services: Services, tmp_path: Path) -> None:
    path = tmp_path / "root" / "team.ics"
    path.write_bytes(b"this is not a calendar")
    assert "not a valid iCalendar file" in await refused(services, **EVENT)
    assert path.read_bytes() == b"this is not a calendar"


# --- CalDAV --------------------------------------------------------------------------------------


class FakeCalDAV(RecordingHTTP):
    """A calendar collection at /cal/: PUT with If-None-Match: * creates once, then 412."""

    def __init__(self) -> None:
        super().__init__()
        self.stored: dict[str, bytes] = {}

    def route_put(self, path: str) -> None:
        self.routes[("PUT", path)] = self._put

    def _put(self, seen: Seen) -> Answer:
        if seen.headers.get("authorization") is None:
            return Answer(401, b"", content_type="text/plain")
        if seen.path in self.stored and seen.headers.get("if-none-match") == "*":
            return Answer(412, b"", content_type="text/plain")
        self.stored[seen.path] = seen.body
        return Answer(201, b"", content_type="text/plain")


async def test_caldav_puts_once_and_then_finds_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WAKEFUL_TEST_DAV_PASSWORD", "pw")
    server = FakeCalDAV()
    server.route_put("/cal/hol-1@example.com.ics")
    async with serve_http(server):
        settings = CalendarWriteSettings(
            caldav_url=f"{server.url}/cal/",
            username="ana",
            password_env="WAKEFUL_TEST_DAV_PASSWORD",
            timeout_seconds=5,
        )
        arguments = {
            "calendar": "caldav",
            "summary": "Holiday",
            "start": "2025-12-24",
            "uid": "hol-1@example.com",
        }
        async with world_services(tmp_path, settings) as services:
            first = await call(services, create_calendar_event, **arguments)
            second = await call(services, create_calendar_event, **arguments)
            server.routes[("PUT", "/cal/other.ics")] = Answer(500, b"", content_type="text/plain")
            failed = await refused(services, **(arguments | {"uid": "other"}))
            missing = await refused(services, **(arguments | {"uid": "nowhere"}))
    assert first.structured["created"] is True
    assert second.structured["created"] is False
    assert "already holds an event with UID hol-1@example.com" in second.content
    put = server.seen[0]
    assert put.headers["if-none-match"] == "*"
    assert put.headers["content-type"] == "text/calendar; charset=utf-8"
    [event] = events_of(put.body)
    assert str(event["UID"]) == "hol-1@example.com"
    assert "HTTP 500" in failed and "try again" in failed
    assert "HTTP 404" in missing and "collection does not exist" in missing


async def test_caldav_login_and_reachability_failures_are_explained(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = FakeCalDAV()
    server.route_put("/cal/x.ics")
    arguments = {"calendar": "caldav", "summary": "S", "start": "2025-12-24", "uid": "x"}
    anonymous = CalendarWriteSettings(caldav_url=f"{server.url}/cal")
    async with world_services(tmp_path, anonymous, server.settings) as services:
        assert "refused the login" in await refused(services, **arguments)
    down = CalendarWriteSettings(caldav_url=f"http://127.0.0.1:{closed_port()}/cal")
    no_password = CalendarWriteSettings(
        caldav_url=f"http://127.0.0.1:{closed_port()}/cal",
        username="ana",
        password_env="WAKEFUL_TEST_NO_SUCH_VAR",
    )
    async with world_services(tmp_path, down) as services:
        assert "Could not connect to the CalDAV server" in await refused(services, **arguments)
        services.settings[CalendarWriteSettings] = no_password
        assert "'WAKEFUL_TEST_NO_SUCH_VAR', which is not set" in await refused(
            services, **arguments
        )


def events_of(data: bytes) -> list[icalendar.Event]:
    calendar = icalendar.Calendar.from_ical(data)
    return [e for e in calendar.walk("VEVENT") if isinstance(e, icalendar.Event)]
