"""call_webhook against a server that records requests: keys, precheck→confirm, failures.

The server answers in-process through a mock transport; one test sends over a real socket on
127.0.0.1 and one to a closed port, so the network path stays covered.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from world_servers import Answer, RecordingHTTP, closed_port, serve_http, world_services

from tool_services import call
from tool_services import refused as refused_by
from wakeful.services import Services
from wakeful.toolkits.execution.settings import WebhookSettings
from wakeful.toolkits.execution.webhook import WEBHOOK_TOOLS, call_webhook
from wakeful.tools.lint import lint_tool

pytestmark = pytest.mark.anyio


@pytest.fixture
def hook() -> RecordingHTTP:
    server = RecordingHTTP()
    server.routes[("POST", "/deploy")] = Answer(
        201, b'{"id": 7}', {"Location": "/deploys/7", "X-Internal": "hidden"}
    )
    return server


@pytest.fixture
async def services(tmp_path: Path, hook: RecordingHTTP) -> AsyncIterator[Services]:
    settings = WebhookSettings(timeout_seconds=5)
    async with world_services(tmp_path, settings, hook.settings) as services:
        yield services


@pytest.fixture
async def wire_services(tmp_path: Path) -> AsyncIterator[Services]:
    """Services whose requests go over real sockets."""
    async with world_services(tmp_path, WebhookSettings(timeout_seconds=5)) as services:
        yield services


async def refused(services: Services, **arguments: Any) -> str:
    return await refused_by(services, call_webhook, **arguments)


def test_the_tool_meets_the_description_standard() -> None:
    assert [t.name for t in WEBHOOK_TOOLS] == ["call_webhook"]
    assert lint_tool(call_webhook) == []
    assert "fetch_url" in call_webhook.spec.description
    assert call_webhook.spec.input_schema["properties"]["method"]["enum"] == [
        "POST",
        "PUT",
        "PATCH",
        "DELETE",
    ]


async def test_a_keyed_call_sends_once_with_the_key_header(
    wire_services: Services, hook: RecordingHTTP
) -> None:
    """Over a real socket on 127.0.0.1, so the whole network path is covered once."""
    services = wire_services
    async with serve_http(hook):
        arguments = {
            "url": f"{hook.url}/deploy",
            "json_body": {"service": "api", "note": "“ok” ✓"},
            "idempotency_key": "deploy-1",
        }
        first = await call(services, call_webhook, **arguments)
        second = await call(services, call_webhook, **arguments)
        assert len(hook.seen) == 1
        seen = hook.seen[0]
        assert seen.headers["idempotency-key"] == "deploy-1"
        assert seen.headers["content-type"] == "application/json"
        assert json.loads(seen.body) == {"service": "api", "note": "“ok” ✓"}
        assert not first.is_error
        assert first.content.startswith("HTTP 201 Created\n")
        assert "location: /deploys/7" in first.content and "x-internal" not in first.content
        assert first.structured["status"] == 201
        assert "nothing ran again" in second.content
        assert second.structured["replayed"] is True
        other = await refused(services, **(arguments | {"json_body": {"service": "web"}}))
        assert "other arguments" in other
        assert len(hook.seen) == 1


async def test_without_a_key_it_needs_precheck_then_confirm(
    services: Services, hook: RecordingHTTP
) -> None:
    arguments = {"url": f"{hook.url}/deploy", "text_body": "line 1\r\nline “2”", "method": "POST"}
    preview = await call(services, call_webhook, **arguments)
    assert hook.seen == []
    assert f"POST {hook.url}/deploy" in preview.content
    assert "Content-Type: text/plain; charset=utf-8" in preview.content
    assert "line 1\r\nline “2”" in preview.content
    token = preview.structured["confirmation_token"]
    changed = await refused(services, **(arguments | {"method": "PUT"}), confirmation_token=token)
    assert "differ" in changed and "method" in changed
    done = await call(services, call_webhook, **arguments, confirmation_token=token)
    assert not done.is_error
    assert [s.body for s in hook.seen] == ["line 1\r\nline “2”".encode()]
    assert "already used" in await refused(services, **arguments, confirmation_token=token)
    assert len(hook.seen) == 1


async def test_a_failed_status_is_an_error_and_is_not_retried(
    services: Services, hook: RecordingHTTP
) -> None:
    hook.routes[("DELETE", "/items/1")] = Answer(500, "x" * 600, content_type="text/plain")
    arguments = {"url": f"{hook.url}/items/1", "method": "DELETE"}
    token = (await call(services, call_webhook, **arguments)).structured["confirmation_token"]
    failed = await call(services, call_webhook, **arguments, confirmation_token=token)
    assert failed.is_error
    assert "answered HTTP 500 Internal Server Error" in failed.content
    assert "x" * 500 + "…" in failed.content
    assert "run the precheck again" in failed.content
    missing = await call(
        services, call_webhook, url=f"{hook.url}/nowhere", method="PATCH", idempotency_key="k-404"
    )
    assert missing.is_error and "HTTP 404" in missing.content
    assert [s.method for s in hook.seen] == ["DELETE", "PATCH"]


async def test_a_long_response_body_is_cut_visibly(services: Services, hook: RecordingHTTP) -> None:
    hook.routes[("PUT", "/big")] = Answer(200, "y" * 25_000, content_type="text/plain")
    result = await call(
        services, call_webhook, url=f"{hook.url}/big", method="PUT", idempotency_key="big-1"
    )
    assert "[body cut at 10,000 of 25,000 characters]" in result.content
    assert result.structured["body_truncated"] is True
    assert len(result.structured["body"]) == 10_000


async def test_an_unreachable_host_releases_the_key(wire_services: Services) -> None:
    services = wire_services
    url = f"http://127.0.0.1:{closed_port()}/hook"
    message = await refused(services, url=url, idempotency_key="k-down")
    assert "nothing was sent" in message and "free for a retry" in message
    message = await refused(services, url=url, idempotency_key="k-down")
    assert "free for a retry" in message  # the key was released, so it ran (and failed) again


async def test_secret_headers_come_from_the_environment_for_allowed_hosts_only(
    tmp_path: Path, hook: RecordingHTTP, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WAKEFUL_TEST_HOOK_AUTH", "Bearer s3cret")
    secret = WebhookSettings(
        allowed_hosts=("world.test",), header_env={"Authorization": "WAKEFUL_TEST_HOOK_AUTH"}
    )
    async with world_services(tmp_path, secret, hook.settings) as services:
        url = f"{hook.url}/deploy"
        preview = await call(services, call_webhook, url=url, json_body=[1, 2])
        assert "s3cret" not in preview.content
        assert "Authorization: (secret from the server's configuration)" in preview.content
        done = await call(services, call_webhook, url=url, json_body=[1, 2], idempotency_key="s1")
        assert hook.seen[0].headers["authorization"] == "Bearer s3cret"
        assert "s3cret" not in done.content
        assert "sent with configured headers: Authorization" in done.content
        elsewhere = await refused(services, url="http://localhost:1/x", idempotency_key="s2")
        assert "'localhost' is not one call_webhook may reach" in elsewhere
        overridden = await refused(services, url=url, headers={"authorization": "mine"})
        assert "set by the server's configuration" in overridden
    with pytest.raises(ValidationError, match="allowed_hosts must list"):
        WebhookSettings(header_env={"Authorization": "X"})


async def test_a_missing_secret_is_explained(tmp_path: Path) -> None:
    missing = WebhookSettings(
        allowed_hosts=("127.0.0.1",), header_env={"X-Token": "WAKEFUL_TEST_NO_SUCH_VAR"}
    )
    async with world_services(tmp_path, missing) as services:
        message = await refused(services, url="http://127.0.0.1:1/x")
    assert "'WAKEFUL_TEST_NO_SUCH_VAR', which is not set" in message


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"url": "ftp://example.com/x"}, "not a full http(s) URL"),
        ({"url": "/relative"}, "not a full http(s) URL"),
        ({"method": "GET"}, "`method`"),
        ({"json_body": {"a": 1}, "text_body": "b"}, "both json_body and text_body"),
        ({"headers": {"X-A": "1\r\nX-Injected: 1"}}, "line break"),
        ({"headers": {"Bad Name": "1"}}, "not valid"),
        ({"headers": {"X-Price": "5 €"}}, "outside ASCII"),
        ({"idempotency_key": "clé-1"}, "outside ASCII"),
        ({"headers": {"Host": "evil.example"}}, "set by the HTTP client"),
        ({"headers": "X-A: 1"}, "`headers`"),
        ({"idempotency_key": "k", "confirmation_token": "t"}, "both idempotency_key"),
        ({"idempotency_key": "x" * 201}, "`idempotency_key`"),
        ({"text_body": "x" * 1_000_001}, "`text_body`"),
        ({"json_body": {"x": "y" * 1_000_001}}, "over the limit"),
        ({"url": None}, "`url`"),
        ({"confirmation_token": "made-up"}, "unknown"),
    ],
)
async def test_bad_input_is_refused_before_anything_is_sent(
    services: Services, hook: RecordingHTTP, arguments: dict[str, Any], expected: str
) -> None:
    message = await refused(services, **({"url": f"{hook.url}/deploy"} | arguments))
    assert expected in message
    assert hook.seen == []
