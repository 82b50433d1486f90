"""A Dovecot for the email channel tests, in a temporary directory of its own.

Not under pytest's `tmp_path`: pytest resets its base directory (/tmp/pytest-of-<user>) to mode
0700 whenever a session starts, so a test session running beside this one would cut Dovecot's
mail user off from the Maildirs midway (doveadm then fails with "Permission denied")."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from email_harness import stop_server

from wakeful.demo.mail_servers import DovecotServer, SmtpRelay, dovecot_missing, start_dovecot


@pytest.fixture
def dovecot() -> Iterator[DovecotServer]:
    """A fresh Dovecot IMAP server on 127.0.0.1 with one user; skipped, with the command that
    installs it, where Dovecot is missing."""
    missing = dovecot_missing()
    if missing:
        pytest.skip(missing)
    root = Path(tempfile.mkdtemp(prefix="wakeful-email-tests-"))
    try:
        server = start_dovecot(root / "dovecot")
        try:
            yield server
        finally:
            stop_server(server)
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def smtp_relay(dovecot: DovecotServer) -> Iterator[SmtpRelay]:
    """An SMTP server on 127.0.0.1 that relays what it accepts into the Dovecot's mailboxes (by
    LMTP), as the user's mail system would."""
    relay = SmtpRelay(dovecot)
    relay.start()
    try:
        yield relay
    finally:
        relay.stop()
