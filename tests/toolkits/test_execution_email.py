"""send_email against a real SMTP server (aiosmtpd) on 127.0.0.1: precheck, confirm, refusals."""

from __future__ import annotations

import email
import email.policy
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import anyio
import pytest
from world_servers import closed_port, smtp_server, world_services

from tool_services import call
from tool_services import refused as refused_by
from wakeful.services import Services
from wakeful.toolkits.execution.email import EMAIL_TOOLS, send_email
from wakeful.toolkits.execution.settings import EmailSettings
from wakeful.tools.lint import lint_tool

pytestmark = pytest.mark.anyio

BODY = "Hallo Ana,\n\n“Größe” – naïve café ✓\nline two\n"


def settings(port: int, **changes: Any) -> EmailSettings:
    values: dict[str, Any] = {
        "host": "127.0.0.1",
        "port": port,
        "security": "none",
        "from_address": "Agent <agent@example.com>",
        "timeout_seconds": 5,
    }
    return EmailSettings(**(values | changes))


def parsed(data: bytes) -> EmailMessage:
    message = email.message_from_bytes(data, policy=email.policy.default)
    assert isinstance(message, EmailMessage)
    return message


async def precheck(services: Services, **arguments: Any) -> str:
    result = await call(services, send_email, **arguments)
    assert not result.is_error, result.content
    assert result.structured["status"] == "needs_confirmation"
    return str(result.structured["confirmation_token"])


async def refused(services: Services, **arguments: Any) -> str:
    return await refused_by(services, send_email, **arguments)


MESSAGE: dict[str, Any] = {
    "to": ["Ana Lima <ana@example.com>"],
    "cc": ["team@example.com"],
    "bcc": ["archive@example.com"],
    "subject": "Größe “report”",
    "body": BODY,
}


def test_the_tool_meets_the_description_standard() -> None:
    assert [t.name for t in EMAIL_TOOLS] == ["send_email"]
    assert lint_tool(send_email) == []
    assert send_email.spec.annotations.idempotent is False
    assert send_email.spec.annotations.open_world is True


async def test_precheck_sends_nothing_and_shows_every_recipient(tmp_path: Path) -> None:
    with smtp_server() as (port, received):
        async with world_services(tmp_path, settings(port)) as services:
            result = await call(services, send_email, **MESSAGE)
    assert received == []
    assert "nothing has been done yet" in result.content
    for line in (
        "From: Agent <agent@example.com>",
        "To: Ana Lima <ana@example.com>",
        "Cc: team@example.com",
        "Bcc: archive@example.com",
        "Subject: Größe “report”",
        "Envelope recipients (3): ana@example.com, team@example.com, archive@example.com",
    ):
        assert line in result.content
    assert BODY in result.content


async def test_confirm_sends_exactly_once_with_the_exact_body(tmp_path: Path) -> None:
    with smtp_server() as (port, received):
        async with world_services(tmp_path, settings(port)) as services:
            token = await precheck(services, **MESSAGE)
            result = await call(services, send_email, **MESSAGE, confirmation_token=token)
            assert not result.is_error, result.content
            again = await refused(services, **MESSAGE, confirmation_token=token)
    assert len(received) == 1
    got = received[0]
    assert got.mail_from == "agent@example.com"
    assert got.recipients == ["ana@example.com", "team@example.com", "archive@example.com"]
    message = parsed(got.data)
    assert message["Subject"] == "Größe “report”"
    assert message["To"] == "Ana Lima <ana@example.com>"
    assert message["Bcc"] is None  # blind copies are envelope recipients only
    body = message.get_body(("plain",))
    assert body is not None and body.get_content() == BODY
    assert result.structured["accepted"] == got.recipients
    assert result.structured["message_id"] == message["Message-ID"]
    assert "already used" in again


async def test_html_and_an_attachment_travel_byte_for_byte(tmp_path: Path) -> None:
    with smtp_server() as (port, received):
        async with world_services(tmp_path, settings(port)) as services:
            data = bytes(range(256)) * 10
            (tmp_path / "root" / "q3.bin").write_bytes(data)
            arguments = {
                "to": ["ana@example.com"],
                "subject": "Q3",
                "body": "See attached.",
                "html": "<p>See <b>attached</b>.</p>",
                "attachments": ["q3.bin"],
            }
            token = await precheck(services, **arguments)
            result = await call(services, send_email, **arguments, confirmation_token=token)
    assert not result.is_error, result.content
    message = parsed(received[0].data)
    html = message.get_body(("html",))
    assert html is not None and html.get_content() == "<p>See <b>attached</b>.</p>"
    [attachment] = list(message.iter_attachments())
    assert attachment.get_filename() == "q3.bin"
    assert attachment.get_content() == data


async def test_changed_arguments_or_a_changed_attachment_are_refused(tmp_path: Path) -> None:
    with smtp_server() as (port, received):
        async with world_services(tmp_path, settings(port)) as services:
            token = await precheck(services, **MESSAGE)
            changed = MESSAGE | {"bcc": ["archive@example.com", "eve@evil.example"]}
            message = await refused(services, **changed, confirmation_token=token)
            assert "differ" in message and "bcc" in message

            (tmp_path / "root" / "a.txt").write_text("first")
            with_file = MESSAGE | {"attachments": ["a.txt"]}
            token = await precheck(services, **with_file)
            (tmp_path / "root" / "a.txt").write_text("second")
            message = await refused(services, **with_file, confirmation_token=token)
            assert "attachment_sha256" in message
    assert received == []


