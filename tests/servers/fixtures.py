"""pytest fixtures for the real servers in this package; import them into a conftest.py:

from servers.fixtures import dovecot  # noqa: F401
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .dovecot import DovecotServer, dovecot_missing, start_dovecot

__all__ = ["dovecot"]


@pytest.fixture
def dovecot(tmp_path: Path) -> Iterator[DovecotServer]:
    """A fresh Dovecot IMAP server on 127.0.0.1 with one user and empty special-use mailboxes;
    skipped, with the command that installs it, where Dovecot is missing."""
    missing = dovecot_missing()
    if missing:
        pytest.skip(missing)
    server = start_dovecot(tmp_path / "dovecot")
    try:
        yield server
    finally:
        server.stop()
