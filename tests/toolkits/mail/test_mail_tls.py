"""STARTTLS against a real Dovecot with a certificate from a CA made for the test (openssl):
trusted through ca_file, refused without it, with the setting to change named."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from mail_fixtures import deliver, mail_settings, message, stop

from servers.dovecot import DovecotServer
from tool_services import call, refused
from wakeful.services import Services
from wakeful.toolkits.mail.reading import search_mail
from wakeful.toolkits.mail.settings import MailSettings

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA, and a certificate it signed for 127.0.0.1: ca.pem, server.pem, server.key."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is missing: apt-get install openssl")
    folder = tmp_path_factory.mktemp("tls")

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=folder, check=True, capture_output=True)

    openssl(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=wakeful test CA",
    )
    openssl(
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        "-subj",
        "/CN=127.0.0.1",
    )
    (folder / "ext").write_text("subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n")
    openssl(
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.pem",
        "-days",
        "2",
        "-extfile",
        "ext",
    )
    return folder


@pytest.fixture
def tls_dovecot(dovecot: DovecotServer, certificates: Path) -> DovecotServer:
    """The test's Dovecot, restarted offering STARTTLS with the test CA's certificate."""
    stop(dovecot)
    with dovecot.config.open("a") as config:
        config.write(
            f"ssl = yes\nssl_cert = <{certificates / 'server.pem'}\n"
            f"ssl_key = <{certificates / 'server.key'}\n"
        )
    dovecot.start()
    return dovecot


async def test_starttls_with_the_servers_ca_logs_in_encrypted(
    mail: Services, tls_dovecot: DovecotServer, certificates: Path
) -> None:
    deliver(tls_dovecot, message("Over TLS"))
    mail.settings[MailSettings] = mail_settings(
        tls_dovecot, security="starttls", ca_file=certificates / "ca.pem"
    )

    result = await call(mail, search_mail)

    assert [m["subject"] for m in result.structured["messages"]] == ["Over TLS"]
    logins = [line for line in tls_dovecot.log().splitlines() if "Login: user=<secretary>" in line]
    assert logins and all("TLS" in line for line in logins)


async def test_an_untrusted_certificate_names_the_setting_to_change(
    mail: Services, tls_dovecot: DovecotServer, tmp_path: Path
) -> None:
    mail.settings[MailSettings] = mail_settings(tls_dovecot, security="starttls")
    text = await refused(mail, search_mail)
    assert "its certificate is not trusted (unable to get local issuer certificate)" in text
    assert "set ca_file in [tools.mail]" in text
    assert "Login: user=" not in tls_dovecot.log()  # the password never left

    mail.settings[MailSettings] = mail_settings(
        tls_dovecot, security="starttls", ca_file=tmp_path / "missing.pem"
    )
    assert "cannot be loaded" in await refused(mail, search_mail)
