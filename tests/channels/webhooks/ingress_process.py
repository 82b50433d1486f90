"""A runtime with a webhook channel, in a process of its own, for the kill -9 test: a real
SQLite store at the path given, the channel `webhook:billing` on a free port of 127.0.0.1 (its
URL printed on the first line of stdout), and an agent whose first model turn never ends, so
that every event after the first stays received but unprocessed until the process is killed.

    python ingress_process.py STORE_PATH
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from pathlib import Path

import anyio
from webhook_fixtures import STANDARD_SECRET

from wakeful.channels.registry import ChannelSpec
from wakeful.messages import Message
from wakeful.models import FunctionModel, Turn
from wakeful.models.base import ToolDefinition
from wakeful.runtime import Runtime

CHANNEL = ChannelSpec(
    kind="webhook",
    name="billing",
    settings={"scheme": "standard", "secret": STANDARD_SECRET, "port": 0},
)


def channel_url(runtime: Runtime) -> str:
    """The URL the webhook channel reports in its health ("listening on http://…; …")."""
    found = re.search(r"listening on (http://\S+?);", runtime.channels["webhook:billing"].detail)
    assert found is not None, runtime.channels
    return found.group(1)


async def never_answers(messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> Turn:
    await anyio.sleep_forever()
    raise AssertionError("unreachable")


async def serve(store_path: Path) -> None:
    runtime = Runtime(
        model=FunctionModel(never_answers),
        with_core_tools=False,
        with_timers=False,
        store_path=store_path,
        channels=[CHANNEL],
    )
    async with runtime:
        print(channel_url(runtime), flush=True)
        await anyio.sleep_forever()


if __name__ == "__main__":
    anyio.run(serve, Path(sys.argv[1]))
