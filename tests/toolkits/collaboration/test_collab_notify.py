"""Notices to approvers and collaborators against real servers on 127.0.0.1: IM through the XMPP
channel to a Prosody account, email to an SMTP server (aiosmtpd), Slack to a webhook served by
a Starlette app; addresses off the allow-list and servers that are down give clear errors."""

from __future__ import annotations

import email
import email.policy
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from world_servers import closed_port, smtp_server

from loopback_http import serving
from servers.prosody import ProsodyServer
from tool_services import call, refused, tool_services
from wakeful.services import Services
from wakeful.toolkits.collaboration.notify import (
    NOTIFY_TOOLS,
    ImSender,
    send_email_notification,
    send_im_notification,
    send_slack_message,
)
from wakeful.toolkits.collaboration.settings import CollaborationSettings
from wakeful.toolkits.execution.settings import EmailSettings
from wakeful.tools.lint import lint_tool

pytestmark = pytest.mark.anyio

HOOK_ENV = "WAKEFUL_TEST_SLACK_DEPLOYS"


def test_the_tools_meet_the_description_standard() -> None:
    for each in NOTIFY_TOOLS:
        assert lint_tool(each) == []
        assert each.spec.annotations.open_world is True


def configure(services: Services, **settings: Any) -> None:
    services.settings[CollaborationSettings] = CollaborationSettings.model_validate(settings)


# --- Slack -------------------------------------------------------------------------------------


class SlackHooks:
    """Slack's incoming webhooks: /hooks/ok takes a post, /hooks/gone answers as a deleted one."""

    def __init__(self) -> None:
        self.posted: list[dict[str, Any]] = []

    def app(self) -> Starlette:
        async def ok(request: Request) -> PlainTextResponse:
            self.posted.append(json.loads(await request.body()))
            return PlainTextResponse("ok")

        async def gone(request: Request) -> PlainTextResponse:
            return PlainTextResponse("no_service", status_code=404)

        return Starlette(
            routes=[
                Route("/hooks/ok", ok, methods=["POST"]),
                Route("/hooks/gone", gone, methods=["POST"]),
            ]
        )


@asynccontextmanager
async def slack() -> AsyncIterator[tuple[SlackHooks, int]]:
    hooks = SlackHooks()
    async with serving(hooks.app()) as port:
        yield hooks, port


async def test_a_slack_message_is_posted_as_plain_text(monkeypatch: pytest.MonkeyPatch) -> None:
    async with slack() as (hooks, port), tool_services() as (services, _):
        monkeypatch.setenv(HOOK_ENV, f"http://127.0.0.1:{port}/hooks/ok")
        configure(services, slack={"deploys": {"webhook_url_env": HOOK_ENV}})
        result = await call(
            services, send_slack_message, channel="deploys", text="<!channel> 2.4 waits & <b>"
        )
    assert result.content == "Posted to Slack channel deploys."
    # Slack markup is escaped: no ping of the whole channel.
    assert hooks.posted == [{"text": "&lt;!channel&gt; 2.4 waits &amp; &lt;b&gt;"}]


async def test_slack_refusals_say_what_to_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    async with slack() as (_, port), tool_services() as (services, _):
        configure(services, slack={"deploys": {"webhook_url_env": HOOK_ENV}})
        monkeypatch.delenv(HOOK_ENV, raising=False)
        assert await refused(services, send_slack_message, channel="deploys", text="hi") == (
            "The webhook URL of Slack channel 'deploys' is read from the environment variable "
            f"{HOOK_ENV}, which is not set. Set it where the runtime runs (the incoming-webhook "
            "URL Slack gave you), then call again."
        )
        assert await refused(services, send_slack_message, channel="random", text="hi") == (
            "No Slack channel 'random' is configured; the configured ones are: deploys. Add it "
            "as [tools.collaboration.slack.random] with webhook_url_env in wakeful.toml, or use "
            "one of those."
        )
        monkeypatch.setenv(HOOK_ENV, f"http://127.0.0.1:{port}/hooks/gone")
        gone = await refused(services, send_slack_message, channel="deploys", text="hi")
        assert gone.startswith(
            "the Slack webhook of channel 'deploys' answered HTTP 404 Not Found"
        ), gone
        assert "It said: no_service." in gone
    monkeypatch.setenv(HOOK_ENV, f"http://127.0.0.1:{closed_port()}/hooks/ok")
    async with tool_services() as (services, _):
        configure(services, slack={"deploys": {"webhook_url_env": HOOK_ENV}})
        down = await refused(services, send_slack_message, channel="deploys", text="hi")
    assert down.startswith("Could not connect to the Slack webhook of channel 'deploys'"), down
    assert down.endswith(
        f"refused the connection; nothing was sent. Check the URL in {HOOK_ENV} and that the "
        "webhook still exists."
    )


