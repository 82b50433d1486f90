"""The tools' HTTP client factory and the one wording of HTTP failures as ToolErrors.

Failures that need the wire (an unreachable port, a server that never answers) happen on real
sockets of 127.0.0.1; answers (statuses, bodies, redirects) come from a mock transport.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager

import httpx2
import pytest

from tool_services import tool_services
from wakeful.errors import ToolError
from wakeful.services import Services
from wakeful.tools.http import (
    HttpErrors,
    HttpSettings,
    http_client,
    nothing_sent,
    read_capped,
)

pytestmark = pytest.mark.anyio


class CountingTransport(httpx2.MockTransport):
    """A mock transport that records the requests it answers and whether it was closed."""

    def __init__(self, status: int = 200, body: bytes = b"ok", **headers: str) -> None:
        super().__init__(self._answer)
        self.requests: list[httpx2.Request] = []
        self.closed = False
        self.status, self.body, self.headers = status, body, headers

    def _answer(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        return httpx2.Response(self.status, content=self.body, headers=self.headers)

    async def aclose(self) -> None:
        self.closed = True


@pytest.fixture
async def services() -> AsyncIterator[Services]:
    async with tool_services() as (found, _events):
        yield found


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def silent_port() -> Iterator[int]:
    """A port of 127.0.0.1 that accepts connections (the kernel's backlog) and never answers."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        yield int(listener.getsockname()[1])


ERRORS = HttpErrors(
    target="Example at example.test",
    timeout_seconds=0.3,
    check="Check example_url in the settings.",
    retry="Try again in a minute.",
    max_redirects=3,
)


async def raised(client: httpx2.AsyncClient, url: str, errors: HttpErrors = ERRORS) -> str:
    """The message of the ToolError that `errors` makes of the failure of GET `url`."""
    try:
        async with client:
            await client.get(url)
    except (httpx2.HTTPError, httpx2.InvalidURL) as exc:
        return str(errors.for_exception(exc))
    raise AssertionError(f"GET {url} did not fail")


# --- the factory ---------------------------------------------------------------------------------


async def test_the_registered_transport_carries_every_request_with_the_familys_policy(
    services: Services,
) -> None:
    transport = CountingTransport()
    services.settings[HttpSettings] = HttpSettings(transport=transport)
    client = http_client(
        services,
        timeout_seconds=7,
        base_url="https://api.example.test/v1",
        headers={"User-Agent": "wakeful-test"},
        proxy="http://127.0.0.1:9",  # a proxy would bypass the transport; it must not apply
    )
    async with client:
        response = await client.get("/items", params={"q": "x"})
    assert response.text == "ok"
    [request] = transport.requests
    assert str(request.url) == "https://api.example.test/v1/items?q=x"
    assert request.headers["user-agent"] == "wakeful-test"
    assert request.extensions["timeout"] == {"connect": 7, "read": 7, "write": 7, "pool": 7}


async def test_closing_a_client_leaves_the_shared_transport_open(services: Services) -> None:
    transport = CountingTransport()
    services.settings[HttpSettings] = HttpSettings(transport=transport)
    for _ in range(2):
        async with http_client(services, timeout_seconds=1) as client:
            await client.get("https://example.test/")
    assert len(transport.requests) == 2
    assert transport.closed is False


async def test_without_a_transport_requests_go_over_the_network(services: Services) -> None:
    port = closed_port()
    for owner in (services, None):
        client = http_client(owner, timeout_seconds=2)
        message = await raised(client, f"http://127.0.0.1:{port}/")
        assert message.startswith("Could not connect to Example at example.test")


async def test_redirects_follow_the_familys_policy(services: Services) -> None:
    def loop(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(302, headers={"Location": "/again"})

    services.settings[HttpSettings] = HttpSettings(transport=httpx2.MockTransport(loop))
    async with http_client(services, timeout_seconds=1) as client:
        assert (await client.get("https://example.test/")).status_code == 302
    client = http_client(services, timeout_seconds=1, follow_redirects=True, max_redirects=3)
    message = await raised(client, "https://example.test/")
    assert message.startswith("Example at example.test redirected more than 3 times")
    assert "Check example_url in the settings." in message


# --- transport failures --------------------------------------------------------------------------


async def test_an_unreachable_host_on_127_0_0_1_is_named_with_the_fix() -> None:
    port = closed_port()
    message = await raised(http_client(None, timeout_seconds=2), f"http://127.0.0.1:{port}/")
    assert message == (
        "Could not connect to Example at example.test (All connection attempts failed): the host "
        "is unknown, not reachable, or refused the connection. Check example_url in the settings."
    )


async def test_an_unreachable_host_says_nothing_was_sent_for_a_request_that_changes_things() -> (
    None
):
    port = closed_port()
    changes = HttpErrors("POST http://127.0.0.1/hook", timeout_seconds=2, changes=True)
    try:
        async with http_client(None, timeout_seconds=2) as client:
            await client.post(f"http://127.0.0.1:{port}/hook", content=b"x")
    except httpx2.ConnectError as exc:
        assert nothing_sent(exc)
        assert "; nothing was sent. Check the URL" in str(changes.for_exception(exc))
    else:
        raise AssertionError("the POST did not fail")


async def test_a_server_that_never_answers_times_out_with_advice() -> None:
    with silent_port() as port:
        client = http_client(None, timeout_seconds=0.3)
        message = await raised(client, f"http://127.0.0.1:{port}/")
    assert message == "Example at example.test did not answer within 0.3 s. Try again in a minute."


async def test_a_timeout_of_a_request_that_changes_things_may_have_taken_effect() -> None:
    changes = HttpErrors("PUT http://127.0.0.1/x", timeout_seconds=0.3, changes=True)
    with silent_port() as port:
        try:
            async with http_client(None, timeout_seconds=0.3) as client:
                await client.put(f"http://127.0.0.1:{port}/x", content=b"x")
        except httpx2.ReadTimeout as exc:
            assert not nothing_sent(exc)
            message = str(changes.for_exception(exc))
        else:
            raise AssertionError("the PUT did not time out")
    assert "did not answer within 0.3 s; the request may or may not have taken effect" in message


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (httpx2.ConnectTimeout("slow"), "Could not connect to Example at example.test within"),
        (httpx2.InvalidURL("no host"), "the URL is not valid (no host). Pass a full http(s) URL"),
        (httpx2.UnsupportedProtocol("ftp"), "No request can be sent to Example at example.test"),
        (httpx2.RemoteProtocolError("peer closed"), "failed (RemoteProtocolError: peer closed)"),
        (httpx2.ReadError(""), "failed (ReadError): the connection broke off"),
    ],
)
def test_each_kind_of_failure_names_the_problem(exc: Exception, expected: str) -> None:
    assert isinstance(exc, httpx2.HTTPError | httpx2.InvalidURL)
    message = str(ERRORS.for_exception(exc))
    assert expected in message
    assert message.endswith(("Check example_url in the settings.", "Try again in a minute."))


