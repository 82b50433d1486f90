"""calendar_events on .ics files under a root, and on ICS and CalDAV servers.

The servers are one handler of `httpx2.Request`s that answers in-process through a mock
transport; one test serves it on a real socket of 127.0.0.1 and one asks a closed port.
"""

from __future__ import annotations

import base64
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import pytest
from pydantic import SecretStr

from loopback_http import in_process, serving_handler
from tool_services import tool_services
from wakeful.errors import ToolError
from wakeful.services import Services
from wakeful.toolkits.perception.calendar import (
    CALENDAR_TOOLS,
    CalendarSettings,
    CalendarSource,
    calendar_events,
)
from wakeful.tools.http import HttpSettings
from wakeful.tools.lint import lint_tool
from wakeful.tools.spec import ToolContext, ToolResult

DATA = Path(__file__).parent / "data_fixtures"
ICS = (DATA / "calendar_personal.ics").read_text()
WEEK = {"start": "2024-05-06T00:00:00+02:00", "end": "2024-05-11T00:00:00+02:00"}


@dataclass
class CalendarServer:
    """ICS files and a CalDAV collection, and the requests they got."""

    base: str = ""
    requests: list[tuple[str, str, httpx2.Headers, bytes]] = field(default_factory=list)

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        method, path = request.method, request.url.path
        self.requests.append((method, path, request.headers, request.content))
        if (method, path) == ("GET", "/personal.ics"):
            return answer(200, "text/calendar", ICS.encode())
        if (method, path) == ("GET", "/broken.ics"):
            return answer(200, "text/calendar", b"<html>login</html>")
        if (method, path) == ("GET", "/private.ics"):
            wanted = "Basic " + base64.b64encode(b"ada:secret").decode()
            if request.headers.get("Authorization") == wanted:
                return answer(200, "text/calendar", ICS.encode())
            return answer(401, "text/plain", b"Unauthorized")
        if (method, path) == ("GET", "/error.ics"):
            return answer(500, "text/plain", b"database down")
        if (method, path) == ("REPORT", "/dav/work/"):
            return answer(207, "application/xml; charset=utf-8", multistatus(ICS))
        return answer(404, "text/plain", b"Not Found")


def answer(status: int, kind: str, body: bytes) -> httpx2.Response:
    return httpx2.Response(status, headers={"Content-Type": kind}, content=body)


def multistatus(ics: str) -> bytes:
    escaped = ics.replace("&", "&amp;").replace("<", "&lt;")
    return (
        '<?xml version="1.0" encoding="utf-8"?>\n'
        '<d:multistatus xmlns:d="DAV:" xmlns:c="urn:ietf:params:xml:ns:caldav">'
        "<d:response><d:href>/dav/work/1.ics</d:href><d:propstat><d:prop>"
        f"<c:calendar-data>{escaped}</c:calendar-data>"
        "</d:prop><d:status>HTTP/1.1 200 OK</d:status></d:propstat></d:response>"
        "</d:multistatus>"
    ).encode()


@pytest.fixture
def server() -> CalendarServer:
    return CalendarServer(base="http://calendar.test")


def sources(base: str) -> CalendarSettings:
    return CalendarSettings(
        sources={
            "personal": CalendarSource(url=f"{base}/personal.ics"),
            "work": CalendarSource(url=f"{base}/dav/work/", kind="caldav"),
            "private": CalendarSource(
                url=f"{base}/private.ics", username="ada", password=SecretStr("secret")
            ),
            "locked": CalendarSource(url=f"{base}/private.ics"),
            "broken": CalendarSource(url=f"{base}/broken.ics"),
            "failing": CalendarSource(url=f"{base}/error.ics"),
            "gone": CalendarSource(url=f"{base}/gone.ics"),
            "nowhere": CalendarSource(url="http://127.0.0.1:9/x.ics"),
        }
    )


