"""When a failed model request is tried again, and how long to wait first.

The provider adapters translate each SDK exception into a :class:`Failure` (the wakeful error to
raise, whether another attempt may help, and how long the provider asked us to wait);
:func:`stream_with_retries` owns the policy. It retries rate limits, server errors, timeouts and
connection failures with exponential backoff and jitter, honours `Retry-After`, and never
restarts a turn once part of it has reached the consumer: a half-streamed turn is an error the
caller must see, not something to splice silently. The SDKs' own retries are switched off so this
is the only policy.
"""

from __future__ import annotations

import email.utils
import logging
import math
import random
from collections.abc import AsyncGenerator, Callable, Mapping
from contextlib import aclosing
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TypeVar

import anyio

from ..errors import ModelAPIError, ModelRateLimited, ModelTimeout, UserError

logger = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Backoff:
    """How long to wait before each retry: doubling from `initial`, capped at `maximum`.

    Each wait is drawn between half and all of its doubled value (jitter), so clients that failed
    together do not retry together. A `Retry-After` longer than `maximum` is not waited out: the
    error is raised at once, carrying the provider's wait, so the caller can schedule the turn.
    """

    initial: float = 0.5
    maximum: float = 30.0

    def __post_init__(self) -> None:
        if not (self.initial > 0 and self.maximum >= self.initial):
            raise UserError(
                f"Backoff(initial={self.initial}, maximum={self.maximum}) is invalid: initial "
                "must be positive and maximum at least initial, for example "
                "Backoff(initial=0.5, maximum=30)."
            )

    def delay(self, retry: int) -> float:
        """The wait before retry number `retry` (0 for the first retry)."""
        ceiling = min(self.maximum, self.initial * 2.0**retry)
        return ceiling * (0.5 + random.random() / 2)


@dataclass(frozen=True, slots=True)
class Failure:
    """A provider error translated at the edge: what to raise, and whether to try again."""

    error: ModelAPIError
    retryable: bool = False
    retry_after: float | None = None


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where a request went, so error messages can say where to look."""

    provider: str
    model: str
    base_url: str
    api_key_hint: str
    """How to set the API key, e.g. "pass api_key= to OpenAIChatModel or set OPENAI_API_KEY"."""


def retry_after_from_headers(
    headers: Mapping[str, str], *, now: datetime | None = None
) -> float | None:
    """Seconds the provider asked us to wait, from `retry-after-ms` or `retry-after`.

    `retry-after` may hold seconds or an HTTP date. Unreadable or negative values count as absent.
    `headers` should look names up case-insensitively, as `httpx.Headers` does.
    """
    milliseconds = _non_negative_float(headers.get("retry-after-ms"))
    if milliseconds is not None:
        return milliseconds / 1000
    value = headers.get("retry-after")
    if value is None:
        return None
    seconds = _non_negative_float(value)
    if seconds is not None:
        return seconds
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def _non_negative_float(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) and number >= 0 else None


def failure_for_status(
    endpoint: Endpoint, status: int, *, headers: Mapping[str, str], detail: str
) -> Failure:
    """Translate an HTTP error status into the wakeful error to raise, and whether to retry.

    429, 408, 409 and 5xx are retryable (409 is how some providers report a transient lock);
    every other status is a problem with the request or the credentials that retrying won't fix.
    """
    where = f"The {endpoint.provider} API at {endpoint.base_url}"
    said = f"HTTP {status}: {detail}" if detail else f"HTTP {status}"
    retry_after = retry_after_from_headers(headers)
    if status == 429:
        asked = f" It asked to wait {retry_after:g} s." if retry_after is not None else ""
        return Failure(
            ModelRateLimited(
                f"{where} is rate limiting requests for model {endpoint.model!r} ({said}).{asked} "
                "Wait before the next turn, lower the request rate, or raise max_retries.",
                provider=endpoint.provider,
                retry_after=retry_after,
            ),
            retryable=True,
            retry_after=retry_after,
        )
    if status == 408:
        return Failure(
            ModelTimeout(
                f"{where} timed out while reading the request ({said}). Try again; if it "
                "persists, check the network between here and the server.",
                provider=endpoint.provider,
                status_code=status,
            ),
            retryable=True,
            retry_after=retry_after,
        )
    if status == 409 or status >= 500:
        return Failure(
            ModelAPIError(
                f"{where} failed on its side ({said}). This is usually temporary: try the turn "
                "again later, or raise max_retries.",
                provider=endpoint.provider,
                status_code=status,
            ),
            retryable=True,
            retry_after=retry_after,
        )
    if status == 401:
        message = (
            f"{where} rejected the API key ({said}). Check the API key: {endpoint.api_key_hint}."
        )
    elif status == 403:
        message = (
            f"{where} refused access ({said}). The API key may not be allowed to use model "
            f"{endpoint.model!r}; check its permissions or choose another model."
        )
    elif status == 404:
        message = (
            f"{where} answered 404 for model {endpoint.model!r} ({said}). Check the model name, "
            "and that base_url is the API root the provider documents."
        )
    elif status in (400, 413, 422):
        message = (
            f"{where} rejected the request as invalid ({said}). Usually the conversation no "
            "longer fits the model's context window, or a parameter or tool schema is not "
            "supported by this model or server; the detail says which."
        )
    else:
        message = f"{where} refused the request ({said}). Check the request and the model name."
    return Failure(ModelAPIError(message, provider=endpoint.provider, status_code=status))


async def stream_with_retries(
    attempt: Callable[[], AsyncGenerator[T, None]],
    translate: Callable[[Exception], Failure | None],
    *,
    max_retries: int,
    backoff: Backoff,
) -> AsyncGenerator[T, None]:
    """Yield the parts of `attempt()`, starting it again after retryable failures.

    `attempt` opens one request and streams its parts; `translate` turns an exception it raises
    into a `Failure`, or returns None for exceptions that are not provider failures (those
    propagate unchanged). A failure is retried only while nothing has been yielded yet; after
    that it is raised, because the consumer already holds part of the turn. Closing or cancelling
    the consumer closes the attempt in progress, and with it the HTTP stream.
    """
    retries = 0
    while True:
        started = False
        async with aclosing(attempt()) as parts:
            while True:
                try:
                    part = await anext(parts)
                except StopAsyncIteration:
                    return
                except Exception as exc:
                    failure = translate(exc)
                    if failure is None:
                        raise
                    wait = _wait_before_retry(failure, started, retries, max_retries, backoff)
                    if wait is None:
                        raise failure.error from exc
                    break
                started = True
                yield part
        retries += 1
        logger.warning("%s Retry %d of %d in %.2f s.", failure.error, retries, max_retries, wait)
        await anyio.sleep(wait)


def _wait_before_retry(
    failure: Failure, started: bool, retries: int, max_retries: int, backoff: Backoff
) -> float | None:
    """Seconds to wait before the next attempt, or None to raise the failure now."""
    if not failure.retryable:
        return None
    error = failure.error
    if started:
        error.add_note(
            "Not retried: part of the turn had already been streamed. Discard the partial turn "
            "and run the turn again."
        )
        return None
    if retries >= max_retries:
        error.add_note(f"Gave up after {retries + 1} attempts (max_retries={max_retries}).")
        return None
    if failure.retry_after is None:
        return backoff.delay(retries)
    if failure.retry_after > backoff.maximum:
        error.add_note(
            f"Not retried: the provider asked to wait {failure.retry_after:g} s, longer than "
            f"the longest wait allowed (Backoff.maximum={backoff.maximum:g} s)."
        )
        return None
    return failure.retry_after