# --- email -------------------------------------------------------------------------------------


def smtp_settings(port: int) -> EmailSettings:
    return EmailSettings(
        host="127.0.0.1",
        port=port,
        security="none",
        from_address="Agent <agent@example.com>",
        timeout_seconds=5,
    )


async def test_an_email_notification_reaches_an_approver() -> None:
    with smtp_server() as (port, received):
        async with tool_services() as (services, _):
            services.settings[EmailSettings] = smtp_settings(port)
            configure(services, email_addresses=["Approvals@Example.com"])
            result = await call(
                services,
                send_email_notification,
                to="approvals@example.com",
                subject="Approval waiting: invoice",
                text="Request [a3f9] waits for you.\nAmount: 4,200 EUR",
            )
    assert result.content.startswith("Sent to approvals@example.com by email (Message-ID <")
    (mail,) = received
    assert mail.recipients == ["approvals@example.com"]
    message = email.message_from_bytes(mail.data, policy=email.policy.default)
    assert message["Subject"] == "Approval waiting: invoice"
    assert message["Auto-Submitted"] == "auto-generated"
    assert message.get_content() == "Request [a3f9] waits for you.\nAmount: 4,200 EUR"


async def test_an_address_off_the_allow_list_is_refused_with_the_fix() -> None:
    with smtp_server() as (port, received):
        async with tool_services() as (services, _):
            services.settings[EmailSettings] = smtp_settings(port)
            configure(services, email_addresses=["approvals@example.com"])
            got = await refused(
                services, send_email_notification, to="mallory@evil.example", subject="x", text="y"
            )
            header = await refused(
                services,
                send_email_notification,
                to="approvals@example.com",
                subject="Hi\nBcc: mallory@evil.example",
                text="y",
            )
    assert got == (
        "'mallory@evil.example' is not an approver or collaborator address for email; the "
        "allowed ones are: approvals@example.com. This tool reaches approvers and collaborators "
        "only: to reach the user, use send_user_notification; to allow this person, add the "
        "address to email_addresses in [tools.collaboration] of wakeful.toml."
    )
    assert header.startswith("The subject must be one line")
    assert received == []


async def test_an_smtp_server_that_is_down_is_named() -> None:
    port = closed_port()
    async with tool_services() as (services, _):
        services.settings[EmailSettings] = smtp_settings(port)
        configure(services, email_addresses=["approvals@example.com"])
        got = await refused(
            services, send_email_notification, to="approvals@example.com", subject="x", text="y"
        )
    assert got == (
        f"The email to approvals@example.com through 127.0.0.1:{port} failed: the connection "
        "was refused (no SMTP server listens there). It may not have been delivered; "
        "check the mail settings, or reach the person another way."
    )


# --- IM ----------------------------------------------------------------------------------------


async def test_an_im_notification_reaches_a_collaborator_over_xmpp(
    prosody: ProsodyServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from xmpp_harness import (
        PASSWORD_ENV,
        PASSWORDS,
        RecordingInbox,
        add_accounts,
        opened_store,
        peer,
        running_channel,
    )

    add_accounts(prosody)
    monkeypatch.setenv(PASSWORD_ENV, PASSWORDS["agent"])
    async with (
        opened_store(tmp_path / "w.db") as store,
        running_channel(prosody, RecordingInbox(store), tmp_path) as channel,
        peer(prosody, "carol") as carol,
        tool_services() as (services, _),
    ):
        assert isinstance(channel, ImSender)
        services.state[ImSender] = channel
        configure(services, im_addresses=["carol@localhost"])
        result = await call(
            services, send_im_notification, to="carol@localhost", text="Approval [a3f9] waits."
        )
        assert result.content == "Sent to carol@localhost over IM."
        (got,) = await carol.wait_received(1)
        assert got["body"] == "Approval [a3f9] waits."
        refusal = await refused(
            services, send_im_notification, to="mallory@localhost", text="hello"
        )
        assert refusal.startswith("'mallory@localhost' is not an approver or collaborator")


async def test_without_an_im_channel_the_tool_says_what_to_configure() -> None:
    async with tool_services() as (services, _):
        configure(services, im_addresses=["carol@localhost"])
        got = await refused(services, send_im_notification, to="carol@localhost", text="hi")
    assert got.startswith("No IM channel runs here, so send_im_notification cannot send.")
