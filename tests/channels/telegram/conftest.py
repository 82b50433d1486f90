"""What the Telegram tests share."""

from collections.abc import Iterator

import pytest
from telegram_harness import TOKEN_ENV

from servers.telegram_api import FakeBotApi


@pytest.fixture
def token(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The bot token the loopback Bot API knows, in the variable the channel's settings name."""
    monkeypatch.setenv(TOKEN_ENV, FakeBotApi.token)
    yield