async def test_an_expired_or_unknown_token_is_refused(tmp_path: Path) -> None:
    with smtp_server() as (port, received):
        async with world_services(
            tmp_path, settings(port, confirmation_ttl_seconds=0.05)
        ) as services:
            token = await precheck(services, **MESSAGE)
            await anyio.sleep(0.1)
            assert "expired" in await refused(services, **MESSAGE, confirmation_token=token)
            unknown = await refused(services, **MESSAGE, confirmation_token="cnf_made_up")
            assert "unknown" in unknown
    assert received == []


async def test_a_server_that_is_down_gives_an_error_and_no_retry(tmp_path: Path) -> None:
    async with world_services(tmp_path, settings(closed_port())) as services:
        token = await precheck(services, **MESSAGE)
        result = await call(services, send_email, **MESSAGE, confirmation_token=token)
        assert result.is_error
        assert "may or may not have been delivered" in result.content
        assert "run the precheck again" in result.content
        again = await refused(services, **MESSAGE, confirmation_token=token)
        assert "already used" in again and "failed" in again


async def test_refused_recipients_are_named(tmp_path: Path) -> None:
    with smtp_server(refuse={"ghost@example.com"}) as (port, received):
        async with world_services(tmp_path, settings(port)) as services:
            some = {"to": ["ana@example.com", "ghost@example.com"], "subject": "s", "body": "b"}
            token = await precheck(services, **some)
            partly = await call(services, send_email, **some, confirmation_token=token)
            only = {"to": ["ghost@example.com"], "subject": "s", "body": "b"}
            token = await precheck(services, **only)
            nobody = await call(services, send_email, **only, confirmation_token=token)
    assert not partly.is_error
    assert "ghost@example.com (550" in partly.content
    assert partly.structured["accepted"] == ["ana@example.com"]
    assert nobody.is_error
    assert "refused every recipient: ghost@example.com (550" in nobody.content
    assert [r.recipients for r in received] == [["ana@example.com"]]


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"to": ["not-an-address"]}, "is not an email address"),
        ({"to": ["a@example.com, b@example.com"]}, "is not"),
        ({"to": ["ana@example.com\r\nBcc: eve@evil.example"]}, "line break"),
        ({"cc": ["ana@example.com"]}, "more than once"),
        ({"subject": "one\nBcc: eve@evil.example"}, "line break"),
        ({"to": []}, "`to`"),
        ({"to": "ana@example.com"}, "`to`"),
        ({"subject": 42}, "`subject`"),
        ({"body": "x" * 1_000_001}, "`body`"),
        ({"attachments": ["../outside.txt"]}, "outside the root"),
        ({"attachments": ["missing.pdf"]}, "There is no file"),
        ({"attachments": ["."]}, "not a regular file"),
        ({"to": [f"u{i}@example.com" for i in range(101)]}, "`to`"),
        ({"priority": "high"}, "not a parameter"),
    ],
)
async def test_bad_input_is_refused_before_anything_is_sent(
    tmp_path: Path, arguments: dict[str, Any], expected: str
) -> None:
    base = {"to": ["ana@example.com"], "subject": "s", "body": "b"}
    with smtp_server() as (port, received):
        async with world_services(tmp_path, settings(port)) as services:
            message = await refused(services, **(base | arguments))
    assert expected in message
    assert received == []


@pytest.mark.parametrize("address", ["ana@café.example", "zoë@example.com"])
async def test_an_address_outside_ascii_is_refused(tmp_path: Path, address: str) -> None:
    # Found by test_every_tool's edge values: formataddr raised UnicodeEncodeError.
    base = {"to": [address], "subject": "s", "body": "b"}
    with smtp_server() as (port, received):
        async with world_services(tmp_path, settings(port)) as services:
            message = await refused(services, **base)
    assert "has characters outside ASCII" in message
    assert received == []


async def test_missing_body_and_settings_problems_are_explained(tmp_path: Path) -> None:
    async with world_services(tmp_path) as services:
        missing = await refused(services, to=["ana@example.com"], subject="s")
        assert "`body` is required" in missing
        no_sender = await refused(services, to=["ana@example.com"], subject="s", body="b")
        assert "from_address" in no_sender
        services.settings[EmailSettings] = settings(25, password_env="WAKEFUL_TEST_NO_SUCH_VAR")
        no_password = await refused(services, to=["ana@example.com"], subject="s", body="b")
        assert "'WAKEFUL_TEST_NO_SUCH_VAR', which is not set" in no_password


async def test_an_oversize_attachment_is_refused(tmp_path: Path) -> None:
    async with world_services(tmp_path, settings(25, max_attachment_bytes=100)) as services:
        (tmp_path / "root" / "big.bin").write_bytes(b"x" * 101)
        message = await refused(
            services, to=["ana@example.com"], subject="s", body="b", attachments=["big.bin"]
        )
    assert "101 bytes, over the limit of 100 bytes" in message
