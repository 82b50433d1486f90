"""The mail tools' world: a real Dovecot on 127.0.0.1, and services whose [tools.mail] settings
point at it (the password in an environment variable, as a deployment has it)."""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from mail_fixtures import PASSWORD_ENV, mail_settings, stop

from servers.dovecot import DovecotServer, dovecot_missing, start_dovecot
from tool_services import tool_services
from wakeful.services import Services
from wakeful.store.sqlite import Store
from wakeful.toolkits.mail.settings import MailSettings


@pytest.fixture
def dovecot() -> Iterator[DovecotServer]:
    """A fresh Dovecot (see servers.fixtures), in a temporary directory of its own: Dovecot's
    users must traverse its parents, and pytest makes its base directory 0700 again whenever
    another test session starts. Its stderr pipe is closed after it stops, which
    `DovecotServer.stop` leaves open (an unraisable ResourceWarning otherwise)."""
    missing = dovecot_missing()
    if missing:
        pytest.skip(missing)
    with tempfile.TemporaryDirectory(prefix="wakeful-mail-tools-") as folder:
        server = start_dovecot(Path(folder) / "dovecot")
        try:
            yield server
        finally:
            stop(server)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    return workspace


@pytest.fixture
async def mail(
    dovecot: DovecotServer,
    root: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[Services]:
    """Services with a workspace, a store, and MailSettings for the test's Dovecot."""
    monkeypatch.setenv(PASSWORD_ENV, dovecot.password)
    store = await Store.open(root.parent / "state.db")
    async with store, tool_services(root) as (services, _events):
        services.store = store  # send_email keeps its confirmation tokens there
        services.settings[MailSettings] = mail_settings(dovecot)
        yield services
