"""The exceptions wakeful raises, in three families kept apart.

* Mistakes of the developer or operator using the library: :class:`UserError` and its
  subclasses. Fix the code or the configuration; retrying will not help.
* Failures during a run that are nobody's programming mistake: :class:`ModelAPIError` and its
  subclasses (raised by model providers), :class:`StoreError`.
* Signals a tool raises to steer the model: :class:`ToolError`. The runtime turns it into a
  tool result marked as an error, so the model can correct itself.
"""

from __future__ import annotations


class WakefulError(Exception):
    """Base class of every exception wakeful raises on purpose."""


# --- mistakes of the developer or operator ---------------------------------------------------


class UserError(WakefulError):
    """The library was used in a way it does not support; the message says how to fix it."""


class ConfigError(UserError):
    """The configuration file or a configuration value is invalid."""


class ModelRequestsDisabled(UserError):
    """A real model request was attempted while `wakeful.models.ALLOW_MODEL_REQUESTS` is off."""


# --- failures during a run ---------------------------------------------------------------------


class ModelAPIError(WakefulError):
    """A model provider failed. Raised by the adapters in `wakeful.models`, never by the loop."""

    def __init__(self, message: str, *, provider: str, status_code: int | None = None) -> None:
        super().__init__(message)
        self.provider = provider
        self.status_code = status_code


class ModelRateLimited(ModelAPIError):
    """The provider answered 429 and retries were exhausted."""

    def __init__(
        self,
        message: str,
        *,
        provider: str,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, provider=provider, status_code=429)
        self.retry_after = retry_after


class ModelTimeout(ModelAPIError):
    """The provider did not answer within the configured timeout, after all retries."""


class ModelConnectionError(ModelAPIError):
    """The connection to the provider failed or dropped mid-stream."""


class ModelResponseError(ModelAPIError):
    """The provider answered with something the adapter cannot read."""


class StoreError(WakefulError):
    """The SQLite store failed or holds data this version cannot read."""


class SessionMoved(StoreError):
    """This process no longer owns the session it wrote for (another worker of a shared store
    took it over, or its lease expired): nothing of the write was saved, and this copy of the
    session must stop; its owner continues it from the store."""


class StoreFull(StoreError):
    """The disk holding the store is full, or below the space the store keeps in reserve.

    Raised by the store for writes it cannot keep: new events (`Runtime.submit`) are refused
    while space is short, and nothing of them is stored. Writes of work already under way
    (trajectories, event marks, task and timer state) are not refused: the store holds them in
    memory and writes them, in order, once space returns.
    """

    def __init__(self, message: str, *, free_bytes: int | None = None) -> None:
        super().__init__(message)
        self.free_bytes = free_bytes


# --- signals a tool raises ---------------------------------------------------------------------


class ToolError(WakefulError):
    """Raised inside a tool to return an error message to the model instead of a result.

    The message should say what was wrong and what the model can do instead.
    """
