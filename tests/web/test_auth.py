"""Who may use the web console: every route without the token, with a wrong Origin, Host or
CSRF token, against the real app over a real runtime. Written before the routes themselves."""

from __future__ import annotations

from pathlib import Path

import pytest
from web_harness import ORIGIN, TOKEN, web_console

from wakeful.models import ScriptedModel
from wakeful.web.auth import COOKIE

pytestmark = pytest.mark.anyio

GETS = [
    "/",
    "/static/console.js",
    "/static/console.css",
    "/events",
    "/api/messages",
    "/api/state",
    "/api/trajectory",
]
POSTS = [
    "/api/send",
    "/api/stop",
    "/api/approvals/ab12",
    "/api/inputs/ab12",
    "/api/tasks/t1/cancel",
    "/api/timers/t1/cancel",
    "/api/action",
]


async def test_every_route_refuses_a_request_without_the_token(tmp_path: Path) -> None:
    async with web_console(ScriptedModel([]), tmp_path) as console:
        for path in GETS:
            response = await console.client.get(path)
            assert response.status_code == 401, path
            assert "token" in response.text
        for path in POSTS:
            response = await console.client.post(path, json={"text": "hi"}, headers=console.csrf)
            assert response.status_code == 401, path
        # A wrong token is no better, in the cookie or as a bearer token.
        wrong = await console.client.get("/api/state", headers={"authorization": "Bearer nope"})
        assert wrong.status_code == 401
        console.client.cookies.set(COOKIE, "nope")
        assert (await console.client.get("/api/state")).status_code == 401
        assert rt_events(console) == []


def rt_events(console: object) -> list[object]:
    return list(console.runtime.outbox.sent)


async def test_the_printed_url_logs_in_with_a_strict_http_only_cookie(tmp_path: Path) -> None:
    async with web_console(ScriptedModel([]), tmp_path) as console:
        refused = await console.client.get("/?token=wrong")
        assert refused.status_code == 401
        login = await console.client.get(f"/?token={TOKEN}")
        assert login.status_code == 303 and login.headers["location"] == "/"
        cookie = login.headers["set-cookie"]
        assert f"{COOKIE}={TOKEN}" in cookie
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
        page = await console.client.get("/")
        assert page.status_code == 200
        # The page carries the CSRF token, never the login token.
        assert TOKEN not in page.text
        assert console.web.auth.csrf_token in page.text
        csp = page.headers["content-security-policy"]
        assert "default-src 'self'" in csp and "script-src 'self';" in csp
        assert "frame-ancestors 'none'" in csp
        assert "<script>" not in page.text  # no inline script: the CSP would block it anyway
        assert page.headers["x-content-type-options"] == "nosniff"


async def test_a_bearer_token_works_for_scripts(tmp_path: Path) -> None:
    async with web_console(ScriptedModel([]), tmp_path) as console:
        response = await console.client.get(
            "/api/state", headers={"authorization": f"Bearer {TOKEN}"}
        )
        assert response.status_code == 200
        assert response.json()["approvals"] == []


async def test_changes_need_the_consoles_origin_and_csrf_token(tmp_path: Path) -> None:
    async with web_console(ScriptedModel([]), tmp_path) as console:
        console.client.cookies.set(COOKIE, TOKEN)
        csrf = console.web.auth.csrf_token
        attempts = {
            "another site's page": {"origin": "https://evil.example", "x-csrf-token": csrf},
            "no Origin": {"x-csrf-token": csrf},
            "no CSRF token": {"origin": ORIGIN},
            "a wrong CSRF token": {"origin": ORIGIN, "x-csrf-token": "0" * 64},
            "a cross-site fetch": {
                "origin": ORIGIN,
                "x-csrf-token": csrf,
                "sec-fetch-site": "cross-site",
            },
        }
        for what, headers in attempts.items():
            for path in POSTS:
                response = await console.client.post(path, json={"text": "hi"}, headers=headers)
                assert response.status_code == 403, (what, path)
        # Nothing reached the agent.
        assert console.runtime.store is not None
        assert await console.runtime.store.recent_events() == []


async def test_the_event_stream_refuses_another_origin(tmp_path: Path) -> None:
    async with web_console(ScriptedModel([]), tmp_path) as console:
        console.client.cookies.set(COOKIE, TOKEN)
        response = await console.client.get("/events", headers={"origin": "https://evil.example"})
        assert response.status_code == 403
        response = await console.client.get("/events", headers={"sec-fetch-site": "cross-site"})
        assert response.status_code == 403


async def test_a_foreign_host_is_refused_against_dns_rebinding(tmp_path: Path) -> None:
    async with web_console(ScriptedModel([]), tmp_path) as console:
        console.client.cookies.set(COOKIE, TOKEN)
        response = await console.client.get("/api/state", headers={"host": "evil.example:8787"})
        assert response.status_code == 403
        login = await console.client.get(f"/?token={TOKEN}", headers={"host": "evil.example"})
        assert login.status_code == 403 and "set-cookie" not in login.headers


async def test_an_oversized_body_is_refused_before_it_is_read(tmp_path: Path) -> None:
    async with web_console(ScriptedModel([]), tmp_path) as console:
        console.client.cookies.set(COOKIE, TOKEN)
        response = await console.client.post(
            "/api/send", content=b"x" * 1_000_001, headers=console.csrf
        )
        assert response.status_code == 413
        assert "at most 1,000,000 bytes" in response.json()["error"]
        assert console.runtime.store is not None
        assert await console.runtime.store.recent_events() == []