# --- statuses and bodies -------------------------------------------------------------------------


async def answer(status: int, body: bytes = b"", **headers: str) -> httpx2.Response:
    transport = CountingTransport(status, body, **headers)
    async with httpx2.AsyncClient(transport=transport) as client:
        return await client.get("https://example.test/items")


async def test_a_500_names_the_status_what_the_server_said_and_the_retry() -> None:
    response = await answer(500, b"database   down\n")
    assert str(ERRORS.for_status(response)) == (
        "Example at example.test answered HTTP 500 Internal Server Error. It said: database "
        "down. The server failed. Try again in a minute."
    )
    changes = HttpErrors("POST https://example.test/items", timeout_seconds=1, changes=True)
    assert "Server Error (the request may or may not have taken effect)." in str(
        changes.for_status(response)
    )


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (401, "The server refused access: check the credentials"),
        (403, "The server refused access: check the credentials"),
        (404, "Nothing is at this address. Check example_url in the settings."),
        (429, "rate-limiting requests: wait a minute"),
        (400, "Check the arguments and call again."),
        (503, "The server failed. Try again in a minute."),
    ],
)
async def test_error_statuses_get_general_advice(status: int, expected: str) -> None:
    message = str(ERRORS.for_status(await answer(status)))
    assert f"answered HTTP {status} " in message
    assert expected in message
    assert "It said" not in message  # an empty body is not quoted


async def test_a_family_replaces_the_advice_for_statuses_its_service_gives_meaning() -> None:
    errors = HttpErrors(
        "GitHub at https://api.github.test",
        timeout_seconds=1,
        status_advice={422: "Push the head branch first."},
        refused="Check owner and repo.",
    )
    response = await answer(422, b'{"message": "Validation Failed"}')
    assert str(errors.for_status(response, said="Validation Failed")) == (
        "GitHub at https://api.github.test answered HTTP 422 Unprocessable Content. It said: "
        "Validation Failed. Push the head branch first."
    )
    assert str(errors.for_status(await answer(409), said="")).endswith("Check owner and repo.")


async def test_a_long_error_body_is_quoted_in_one_short_line() -> None:
    response = await answer(502, b"<html>\n" + b"x" * 1000 + b"\n</html>")
    message = str(ERRORS.for_status(response))
    assert "It said: <html> xxx" in message and "…" in message
    assert len(message) < 400


async def test_a_body_over_the_limit_is_cut_or_refused(services: Services) -> None:
    transport = CountingTransport(200, b"a" * 5000)
    services.settings[HttpSettings] = HttpSettings(transport=transport)
    async with (
        http_client(services, timeout_seconds=1) as client,
        client.stream("GET", "https://example.test/big") as response,
    ):
        body, longer = await read_capped(response, 4096)
    assert (len(body), longer) == (4096, True)
    async with (
        http_client(services, timeout_seconds=1) as client,
        client.stream("GET", "https://example.test/big") as response,
    ):
        assert await read_capped(response, 5000) == (b"a" * 5000, False)
    error = ERRORS.too_large(4096, "Ask for fewer results.")
    assert isinstance(error, ToolError)
    assert str(error) == (
        "Example at example.test sent more than 4,096 bytes, more than is read from one answer. "
        "Ask for fewer results."
    )


def test_settings_default_to_the_network() -> None:
    assert HttpSettings().transport is None
