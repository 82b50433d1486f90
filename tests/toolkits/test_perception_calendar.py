"""calendar_events on .ics files under a root, and on ICS and CalDAV servers on 127.0.0.1."""

from __future__ import annotations

import base64
import shutil
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from tool_services import tool_services
from wakeful.errors import ToolError
from wakeful.services import Services
from wakeful.toolkits.perception.calendar import (
    CALENDAR_TOOLS,
    CalendarSettings,
    CalendarSource,
    calendar_events,
)
from wakeful.tools.lint import lint_tool
from wakeful.tools.spec import ToolContext, ToolResult

DATA = Path(__file__).parent / "data_fixtures"
ICS = (DATA / "calendar_personal.ics").read_text()
WEEK = {"start": "2024-05-06T00:00:00+02:00", "end": "2024-05-11T00:00:00+02:00"}


@dataclass
class CalendarServer:
    base: str = ""
    requests: list[tuple[str, str, dict[str, str], bytes]] = field(default_factory=list)


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


@pytest.fixture(scope="module")
def server() -> Iterator[CalendarServer]:
    state = CalendarServer()

    class Handler(BaseHTTPRequestHandler):
        def answer(self, status: int, kind: str, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def record(self) -> bytes:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            state.requests.append((self.command, self.path, dict(self.headers), body))
            return body

        def do_GET(self) -> None:
            self.record()
            if self.path == "/personal.ics":
                self.answer(200, "text/calendar", ICS.encode())
            elif self.path == "/broken.ics":
                self.answer(200, "text/calendar", b"<html>login</html>")
            elif self.path == "/private.ics":
                wanted = "Basic " + base64.b64encode(b"ada:secret").decode()
                if self.headers.get("Authorization") == wanted:
                    self.answer(200, "text/calendar", ICS.encode())
                else:
                    self.answer(401, "text/plain", b"Unauthorized")
            elif self.path == "/error.ics":
                self.answer(500, "text/plain", b"database down")
            else:
                self.answer(404, "text/plain", b"Not Found")

        def do_REPORT(self) -> None:
            self.record()
            if self.path == "/dav/work/":
                self.answer(207, "application/xml; charset=utf-8", multistatus(ICS))
            else:
                self.answer(404, "text/plain", b"Not Found")

        def log_message(self, format: str, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.base = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield state
    httpd.shutdown()
    httpd.server_close()
    thread.join()


@pytest.fixture
async def services(tmp_path: Path, server: CalendarServer) -> AsyncIterator[Services]:
    (tmp_path / "calendars").mkdir()
    shutil.copy(DATA / "calendar_personal.ics", tmp_path / "calendars" / "personal.ics")
    (tmp_path / "calendars" / "bad.ics").write_text("BEGIN:VCALENDAR\nthis is not ical\n")
    (tmp_path / "notes.txt").write_text("not a calendar")
    (tmp_path / "calendars" / "folder.ics").mkdir()
    server.requests.clear()
    async with tool_services(tmp_path) as (found, _events):
        found.settings[CalendarSettings] = CalendarSettings(
            sources={
                "personal": CalendarSource(url=f"{server.base}/personal.ics"),
                "work": CalendarSource(url=f"{server.base}/dav/work/", kind="caldav"),
                "private": CalendarSource(
                    url=f"{server.base}/private.ics", username="ada", password=SecretStr("secret")
                ),
                "locked": CalendarSource(url=f"{server.base}/private.ics"),
                "broken": CalendarSource(url=f"{server.base}/broken.ics"),
                "failing": CalendarSource(url=f"{server.base}/error.ics"),
                "gone": CalendarSource(url=f"{server.base}/gone.ics"),
                "nowhere": CalendarSource(url="http://127.0.0.1:9/x.ics"),
            }
        )
        yield found


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
    services: Services, server: CalendarServer
) -> None:
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
    assert "could not reach the calendar 'nowhere'" in await fails(
        services, source="nowhere", **WEEK
    )
    assert "not a valid iCalendar" in await fails(services, source="broken", **WEEK)


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
async def test_bad_sources_are_refused(services: Services) -> None:
    assert "not a valid iCalendar" in await fails(services, source="calendars/bad.ics", **WEEK)
    unknown = await fails(services, source="holidays", **WEEK)
    assert "neither a configured calendar" in unknown and "personal" in unknown
    assert "neither a configured" in await fails(services, source="notes.txt", **WEEK)
    assert "outside" in (await fails(services, source="../../etc/x.ics", **WEEK)).lower()
    assert await fails(services, source="calendars/missing.ics", **WEEK)
    assert "is not a file" in await fails(services, source="calendars/folder.ics", **WEEK)
