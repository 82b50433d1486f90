"""What the channel tests share: a fresh store, and a runtime whose one channel is the channel
under test, started against the test's server and handed over once that channel is up."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from wakeful.channels.registry import ChannelSpec
from wakeful.core.channel import ChannelKind
from wakeful.models.base import Model
from wakeful.runtime import Runtime
from wakeful.store.sqlite import Store

# channel_runtime(spec, kind, model, *, ready="running", **runtime_options)
ChannelRuntime = Callable[..., AbstractAsyncContextManager[Runtime]]


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    """A store of the test's own (fsynced as a crash needs, not as power loss does)."""
    async with await Store.open(tmp_path / "state.db", synchronous="normal") as opened:
        yield opened


@pytest.fixture
def channel_runtime(tmp_path: Path) -> ChannelRuntime:
    """`channel_runtime(spec, kind, model)`: a Runtime (its store under tmp_path, no timers)
    whose one channel is `spec`, of `kind`, with `model` playing the agent; entered once the
    channel's state is `ready` ("running" unless given, e.g. "degraded" for a channel meant to
    fail). Other keyword arguments go to the Runtime."""

    @asynccontextmanager
    async def running(
        spec: ChannelSpec,
        kind: ChannelKind,
        model: Model,
        *,
        ready: str = "running",
        **options: Any,
    ) -> AsyncIterator[Runtime]:
        async with Runtime(
            model=model,
            with_timers=False,
            store_path=tmp_path / "wakeful.db",
            channels=[spec],
            channel_kinds={spec.kind: kind},
            **options,
        ) as runtime:
            with anyio.fail_after(20):
                while runtime.channels[spec.full_name].state != ready:  # noqa: ASYNC110
                    await anyio.sleep(0.02)
            yield runtime

    return running
