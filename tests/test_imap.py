"""The IMAP edge shared by the email channel and the mail tools: what a server's faults turn into.

The faults come first, from a scripted IMAP server on 127.0.0.1 (one that never greets, answers
LOGIN with an RFC 5530 code, drops the connection mid-command, offers no STARTTLS, announces new
mail outside IDLE), then the ordinary path against a real Dovecot.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import pytest
from anyio.abc import SocketStream

from servers.dovecot import DovecotServer
from servers.fixtures import dovecot  # noqa: F401
from wakeful import imap
from wakeful.imap import ImapEndpoint, ImapSession

pytestmark = pytest.mark.anyio

GREETING = b"* OK [CAPABILITY IMAP4rev1 IDLE] scripted ready\r\n"
CAPABILITY = b"* CAPABILITY IMAP4rev1 IDLE\r\n"

# What the scripted server answers to a command: the lines to send before the tagged answer and
# the tagged answer's text ("OK done", or None to leave the command unanswered); or None to close
# the connection without answering.
Answer = tuple[list[bytes], str | None] | None


@dataclass
class ScriptedServer:
    """An IMAP server on 127.0.0.1 that answers each command as `answers` says (by command
    name; CAPABILITY, LOGIN, SELECT and LOGOUT answer OK unless told otherwise) and records every
    line it received."""

    port: int
    answers: dict[str, Answer]
    greet: bool = True
    received: list[bytes] = field(default_factory=list)

    async def serve(self, stream: SocketStream) -> None:
        async with stream:
            if not self.greet:
                await anyio.sleep_forever()
            await stream.send(GREETING)
            buffered = b""
            while True:
                try:
                    buffered += await stream.receive()
                except (anyio.EndOfStream, anyio.BrokenResourceError):
                    return
                while b"\r\n" in buffered:
                    line, buffered = buffered.split(b"\r\n", 1)
                    self.received.append(line)
                    tag, _, rest = line.partition(b" ")
                    name = rest.split(b" ", 1)[0].decode().upper()
                    answer = self.answers.get(name, _ORDINARY.get(name, ([], "OK done")))
                    if answer is None:
                        return
                    untagged, tagged = answer
                    said = b"" if tagged is None else tag + b" " + tagged.encode() + b"\r\n"
                    await stream.send(b"".join(untagged) + said)


_ORDINARY: dict[str, Answer] = {
    "CAPABILITY": ([CAPABILITY], "OK done"),
    "SELECT": (
        [b"* 3 EXISTS\r\n", b"* OK [UIDVALIDITY 7] ok\r\n", b"* OK [UIDNEXT 4] ok\r\n"],
        "OK",
    ),
    "LOGOUT": ([b"* BYE bye\r\n"], "OK done"),
}


@asynccontextmanager
async def scripted(
    answers: dict[str, Answer], *, greet: bool = True
) -> AsyncIterator[ScriptedServer]:
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    server = ScriptedServer(port, answers, greet)
    async with listener, anyio.create_task_group() as group:
        group.start_soon(listener.serve, server.serve)
        yield server
        group.cancel_scope.cancel()


def endpoint(port: int, *, tls: imap.TlsMode = "plain", timeout: float = 30.0) -> ImapEndpoint:
    return ImapEndpoint("127.0.0.1", port, tls, None, timeout)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# --- faults ------------------------------------------------------------------------------------


async def test_nothing_listening_is_a_connect_failure_caused_by_the_refusal() -> None:
    with pytest.raises(imap.ConnectFailed) as raised:
        async with ImapSession.open(endpoint(free_port()), "secretary", "pw"):
            pass
    assert isinstance(raised.value.__cause__, ConnectionRefusedError)
    assert "Could not connect to the IMAP server 127.0.0.1:" in str(raised.value)


async def test_a_server_that_never_greets_fails_within_the_timeout() -> None:
    async with scripted({}, greet=False) as server:
        with anyio.fail_after(20), pytest.raises(imap.ConnectFailed) as raised:
            async with ImapSession.open(endpoint(server.port, timeout=0.3), "secretary", "pw"):
                pass
    assert isinstance(raised.value.__cause__, TimeoutError)


async def test_a_wrong_password_is_a_refusal_and_a_busy_server_is_not() -> None:
    async with scripted({"LOGIN": ([], "NO [AUTHENTICATIONFAILED] Authentication failed.")}) as s:
        with pytest.raises(imap.LoginRefused) as refused:
            async with ImapSession.open(endpoint(s.port), "secretary", "wrong"):
                pass
    assert refused.value.said == "NO [AUTHENTICATIONFAILED] Authentication failed."
    async with scripted({"LOGIN": ([], "NO [UNAVAILABLE] Try again later.")}) as server:
        with pytest.raises(imap.LoginDeferred) as deferred:
            async with ImapSession.open(endpoint(server.port), "secretary", "right"):
                pass
    assert not isinstance(deferred.value, imap.LoginRefused)
    assert deferred.value.said == "NO [UNAVAILABLE] Try again later."


async def test_starttls_not_offered_never_sends_the_password() -> None:
    async with scripted({}) as server:
        with pytest.raises(imap.StartTlsMissing, match="does not offer STARTTLS"):
            async with ImapSession.open(endpoint(server.port, tls="starttls"), "me", "secret"):
                pass
    assert not any(b"secret" in line for line in server.received)


async def test_a_connection_dropped_mid_command_is_noticed_at_once() -> None:
    async with (
        scripted({"NOOP": None}) as server,
        ImapSession.open(endpoint(server.port, timeout=600), "me", "pw") as session,
    ):
        with anyio.fail_after(20), pytest.raises(imap.ConnectionLost) as raised:
            await session.run("NOOP", session.client.noop())
        assert session.lost
        with pytest.raises(imap.ConnectionLost, match="closed the connection before NOOP"):
            await session.run("NOOP", session.client.noop())
    assert raised.value.doing == "NOOP"
    assert raised.value.__cause__ is None


async def test_a_command_the_server_never_answers_times_out_with_its_name() -> None:
    async with (
        scripted({"NOOP": ([], None)}) as server,
        ImapSession.open(endpoint(server.port, timeout=1), "me", "pw") as session,
    ):
        with pytest.raises(imap.CommandFailed, match="IMAP NOOP failed") as raised:
            await session.run(
                "NOOP", session.client.protocol.simple_command("NOOP"), limit_seconds=0.3
            )
    assert isinstance(raised.value.__cause__, TimeoutError)


async def test_mail_announced_outside_idle_is_counted() -> None:
    async with (
        scripted({"NOOP": ([b"* 4 EXISTS\r\n"], "OK done")}) as server,
        ImapSession.open(endpoint(server.port), "me", "pw") as session,
    ):
        await session.select('"INBOX"', read_only=False)
        before = session.exists_notices
        await session.run("NOOP", session.client.noop())
        assert session.exists_notices == before + 1


async def test_a_mailbox_without_uidvalidity_is_refused() -> None:
    async with (
        scripted({"EXAMINE": ([b"* 3 EXISTS\r\n"], "OK [READ-ONLY] done")}) as server,
        ImapSession.open(endpoint(server.port), "me", "pw") as session,
    ):
        with pytest.raises(imap.NoUidValidity, match="gave no UIDVALIDITY"):
            await session.select('"INBOX"', read_only=True)


def test_an_unreadable_ca_file_names_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "ca.pem"
    bad.write_text("not a certificate\n", encoding="utf-8")
    with pytest.raises(imap.CaFileUnreadable, match=r"ca\.pem") as raised:
        imap.tls_context(bad)
    assert raised.value.ca_file == bad
    assert raised.value.__cause__ is not None


# --- against Dovecot ---------------------------------------------------------------------------


async def test_dovecot_session_selects_read_only_and_logs_out(dovecot: DovecotServer) -> None:  # noqa: F811
    at = endpoint(dovecot.port)
    async with ImapSession.open(at, dovecot.user, dovecot.password) as session:
        examined = await session.select('"INBOX"', read_only=True)
        selected = await session.select('"INBOX"', read_only=False)
        assert examined == selected
        assert examined.uidvalidity > 0
        with pytest.raises(imap.MailboxRefused) as refused:
            await session.select('"Nowhere"', read_only=True)
        assert refused.value.said.startswith("NO")


async def test_dovecot_refuses_a_wrong_password(dovecot: DovecotServer) -> None:  # noqa: F811
    with pytest.raises(imap.LoginRefused) as raised:
        async with ImapSession.open(endpoint(dovecot.port), dovecot.user, "wrong"):
            pass
    assert "NO" in raised.value.said
