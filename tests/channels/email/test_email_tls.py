"""The email channel over TLS against a real Dovecot with its own certificate: STARTTLS and
implicit TLS deliver mail when the certificate is trusted (tls_ca_file), and an untrusted one is
refused with the setting that fixes it, never sent a password."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
from email_harness import (
    PASSWORD_ENV,
    deliver,
    email_channel,
    message,
    stop_server,
    wait_for_events,
    wait_for_state,
)

from wakeful.demo.mail_servers import DovecotServer
from wakeful.errors import ConfigError
from wakeful.store.sqlite import Store

pytestmark = pytest.mark.anyio


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    async with await Store.open(tmp_path / "state.db", synchronous="normal") as opened:
        yield opened


@pytest.fixture
def tls_dovecot(
    dovecot: DovecotServer, monkeypatch: pytest.MonkeyPatch
) -> tuple[DovecotServer, Path, int]:
    """The test Dovecot with a self-signed certificate for 127.0.0.1: STARTTLS on its IMAP port,
    implicit TLS on another; returns (server, certificate, implicit TLS port)."""
    monkeypatch.setenv(PASSWORD_ENV, dovecot.password)
    cert, key = dovecot.root / "cert.pem", dovecot.root / "key.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"),
            *("-keyout", str(key), "-out", str(cert)),
        ],
        check=True,
        capture_output=True,
    )
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        implicit_port = int(probe.getsockname()[1])
    stop_server(dovecot)
    config = dovecot.config.read_text()
    config = config.replace("ssl = no", f"ssl = yes\nssl_cert = <{cert}\nssl_key = <{key}")
    config = config.replace(
        "inet_listener imaps {\n    port = 0",
        f"inet_listener imaps {{\n    address = 127.0.0.1\n    port = {implicit_port}",
    )
    assert f"port = {implicit_port}" in config
    dovecot.config.write_text(config)
    dovecot.start()
    return dovecot, cert, implicit_port


@pytest.mark.parametrize("mode", ["starttls", "implicit"])
async def test_mail_arrives_over_tls_with_a_trusted_certificate(
    tls_dovecot: tuple[DovecotServer, Path, int], store: Store, tmp_path: Path, mode: str
) -> None:
    server, cert, implicit_port = tls_dovecot
    port = implicit_port if mode == "implicit" else server.port
    channel = email_channel(
        server, store, tmp_path / "ws", tls=mode, port=port, tls_ca_file=str(cert)
    )
    async with anyio.create_task_group() as group:
        await group.start(channel.run)
        await wait_for_state(channel, "running")
        await deliver(server, message(f"over {mode}"))
        [event] = await wait_for_events(store, 1)
        group.cancel_scope.cancel()
    assert event.content["subject"] == f"over {mode}"  # type: ignore[index]


async def test_an_untrusted_certificate_is_refused_naming_tls_ca_file(
    tls_dovecot: tuple[DovecotServer, Path, int], store: Store, tmp_path: Path
) -> None:
    server, _, implicit_port = tls_dovecot
    channel = email_channel(server, store, tmp_path / "ws", tls="implicit", port=implicit_port)
    async with anyio.create_task_group() as group:
        await group.start(channel.run)
        detail = await wait_for_state(channel, "degraded")
        group.cancel_scope.cancel()
    assert "SSLCertVerificationError" in detail
    assert "set tls_ca_file" in detail
    assert "auth failed" not in server.log()


async def test_an_unreadable_ca_file_fails_the_start(
    tls_dovecot: tuple[DovecotServer, Path, int], store: Store, tmp_path: Path
) -> None:
    server, _, implicit_port = tls_dovecot
    bogus = tmp_path / "not-a-cert.pem"
    bogus.write_text("hello")
    channel = email_channel(
        server, store, tmp_path / "ws", tls="implicit", port=implicit_port, tls_ca_file=str(bogus)
    )
    with pytest.raises(ConfigError, match="could not be read as PEM certificates"):
        await channel.run()
