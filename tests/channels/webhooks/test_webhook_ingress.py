"""The webhook ingress, request by request, through httpx's ASGI transport (the wire is the point
of test_webhook_wire.py): what each forged, stale, oversized or misdirected delivery is answered
and that none of them reaches the store; what a good one becomes; that a redelivery is stored once.
The store is a real SQLite file; the Inbox stores into it."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from webhook_fixtures import (
    GITHUB_SECRET,
    SLACK_SECRET,
    STANDARD_SECRET,
    HandedEvents,
    channel_context,
    github_delivery,
    github_payload,
    json_body,
    runtime_inbox,
    slack_delivery,
    standard_delivery,
)

from wakeful.channels.webhooks import KIND, WebhookIngress, WebhookSettings
from wakeful.core.channel import Delivery, source_event_id
from wakeful.errors import ConfigError
from wakeful.events import Event, render_event
from wakeful.runtime.inbox import RuntimeInbox
from wakeful.store.sqlite import Store

pytestmark = pytest.mark.anyio

ENDPOINTS: list[dict[str, Any]] = [
    {"name": "github", "scheme": "github", "secret": GITHUB_SECRET, "contacts": ["alice"]},
    {"name": "billing", "scheme": "standard", "secret": STANDARD_SECRET, "session": "ops"},
    {"name": "slack", "scheme": "slack", "secret": SLACK_SECRET, "contacts": ["U0ALICE"]},
    {"name": "public", "scheme": "none", "allow_unsigned": True},
]


def settings(**changes: Any) -> WebhookSettings:
    return WebhookSettings.model_validate({"port": 0, "endpoints": ENDPOINTS, **changes})


class Harness:
    def __init__(self, store: Store, ingress: WebhookIngress, handed: HandedEvents) -> None:
        self.store = store
        self.ingress = ingress
        self.handed = handed  # what reached the sessions
        self.client = httpx2.AsyncClient(
            transport=httpx2.ASGITransport(app=ingress.app), base_url="http://ingress"
        )

    async def post(self, endpoint: str, body: bytes, headers: dict[str, str]) -> httpx2.Response:
        return await self.client.post(f"/hooks/{endpoint}", content=body, headers=headers)

    async def events(self) -> list[Event]:
        return [row.event for row in await self.store.events.recent(limit=10_000)]


@pytest.fixture
async def harness(tmp_path: Path) -> AsyncIterator[Harness]:
    async with await Store.open(tmp_path / "store.db", synchronous="normal") as store:
        inbox, handed = runtime_inbox(store)
        ingress = WebhookIngress(settings(), name="webhooks", inbox=inbox)
        h = Harness(store, ingress, handed)
        async with h.client:
            yield h


# -- attacks and faults first: none of them reaches the store --


async def test_a_missing_signature_is_refused_401_and_nothing_is_stored(harness: Harness) -> None:
    body = github_payload("pull_request_opened")
    headers = github_delivery("pull_request", body)
    del headers["x-hub-signature-256"]
    response = await harness.post("github", body, headers)
    assert response.status_code == 401
    assert response.json() == {"error": "The X-Hub-Signature-256 header is missing."}
    assert await harness.events() == []


async def test_a_wrong_secret_or_a_tampered_body_is_refused_and_the_secret_never_echoed(
    harness: Harness,
) -> None:
    body = github_payload("pull_request_opened")
    forged = await harness.post("github", body, github_delivery("pull_request", body, secret="x"))
    tampered = await harness.post(
        "github", body.replace(b"alice", b"admin"), github_delivery("pull_request", body)
    )
    standard = await harness.post(
        "billing", b'{"type": "invoice.paid"}', standard_delivery(b'{"type": "invoice.failed"}')
    )
    for response in (forged, tampered, standard):
        assert response.status_code == 401
        assert "does not match the endpoint's secret" in response.json()["error"]
        assert GITHUB_SECRET not in response.text and STANDARD_SECRET not in response.text
    assert await harness.events() == []
    health = harness.ingress.health().detail
    assert health.endswith("; refused: 3 × 401") and GITHUB_SECRET not in health


async def test_a_delivery_signed_outside_the_replay_window_is_refused_with_the_reason(
    harness: Harness,
) -> None:
    body = b'{"type": "invoice.paid", "data": {"id": "in_1"}}'
    stale = standard_delivery(body, timestamp=int(time.time()) - 600)
    response = await harness.post("billing", body, stale)
    assert response.status_code == 401
    assert "outside the replay window of 300 s" in response.json()["error"]
    slack_body = json_body({"type": "event_callback", "event_id": "Ev1", "event": {}})
    old_slack = slack_delivery(slack_body, timestamp=int(time.time()) - 301)
    assert (await harness.post("slack", slack_body, old_slack)).status_code == 401
    assert await harness.events() == []


async def test_a_replayed_delivery_is_acknowledged_and_stored_once(harness: Harness) -> None:
    body = b'{"type": "invoice.paid", "data": {"id": "in_1", "amount": 4200}}'
    headers = standard_delivery(body, delivery_id="msg_2fTQ0y")
    answers = [(await harness.post("billing", body, headers)).json() for _ in range(3)]
    assert answers == [{"status": "stored"}, {"status": "duplicate"}, {"status": "duplicate"}]
    # A GitHub redelivery (same X-GitHub-Delivery) and a Slack retry (same event_id, a fresh
    # timestamp and signature) are recognised the same way.
    gh = github_payload("issue_comment_created")
    gh_headers = github_delivery("issue_comment", gh, delivery_id="72d3162e-cc78-11e3-81ab")
    slack_body = json_body(
        {"type": "event_callback", "event_id": "Ev08MFMKH6", "event": {"type": "message"}}
    )
    for attempt in range(2):
        assert (await harness.post("github", gh, gh_headers)).status_code == 200
        retry = {"x-slack-retry-num": str(attempt)} if attempt else {}
        headers = {**slack_delivery(slack_body, timestamp=int(time.time()) - attempt), **retry}
        assert (await harness.post("slack", slack_body, headers)).status_code == 200
    events = await harness.events()
    assert len(events) == 3
    assert harness.handed.events == events  # each handed to its session once
    assert events[0].id == source_event_id("webhooks", "billing/msg_2fTQ0y")
    assert events[2].id == source_event_id("webhooks", "slack/Ev08MFMKH6")


async def test_concurrent_copies_of_one_delivery_are_stored_once(harness: Harness) -> None:
    body = b'{"type": "ping"}'
    headers = standard_delivery(body, delivery_id="msg_same")
    answers: list[str] = []

    async def send() -> None:
        response = await harness.post("billing", body, headers)
        answers.append(response.json()["status"])

    async with anyio.create_task_group() as tg:
        for _ in range(10):
            tg.start_soon(send)
    assert sorted(answers) == ["duplicate"] * 9 + ["stored"]
    assert len(await harness.events()) == 1


async def test_a_body_over_the_cap_is_refused_413(tmp_path: Path) -> None:
    async with await Store.open(tmp_path / "s.db") as store:
        ingress = WebhookIngress(
            settings(max_body_bytes=1024), name="webhooks", inbox=runtime_inbox(store)[0]
        )
        transport = httpx2.ASGITransport(app=ingress.app)
        async with httpx2.AsyncClient(transport=transport, base_url="http://i") as client:
            body = json_body({"type": "big", "data": "x" * 2000})
            response = await client.post(
                "/hooks/billing", content=body, headers=standard_delivery(body)
            )

            async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: read up to the cap
                for _ in range(10):
                    yield b"y" * 200

            streamed = await client.post("/hooks/public", content=chunks())
        assert response.status_code == streamed.status_code == 413
        assert response.json() == {"error": "The body is over this endpoint's cap of 1,024 bytes."}
        assert await store.events.recent() == []


async def test_unknown_endpoints_paths_and_methods_are_refused(harness: Harness) -> None:
    unknown = await harness.post("gitlab", b"{}", {})
    assert unknown.status_code == 404
    assert unknown.json() == {"error": "No webhook endpoint of that name is served here."}
    elsewhere = await harness.client.post("/admin", content=b"{}")
    assert elsewhere.status_code == 404 and "error" in elsewhere.json()
    get = await harness.client.get("/hooks/github")
    assert get.status_code == 405 and get.headers["allow"] == "POST"
    assert await harness.events() == []


async def test_overload_is_answered_429_with_retry_after(tmp_path: Path) -> None:
    gate = anyio.Event()

    class SlowInbox(RuntimeInbox):
        async def deliver_many(self, events: Sequence[tuple[Event, str | None]]) -> list[Delivery]:
            await gate.wait()
            return await super().deliver_many(events)

    async with await Store.open(tmp_path / "s.db") as store:
        inbox, _ = runtime_inbox(store, SlowInbox)
        ingress = WebhookIngress(settings(max_in_flight=2), name="webhooks", inbox=inbox)
        transport = httpx2.ASGITransport(app=ingress.app)
        statuses: list[int] = []
        async with httpx2.AsyncClient(transport=transport, base_url="http://i") as client:

            async def send(n: int) -> None:
                body = json_body({"type": "n", "n": n})
                response = await client.post(
                    "/hooks/billing", content=body, headers=standard_delivery(body)
                )
                statuses.append(response.status_code)

            async with anyio.create_task_group() as tg:
                tg.start_soon(send, 1)
                tg.start_soon(send, 2)
                await anyio.wait_all_tasks_blocked()
                body = json_body({"type": "n", "n": 3})
                third = await client.post(
                    "/hooks/billing", content=body, headers=standard_delivery(body)
                )
                assert third.status_code == 429
                assert third.headers["retry-after"] == "1"
                gate.set()
        assert sorted(statuses) == [200, 200]
        assert len(await store.events.recent()) == 2


async def test_a_store_that_refuses_writes_gets_503_so_the_sender_retries(tmp_path: Path) -> None:
    # A real store whose disk is "full": less free space than its (huge) reserve.
    async with await Store.open(tmp_path / "s.db", reserve_bytes=10**18) as store:
        ingress = WebhookIngress(settings(), name="webhooks", inbox=runtime_inbox(store)[0])
        transport = httpx2.ASGITransport(app=ingress.app)
        async with httpx2.AsyncClient(transport=transport, base_url="http://i") as client:
            body = b'{"type": "invoice.paid"}'
            response = await client.post(
                "/hooks/billing", content=body, headers=standard_delivery(body)
            )
        assert response.status_code == 503
        assert response.headers["retry-after"] == "30"
        assert ingress.health().last_event_at is None


# -- what a good delivery becomes --


async def test_slack_url_verification_is_answered_with_the_challenge_and_not_stored(
    harness: Harness,
) -> None:
    body = json_body(
        {"token": "Jhj5dZrVaK7ZwHHjRyZWjbDl", "challenge": "3eZbrw1aB", "type": "url_verification"}
    )
    response = await harness.post("slack", body, slack_delivery(body))
    assert response.status_code == 200
    assert response.json() == {"challenge": "3eZbrw1aB"}
    forged = await harness.post("slack", body, slack_delivery(body, secret="wrong"))
    assert forged.status_code == 401
    assert await harness.events() == []


async def test_a_slack_message_is_from_a_contact_only_when_listed(harness: Harness) -> None:
    for event_id, user in (("Ev1", "U0ALICE"), ("Ev2", "U0MALLORY")):
        body = json_body(
            {
                "type": "event_callback",
                "team_id": "T1",
                "event_id": event_id,
                "event": {"type": "message", "user": user, "text": "deploy?", "channel": "C1"},
            }
        )
        assert (await harness.post("slack", body, slack_delivery(body))).status_code == 200
    alice, mallory = await harness.events()
    assert (alice.source.type, alice.source.id) == ("contact", "U0ALICE")
    assert (mallory.source.type, mallory.source.id) == ("stranger", "U0MALLORY")
    assert isinstance(mallory.content, dict)
    assert mallory.content["text"] == "deploy?"
    assert mallory.content["event_type"] == "message"
    assert render_event(mallory).startswith(
        "[WEBHOOK slack FROM_STRANGER U0MALLORY] (webhook.received)"
    )


async def test_a_slash_command_form_is_read(harness: Harness) -> None:
    body = b"command=%2Fdeploy&text=staging&user_id=U0ALICE&channel_id=C1&team_id=T1"
    headers = slack_delivery(body, content_type="application/x-www-form-urlencoded")
    assert (await harness.post("slack", body, headers)).status_code == 200
    (event,) = await harness.events()
    assert isinstance(event.content, dict)
    assert event.content["text"] == "/deploy staging"
    assert event.content["event_type"] == "slash_command"
    assert event.source.type == "contact"


async def test_a_github_pull_request_becomes_a_typed_event_with_what_the_agent_needs(
    harness: Harness,
) -> None:
    body = github_payload("pull_request_opened")
    headers = github_delivery("pull_request", body, delivery_id="a1b2c3d4-0001")
    response = await harness.post("github", body, headers)
    assert response.json() == {"status": "stored"}
    (event,) = await harness.events()
    assert event.kind == "github.pull_request"
    assert event.id == source_event_id("webhooks", "github/a1b2c3d4-0001")
    assert event.session == "main" and event.channel == "webhooks"
    assert (event.source.type, event.source.id) == ("contact", "alice")
    assert isinstance(event.content, dict)
    assert {k: event.content[k] for k in ("repository", "number", "title", "action", "change")} == {
        "repository": "acme/app",
        "number": 42,
        "title": "Retry webhook deliveries with backoff",
        "action": "opened",
        "change": "opened",
    }
    assert event.content["url"] == "https://github.com/acme/app/pull/42"
    assert event.content["labels"] == ["enhancement", "needs-review"]
    assert event.content["from"] == "alice" and event.content["event_type"] == "pull_request"
    assert event.content["text"].startswith("Fixes #17.")
    assert (event.content["head"], event.content["base"]) == ("retry-backoff", "main")
    assert render_event(event).startswith(
        "[GITHUB acme/app FROM_CONTACT alice] (github.pull_request)"
    )


async def test_github_issue_comment_review_push_and_others(harness: Harness) -> None:
    for name, event_name in [
        ("issues_labeled", "issues"),
        ("issue_comment_created", "issue_comment"),
        ("pull_request_review_submitted", "pull_request_review"),
        ("push", "push"),
        ("pull_request_closed", "pull_request"),
        ("issues_edited", "issues"),
        ("ping", "ping"),
    ]:
        body = github_payload(name)
        response = await harness.post("github", body, github_delivery(event_name, body))
        assert response.status_code == 200, response.text
    labeled, comment, review, push, closed, edited, ping = await harness.events()

    assert labeled.kind == "github.issue"
    assert (labeled.source.type, labeled.source.id) == ("stranger", "mallory")
    assert isinstance(labeled.content, dict)
    assert labeled.content["change"] == "labeled: p1"
    assert labeled.content["labels"] == ["bug", "p1"]
    assert labeled.content["number"] == 17 and labeled.content["state"] == "open"
    # The injection in the issue is carried as data under a stranger's tag, never unmarked.
    assert "IGNORE PREVIOUS INSTRUCTIONS" in labeled.content["text"]
    assert labeled.context["suspicious"]  # and flagged by the runtime's Inbox
    assert "suspicious" not in comment.context
    assert render_event(labeled).startswith("[GITHUB acme/app FROM_STRANGER mallory]")

    assert comment.kind == "github.issue_comment"
    assert isinstance(comment.content, dict)
    assert comment.content["text"].startswith("Could the backoff cap be configurable?")
    assert comment.content["comment_author"] == "bob" and comment.content["on_pull_request"]
    assert comment.content["url"].endswith("#issuecomment-1575042167")
    assert comment.source.type == "stranger"  # bob is not in the endpoint's contacts

    assert review.kind == "github.review"
    assert isinstance(review.content, dict)
    assert review.content["review_state"] == "changes_requested"
    assert review.content["change"] == "review submitted: changes_requested"
    assert review.content["text"] == "The retry loop never gives up; please cap the attempts."
    assert review.content["reviewer"] == "bob" and review.content["number"] == 42

    assert push.kind == "github.push"
    assert isinstance(push.content, dict)
    assert push.content["change"] == "2 commit(s) pushed to main"
    assert push.content["text"] == "Retry deliveries with backoff\nCap retry attempts at 8"
    assert push.content["commits"][1] == {
        "id": "0d1a26e67d8f",
        "message": "Cap retry attempts at 8",
        "author": "alice",
    }

    assert isinstance(closed.content, dict) and closed.content["change"] == "closed (merged)"
    assert isinstance(edited.content, dict)
    assert edited.content["change"] == "edited: title"
    assert edited.content["previous"] == {"title": "Deliveries lost"}
    assert ping.kind == "github.ping"
    assert isinstance(ping.content, dict) and ping.content["repository"] == "acme/app"


async def test_a_github_form_encoded_delivery_is_read(harness: Harness) -> None:
    from urllib.parse import urlencode

    body = urlencode({"payload": github_payload("push").decode()}).encode()
    headers = {
        **github_delivery("push", body),
        "content-type": "application/x-www-form-urlencoded",
    }
    assert (await harness.post("github", body, headers)).status_code == 200
    (event,) = await harness.events()
    assert isinstance(event.content, dict) and event.content["commit_count"] == 2


async def test_a_signed_github_delivery_that_cannot_be_read_is_refused_400(
    harness: Harness,
) -> None:
    body = b"{not json"
    bad_json = await harness.post("github", body, github_delivery("push", body))
    assert bad_json.status_code == 400 and "not valid JSON" in bad_json.json()["error"]
    headers = github_delivery("push", b"{}")
    del headers["x-github-event"]
    no_event = await harness.post("github", b"{}", headers)
    assert no_event.json() == {"error": "The X-GitHub-Event header is missing."}
    assert await harness.events() == []


async def test_standard_and_unsigned_deliveries_become_webhook_received(harness: Harness) -> None:
    body = json_body({"type": "invoice.paid", "timestamp": "2026-12-01T10:00:00Z", "data": {}})
    await harness.post("billing", body, standard_delivery(body, delivery_id="msg_1"))
    await harness.post("public", b"disk 91% full on db-2", {"content-type": "text/plain"})
    billing, public = await harness.events()
    assert billing.kind == public.kind == "webhook.received"
    assert billing.session == "ops"
    assert (billing.source.type, billing.source.id) == ("contact", "billing")
    assert isinstance(billing.content, dict)
    assert billing.content["event_type"] == "invoice.paid"
    assert billing.content["body"]["type"] == "invoice.paid"
    assert billing.context["headers"]["webhook-id"] == "msg_1"
    assert "webhook-signature" not in billing.context["headers"]
    assert "headers" not in billing.content  # metadata, not text for the model
    assert render_event(billing).startswith("[WEBHOOK billing FROM_CONTACT] (webhook.received)")
    assert public.source.type == "stranger"
    assert isinstance(public.content, dict) and public.content["text"] == "disk 91% full on db-2"
    assert render_event(public).startswith("[WEBHOOK public FROM_STRANGER]")
    assert json.loads(public.to_json())["context"]["verified_by"] == "none"


# -- settings --


def test_settings_refuse_an_unsigned_endpoint_unless_opted_in() -> None:
    with pytest.raises(ValueError, match="allow_unsigned = true"):
        WebhookSettings.model_validate({"name": "open", "scheme": "none"})
    with pytest.raises(ValueError, match="exactly one of `secret` or `secret_env`"):
        WebhookSettings.model_validate({"name": "gh", "scheme": "github"})
    with pytest.raises(ValueError, match="unique"):
        WebhookSettings.model_validate({"endpoints": [ENDPOINTS[0], ENDPOINTS[0]]})
    with pytest.raises(ValueError, match="base64"):
        WebhookSettings.model_validate({"name": "b", "scheme": "standard", "secret": "whsec_!!"})


def test_one_endpoint_can_be_given_inline_with_its_listen_options() -> None:
    inline = WebhookSettings.model_validate(
        {"name": "github", "scheme": "github", "secret_env": "GH_SECRET", "port": 0}
    )
    assert inline.port == 0
    assert [e.name for e in inline.endpoints] == ["github"]


async def test_a_secret_env_that_is_not_set_is_a_config_error_at_build(tmp_path: Path) -> None:
    loose = WebhookSettings.model_validate(
        {"name": "github", "scheme": "github", "secret_env": "WAKEFUL_TEST_UNSET_SECRET"}
    )
    async with await Store.open(tmp_path / "s.db") as store:
        context = channel_context("webhook:github", store, runtime_inbox(store)[0], tmp_path)
        with pytest.raises(ConfigError, match="WAKEFUL_TEST_UNSET_SECRET, which is not set"):
            KIND.build(loose, context)
        built = KIND.build(settings(), context)
        assert built.name == "webhook:github"
        assert KIND.kind == "webhook" and KIND.settings_model is WebhookSettings
        assert built.health().state == "stopped"


async def test_an_endpoint_filter_keeps_events_from_the_agent_but_stores_them(
    tmp_path: Path,
) -> None:
    github = {**ENDPOINTS[0], "filter": {"repositories": ["acme/app"], "labels": ["p1"]}}
    async with await Store.open(tmp_path / "s.db") as store:
        inbox, handed = runtime_inbox(store)
        ingress = WebhookIngress(settings(endpoints=[github]), name="webhooks", inbox=inbox)
        transport = httpx2.ASGITransport(app=ingress.app)
        async with httpx2.AsyncClient(transport=transport, base_url="http://i") as client:
            answers = []
            for name, event_name in [("issues_labeled", "issues"), ("push", "push")]:
                body = github_payload(name)
                response = await client.post(
                    "/hooks/github", content=body, headers=github_delivery(event_name, body)
                )
                answers.append(response.json())
        assert answers == [{"status": "stored"}, {"status": "filtered"}]
        stored = await store.events.recent()
        assert [row.status for row in stored] == ["pending", "filtered"]  # stored, countable
        assert handed.events == [stored[0].event]  # only the first reached a session


def test_a_bad_filter_is_refused_with_the_settings() -> None:
    with pytest.raises(ValueError, match="not a repository"):
        WebhookSettings.model_validate(
            {
                "name": "github",
                "scheme": "github",
                "secret": "s",
                "filter": {"repositories": ["not-a-repo"]},
            }
        )


def test_secrets_stay_out_of_reprs_and_dumps() -> None:
    loaded = settings()
    assert GITHUB_SECRET not in repr(loaded) and STANDARD_SECRET not in repr(loaded)
    assert GITHUB_SECRET not in loaded.model_dump_json()
