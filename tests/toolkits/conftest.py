"""Fixtures shared by the perception tools' tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tool_services import tool_services
from wakeful.services import Services


@pytest.fixture
async def services(root: Path) -> AsyncIterator[Services]:
    """Real runtime services working under the test module's own `root` fixture."""
    async with tool_services(root) as (services, _events):
        yield services
