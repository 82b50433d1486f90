"""Test-suite settings: no real model requests, anyio on asyncio."""

from __future__ import annotations

import pytest

import wakeful.models.guard as guard

guard.ALLOW_MODEL_REQUESTS = False


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
