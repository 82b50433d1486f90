"""The retry policy on its own: Retry-After parsing, backoff bounds, when a stream is restarted."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from datetime import UTC, datetime

import httpx2
import pytest

from wakeful.errors import ModelAPIError, ModelRateLimited, UserError
from wakeful.models.retry import (
    Backoff,
    Endpoint,
    Failure,
    failure_for_status,
    retry_after_from_headers,
    stream_with_retries,
)

ENDPOINT = Endpoint("acme", "acme-1", "http://127.0.0.1:1", "pass api_key= or set ACME_API_KEY")
NOW = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"Retry-After": "2"}, 2.0),
        ({"retry-after": "0.25"}, 0.25),
        ({"retry-after": "Wed, 01 Jan 2025 12:00:30 GMT"}, 30.0),
        ({"retry-after": "Wed, 01 Jan 2025 11:59:00 GMT"}, 0.0),
        ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5),
        ({"retry-after": "soon"}, None),
        ({"retry-after": "-3"}, None),
        ({"retry-after": "nan"}, None),
        ({}, None),
    ],
)
def test_retry_after_reads_seconds_dates_and_milliseconds(
    headers: dict[str, str], expected: float | None
) -> None:
    assert retry_after_from_headers(httpx2.Headers(headers), now=NOW) == expected


def test_backoff_doubles_with_jitter_up_to_its_maximum() -> None:
    backoff = Backoff(initial=1, maximum=5)
    for _ in range(50):
        assert 0.5 <= backoff.delay(0) <= 1
        assert 2 <= backoff.delay(2) <= 4
        assert 2.5 <= backoff.delay(10) <= 5


def test_backoff_rejects_impossible_settings() -> None:
    with pytest.raises(UserError, match="maximum at least initial"):
        Backoff(initial=2, maximum=1)


def test_statuses_map_to_errors_and_retryability() -> None:
    no_headers = httpx2.Headers()
    limited = failure_for_status(
        ENDPOINT, 429, headers=httpx2.Headers({"retry-after": "3"}), detail=""
    )
    assert isinstance(limited.error, ModelRateLimited)
    assert (limited.retryable, limited.retry_after, limited.error.retry_after) == (True, 3, 3)
    assert failure_for_status(ENDPOINT, 503, headers=no_headers, detail="").retryable
    assert failure_for_status(ENDPOINT, 408, headers=no_headers, detail="").retryable
    denied = failure_for_status(ENDPOINT, 401, headers=no_headers, detail="bad key")
    assert not denied.retryable
    assert denied.error.status_code == 401
    assert "bad key" in str(denied.error) and "ACME_API_KEY" in str(denied.error)
    assert not failure_for_status(ENDPOINT, 400, headers=no_headers, detail="").retryable


class Flaky(Exception):
    """What the attempts below raise; `translate` maps it like an adapter would."""

    def __init__(self, status: int, retry_after: float | None = None) -> None:
        super().__init__(status)
        self.status = status
        self.retry_after = retry_after


def translate(exc: Exception) -> Failure | None:
    if not isinstance(exc, Flaky):
        return None
    headers = httpx2.Headers(
        {} if exc.retry_after is None else {"retry-after": str(exc.retry_after)}
    )
    return failure_for_status(ENDPOINT, exc.status, headers=headers, detail="")


Attempt = Callable[[], AsyncGenerator[str, None]]


def attempts(*plans: list[str | Exception]) -> tuple[list[int], Attempt]:
    """An attempt function that plays one plan per call: strings are yielded, errors raised."""
    started: list[int] = []

    async def attempt() -> AsyncGenerator[str, None]:
        started.append(len(started))
        for item in plans[len(started) - 1]:
            if isinstance(item, Exception):
                raise item
            yield item

    return started, attempt


async def run(attempt: Attempt, *, max_retries: int = 3, maximum: float = 1.0) -> list[str]:
    parts = stream_with_retries(
        attempt, translate, max_retries=max_retries, backoff=Backoff(0.001, maximum)
    )
    async with aclosing(parts) as stream:
        return [part async for part in stream]


@pytest.mark.anyio
async def test_failures_before_the_first_part_are_retried() -> None:
    started, attempt = attempts([Flaky(503)], [Flaky(429, 0)], ["a", "b"])

    assert await run(attempt) == ["a", "b"]
    assert started == [0, 1, 2]


@pytest.mark.anyio
async def test_failures_after_a_part_are_raised_with_a_note() -> None:
    started, attempt = attempts(["a", Flaky(503)], ["never"])
    seen: list[str] = []

    with pytest.raises(ModelAPIError) as caught:
        async with aclosing(
            stream_with_retries(attempt, translate, max_retries=3, backoff=Backoff(0.001, 1))
        ) as parts:
            async for part in parts:
                seen.append(part)

    assert seen == ["a"]
    assert started == [0]
    assert isinstance(caught.value.__cause__, Flaky)
    assert "already been streamed" in caught.value.__notes__[0]


@pytest.mark.anyio
async def test_a_retry_after_longer_than_the_maximum_is_not_waited_out() -> None:
    started, attempt = attempts([Flaky(429, 60)], ["never"])

    with pytest.raises(ModelRateLimited) as caught:
        await run(attempt, maximum=1.0)

    assert caught.value.retry_after == 60
    assert started == [0]


@pytest.mark.anyio
async def test_errors_that_are_not_provider_failures_propagate_unchanged() -> None:
    started, attempt = attempts([KeyError("bug")], ["never"])

    with pytest.raises(KeyError):
        await run(attempt)

    assert started == [0]


@pytest.mark.anyio
async def test_client_errors_are_not_retried() -> None:
    started, attempt = attempts([Flaky(400)], ["never"])

    with pytest.raises(ModelAPIError) as caught:
        await run(attempt)

    assert caught.value.status_code == 400
    assert started == [0]
