"""github_create_pull_request against a server imitating GitHub's pulls endpoints.

The server answers in-process through a mock transport; the first test talks to it over a real
socket on 127.0.0.1, and one test asks a closed port, so the network path stays covered.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from world_servers import Answer, RecordingHTTP, Seen, closed_port, serve_http, world_services

from tool_services import call
from tool_services import refused as refused_by
from wakeful.services import Services
from wakeful.toolkits.execution.github import (
    GITHUB_TOOLS,
    github_create_pull_request,
)
from wakeful.toolkits.execution.settings import GitHubSettings
from wakeful.tools.lint import lint_tool

pytestmark = pytest.mark.anyio

PULLS = "/repos/acme/shop/pulls"
TOKEN_ENV = "WAKEFUL_TEST_GITHUB_TOKEN"


def pull(number: int, head: str = "fix/cart", title: str = "Fix cart") -> dict[str, Any]:
    """A pull request as GitHub's REST API returns it: the fields the tool reads, and some more."""
    return {
        "number": number,
        "html_url": f"https://github.com/acme/shop/pull/{number}",
        "state": "open",
        "draft": False,
        "title": title,
        "head": {"label": f"acme:{head}", "ref": head},
        "base": {"ref": "main"},
        "user": {"login": "agent"},
    }


class FakeGitHub(RecordingHTTP):
    """Open pull requests in memory: GET lists them by head and base, POST opens one."""

    def __init__(self) -> None:
        super().__init__()
        self.open: list[dict[str, Any]] = []
        self.routes[("GET", PULLS)] = self._list
        self.routes[("POST", PULLS)] = self._create

    def _list(self, seen: Seen) -> Answer:
        found = [
            p
            for p in self.open
            if p["head"]["label"] == seen.query.get("head")
            and p["base"]["ref"] == seen.query.get("base")
        ]
        return Answer(200, json.dumps(found))

    def _create(self, seen: Seen) -> Answer:
        body = json.loads(seen.body)
        created = pull(len(self.open) + 1, body["head"], body["title"])
        self.open.append(created)
        return Answer(201, json.dumps(created))


@pytest.fixture
def github(monkeypatch: pytest.MonkeyPatch) -> FakeGitHub:
    monkeypatch.setenv(TOKEN_ENV, "ghp_test")
    return FakeGitHub()


def settings_for(github: FakeGitHub) -> GitHubSettings:
    return GitHubSettings(base_url=github.url, token_env=TOKEN_ENV, timeout_seconds=5)


@pytest.fixture
async def services(tmp_path: Path, github: FakeGitHub) -> AsyncIterator[Services]:
    async with world_services(tmp_path, settings_for(github), github.settings) as services:
        yield services


PR: dict[str, Any] = {
    "owner": "acme",
    "repo": "shop",
    "head": "fix/cart",
    "base": "main",
    "title": "Fix cart",
    "body": "Totals “rounded” once. ✓",
}


async def refused(services: Services, **arguments: Any) -> str:
    return await refused_by(services, github_create_pull_request, **arguments)


def test_the_tool_meets_the_description_standard() -> None:
    assert [t.name for t in GITHUB_TOOLS] == ["github_create_pull_request"]
    assert lint_tool(github_create_pull_request) == []
    assert github_create_pull_request.spec.annotations.idempotent is True


