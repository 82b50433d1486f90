"""A module-level switch that keeps test suites from calling real model providers.

Set `wakeful.models.guard.ALLOW_MODEL_REQUESTS = False` (the test suite's conftest does). While it
is off, providers only talk to loopback addresses, so tests can run the real SDKs against local
servers but can never reach a paid API.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from ..errors import ModelRequestsDisabled

ALLOW_MODEL_REQUESTS = True

_LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


def check_model_request_allowed(provider: str, base_url: str | None) -> None:
    if ALLOW_MODEL_REQUESTS:
        return
    host = urlsplit(base_url).hostname if base_url else None
    if host in _LOOPBACK_HOSTS or (host or "").startswith("127."):
        return
    raise ModelRequestsDisabled(
        f"Real model requests are disabled (wakeful.models.guard.ALLOW_MODEL_REQUESTS is False), "
        f"but the {provider} provider was about to call {base_url or 'its default API'}. "
        "Use wakeful.models.ScriptedModel or FunctionModel in tests, or point base_url at a "
        "server on 127.0.0.1."
    )
