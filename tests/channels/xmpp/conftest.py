"""The XMPP tests' Prosody, and the accounts on it."""

from collections.abc import Iterator

import pytest
from xmpp_harness import PASSWORD_ENV, PASSWORDS, add_accounts

from servers.fixtures import prosody  # noqa: F401
from servers.prosody import ProsodyServer


@pytest.fixture
def accounts(prosody: ProsodyServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:  # noqa: F811
    """The agent's and the peers' accounts on `prosody`, the agent's password in the variable
    the channel's settings name."""
    add_accounts(prosody)
    monkeypatch.setenv(PASSWORD_ENV, PASSWORDS["agent"])
    yield
