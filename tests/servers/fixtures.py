"""pytest fixtures for the real servers in this package; import them into a conftest.py:

from servers.fixtures import dovecot  # noqa: F401
from servers.fixtures import prosody  # noqa: F401
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from .dovecot import DovecotServer, dovecot_missing, start_dovecot
from .prosody import ProsodyServer, prosody_missing, start_prosody

__all__ = ["dovecot", "prosody"]


@pytest.fixture
def dovecot() -> Iterator[DovecotServer]:
    """A fresh Dovecot IMAP server on 127.0.0.1 with one user and empty special-use mailboxes;
    skipped, with the command that installs it, where Dovecot is missing.

    Its files are in a directory of their own under the system's temp dir, not under pytest's
    (which pytest makes private again whenever another test session starts, locking Dovecot's
    own users out of it)."""
    missing = dovecot_missing()
    if missing:
        pytest.skip(missing)
    with tempfile.TemporaryDirectory(prefix="wakeful-dovecot-") as root:
        server = start_dovecot(Path(root) / "dovecot")
        try:
            yield server
        finally:
            server.stop()


@pytest.fixture
def prosody(tmp_path: Path) -> Iterator[ProsodyServer]:
    """A fresh Prosody XMPP server on 127.0.0.1 (host "localhost", rooms on
    "conference.localhost") with no accounts yet; skipped, with the command that installs it,
    where Prosody is missing."""
    missing = prosody_missing()
    if missing:
        pytest.skip(missing)
    server = start_prosody(tmp_path / "prosody")
    try:
        yield server
    finally:
        server.stop()
