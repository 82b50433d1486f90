"""Test-suite settings: no real model requests, anyio on asyncio."""

from __future__ import annotations

import pytest

import wakeful.models.guard as guard

guard.ALLOW_MODEL_REQUESTS = False


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["openat2", "walk"])
def resolution(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Paths beneath a root resolved as the kernel allows (openat2), and by the fallback walk."""
    from wakeful.safety import beneath

    if request.param == "openat2" and not beneath.openat2_available():
        pytest.skip("this kernel has no openat2")
    monkeypatch.setattr(beneath, "use_openat2", request.param == "openat2")
    return str(request.param)