@pytest.fixture
async def services(tmp_path: Path, server: CalendarServer) -> AsyncIterator[Services]:
    (tmp_path / "calendars").mkdir()
    shutil.copy(DATA / "calendar_personal.ics", tmp_path / "calendars" / "personal.ics")
    (tmp_path / "calendars" / "bad.ics").write_text("BEGIN:VCALENDAR\nthis is not ical\n")
    (tmp_path / "notes.txt").write_text("not a calendar")
    (tmp_path / "calendars" / "folder.ics").mkdir()
    async with tool_services(tmp_path) as (found, _events):
        found.settings[CalendarSettings] = sources(server.base)
        found.settings[HttpSettings] = HttpSettings(in_process(server.handle, server.base))
        yield found


@pytest.fixture
async def served(services: Services, server: CalendarServer) -> AsyncIterator[CalendarServer]:
    """`server` on a real socket of 127.0.0.1, and `services` sending to it there."""
    del services.settings[HttpSettings]
    async with serving_handler(server.handle) as server.base:
        services.settings[CalendarSettings] = sources(server.base)
        yield server


async def call(services: Services, **arguments: Any) -> ToolResult:
    ctx = ToolContext(session="s", call_id="c1", tool_name="calendar_events", services=services)
    return await calendar_events.run(arguments, ctx)


async def fails(services: Services, **arguments: Any) -> str:
    with pytest.raises(ToolError) as caught:
        await call(services, **arguments)
    return str(caught.value)


def test_calendar_events_meets_the_description_standard() -> None:
    assert (calendar_events,) == CALENDAR_TOOLS
    assert lint_tool(calendar_events) == []


def summaries(result: ToolResult) -> list[tuple[str, str]]:
    return [(e["start"], e["summary"]) for e in result.structured["events"]]


EXPECTED_WEEK = [
    ("2024-05-06T09:30:00+02:00", "Team stand-up"),
    ("2024-05-07T09:30:00+02:00", "Team stand-up"),
    ("2024-05-07T15:00:00+02:00", "Dentist"),
    ("2024-05-09", "Ascension Day"),
    ("2024-05-09T09:30:00+02:00", "Team stand-up"),
    ("2024-05-10T09:30:00+02:00", "Team stand-up"),
]


@pytest.mark.anyio
async def test_an_ics_file_under_the_root_expands_recurring_events(services: Services) -> None:
    result = await call(services, source="calendars/personal.ics", **WEEK)
    # The stand-up repeats on weekdays; 8 May is excluded (EXDATE). Sorted by start.
    assert summaries(result) == EXPECTED_WEEK
    assert result.content.startswith("calendars/personal.ics: 6 events from 2024-05-06T00:00")
    dentist = result.structured["events"][2]
    assert dentist["location"] == "Hauptstraße 5"
    assert dentist["end"] == "2024-05-07T16:00:00+02:00"
    assert dentist["description"] == "Bring the insurance card." and not dentist["recurring"]
    assert result.structured["events"][0]["recurring"]
    assert "2024-05-09 – 2024-05-10 (all day, end exclusive)  Ascension Day" in result.content
    assert "Team stand-up @ Room 4  (recurring)" in result.content


@pytest.mark.anyio
async def test_times_are_shown_in_the_zone_of_start(services: Services) -> None:
    result = await call(
        services,
        source="calendars/personal.ics",
        start="2024-05-07T00:00:00Z",
        end="2024-05-07T23:00:00Z",
    )
    assert summaries(result) == [
        ("2024-05-07T07:30:00+00:00", "Team stand-up"),
        ("2024-05-07T13:00:00+00:00", "Dentist"),
    ]


@pytest.mark.anyio
async def test_pages_continue_with_a_cursor(services: Services) -> None:
    first = await call(services, source="calendars/personal.ics", limit=4, **WEEK)
    assert len(first.structured["events"]) == 4 and first.structured["total"] == 6
    cursor = first.structured["next_cursor"]
    assert f"More: pass cursor={cursor!r}" in first.content
    rest = await call(services, source="calendars/personal.ics", limit=4, cursor=cursor, **WEEK)
    assert summaries(first) + summaries(rest) == EXPECTED_WEEK
    assert rest.structured["next_cursor"] is None
    message = await fails(services, source="personal", cursor=cursor, **WEEK)
    assert "different calendar_events call" in message
    assert "not a cursor" in await fails(services, source="personal", cursor="!!", **WEEK)