async def test_it_queries_then_creates_and_then_finds_the_open_one(
    tmp_path: Path, github: FakeGitHub
) -> None:
    """Over a real socket on 127.0.0.1, so the whole network path is covered once."""
    async with serve_http(github), world_services(tmp_path, settings_for(github)) as services:
        created = await call(services, github_create_pull_request, **PR)
        assert created.structured["created"] is True
        assert created.structured["number"] == 1
        assert created.content.startswith("Opened pull request #1 'Fix cart'")
        listing, creation = github.seen
        assert (listing.method, listing.query) == (
            "GET",
            {"head": "acme:fix/cart", "base": "main", "state": "open"},
        )
        assert listing.headers["authorization"] == "Bearer ghp_test"
        assert creation.method == "POST"
        assert json.loads(creation.body) == {
            "title": "Fix cart",
            "head": "fix/cart",
            "base": "main",
            "body": "Totals “rounded” once. ✓",
            "draft": False,
        }

        again = await call(services, github_create_pull_request, **PR)
        assert again.structured["created"] is False
        assert "already open" in again.content and "looked up before creating" in again.content
        assert [s.method for s in github.seen] == ["GET", "POST", "GET"]
        assert len(github.open) == 1


async def test_an_idempotency_key_replays_without_asking_github(
    services: Services, github: FakeGitHub
) -> None:
    first = await call(services, github_create_pull_request, **PR, idempotency_key="pr-1")
    second = await call(services, github_create_pull_request, **PR, idempotency_key="pr-1")
    assert first.structured["created"] is True
    assert second.structured["replayed"] is True
    assert len(github.seen) == 2


@pytest.mark.parametrize(
    ("status", "body", "headers", "expected"),
    [
        (401, {"message": "Bad credentials"}, {}, "token was refused"),
        (403, {"message": "Resource not accessible"}, {}, "Pull requests: write"),
        (403, {"message": "rate limit"}, {"x-ratelimit-remaining": "0"}, "rate limit is used up"),
        (404, {"message": "Not Found"}, {}, "acme/shop was not found"),
        (
            422,
            {"message": "Validation Failed", "errors": [{"message": "No commits between main"}]},
            {},
            "no commits between",
        ),
        (500, {"message": "boom"}, {}, "may or may not have been opened"),
    ],
)
async def test_github_errors_name_the_fix(
    services: Services,
    github: FakeGitHub,
    status: int,
    body: dict[str, Any],
    headers: dict[str, str],
    expected: str,
) -> None:
    github.routes[("POST", PULLS)] = Answer(status, json.dumps(body), headers)
    message = await refused(services, **PR)
    assert f"HTTP {status}" in message
    assert expected in message
    assert body["message"] in message


async def test_a_missing_repository_fails_at_the_query(services: Services) -> None:
    message = await refused(services, **(PR | {"repo": "nope"}))
    assert "HTTP 404" in message and "acme/nope was not found" in message


async def test_a_missing_token_or_an_unreachable_server_is_explained(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    settings = GitHubSettings(base_url=f"http://127.0.0.1:{closed_port()}", token_env=TOKEN_ENV)
    async with world_services(tmp_path, settings) as services:
        assert f"{TOKEN_ENV!r} is not set" in await refused(services, **PR)
        monkeypatch.setenv(TOKEN_ENV, "ghp_test")
        assert "Could not connect to GitHub" in await refused(services, **PR)


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"owner": "acme/evil"}, "not a GitHub owner name"),
        ({"repo": ".."}, "not a GitHub repo name"),
        ({"head": "bad branch"}, "is not a branch name"),
        ({"base": "a..b"}, "is not a branch name"),
        ({"head": "main"}, "head and base are both"),
        ({"title": ""}, "`title`"),
        ({"title": "t" * 257}, "`title`"),
        ({"draft": "maybe"}, "`draft`"),
        ({"body": "b" * 70_000}, "`body`"),
        ({"labels": ["bug"]}, "not a parameter"),
    ],
)
async def test_bad_input_is_refused_before_github_is_asked(
    services: Services, github: FakeGitHub, arguments: dict[str, Any], expected: str
) -> None:
    message = await refused(services, **(PR | arguments))
    assert expected in message
    assert github.seen == []


async def test_a_missing_field_is_named(services: Services, github: FakeGitHub) -> None:
    arguments = {k: v for k, v in PR.items() if k != "base"}
    assert "`base` is required" in await refused(services, **arguments)
    assert github.seen == []