@pytest.mark.anyio
async def test_an_empty_window_says_so(services: Services) -> None:
    result = await call(
        services,
        source="calendars/personal.ics",
        start="2030-01-01T00:00:00Z",
        end="2030-01-02T00:00:00Z",
    )
    assert result.content.startswith("calendars/personal.ics: no events from 2030-01-01")
    assert result.structured == {"events": [], "total": 0, "next_cursor": None}


@pytest.mark.anyio
async def test_a_configured_ics_url_and_basic_auth(
    services: Services, served: CalendarServer
) -> None:
    """Over a real socket, so the whole network path is covered once."""
    result = await call(services, source="personal", **WEEK)
    assert summaries(result) == EXPECTED_WEEK
    private = await call(services, source="private", **WEEK)
    assert summaries(private) == EXPECTED_WEEK
    assert "HTTP 401" in await fails(services, source="locked", **WEEK)


@pytest.mark.anyio
async def test_a_caldav_collection_is_asked_for_the_window(
    services: Services, server: CalendarServer
) -> None:
    result = await call(services, source="work", **WEEK)
    assert summaries(result) == EXPECTED_WEEK
    method, path, headers, body = server.requests[-1]
    assert (method, path, headers["Depth"]) == ("REPORT", "/dav/work/", "1")
    assert b'<c:time-range start="20240505T220000Z" end="20240510T220000Z"/>' in body


@pytest.mark.anyio
async def test_remote_failures_are_named(services: Services) -> None:
    assert "HTTP 500" in await fails(services, source="failing", **WEEK)
    assert "HTTP 404" in await fails(services, source="gone", **WEEK)
    assert "not a valid iCalendar" in await fails(services, source="broken", **WEEK)
    del services.settings[HttpSettings]  # a real connection to a closed port
    assert "Could not connect to the calendar 'nowhere'" in await fails(
        services, source="nowhere", **WEEK
    )


@pytest.mark.anyio
async def test_bad_times_are_refused(services: Services) -> None:
    source = "calendars/personal.ics"
    naive = await fails(services, source=source, start="2024-05-06T00:00:00", end=WEEK["end"])
    assert "has no time zone" in naive
    assert "not an RFC 3339" in await fails(services, source=source, start="monday", end="x")
    backwards = await fails(services, source=source, start=WEEK["end"], end=WEEK["start"])
    assert "is not after start" in backwards
    long = await fails(
        services, source=source, start="2020-01-01T00:00:00Z", end="2030-01-01T00:00:00Z"
    )
    assert "longer than two years" in long
    assert "`start`" in await fails(services, source=source, start=20240506, end=WEEK["end"])
    assert "`end` is required" in await fails(services, source=source, start=WEEK["start"])
    assert "`limit`" in await fails(services, source=source, limit=10**6, **WEEK)


@pytest.mark.anyio
async def test_a_window_at_the_start_of_time_is_refused(services: Services) -> None:
    # Found by test_every_tool's edge values: expanding recurring events raised OverflowError.
    window = {"start": "0001-01-01T00:00:00Z", "end": "0001-01-02T00:00:00Z"}
    message = await fails(services, source="calendars/personal.ics", **window)
    assert "too close to year 1 or year 9999" in message


@pytest.mark.anyio
async def test_bad_sources_are_refused(services: Services) -> None:
    assert "not a valid iCalendar" in await fails(services, source="calendars/bad.ics", **WEEK)
    unknown = await fails(services, source="holidays", **WEEK)
    assert "neither a configured calendar" in unknown and "personal" in unknown
    assert "neither a configured" in await fails(services, source="notes.txt", **WEEK)
    assert "outside" in (await fails(services, source="../../etc/x.ics", **WEEK)).lower()
    assert await fails(services, source="calendars/missing.ics", **WEEK)
    assert "is not a file" in await fails(services, source="calendars/folder.ics", **WEEK)
