"""A runtime process that is one worker of several on a PostgreSQL store, for the runtime-level
failover test: `Runtime(store_url=URL)` with `rt.cluster = SessionCluster(...)` and a scripted
model that answers every user message with `reply_to_user`.

Run as ``python runtime_worker.py URL --name NAME --workdir DIR [--lease SECONDS]``. It prints
``{"ready": NAME}`` once running and ``{"stopped": true}`` after SIGTERM (a clean stop).
"""

from __future__ import annotations

import argparse
import json
import signal
from collections.abc import Sequence
from pathlib import Path

import anyio

from wakeful.messages import Message, UserMessage
from wakeful.models import FunctionModel, Turn, call, say, use
from wakeful.models.base import ToolDefinition
from wakeful.runtime import Runtime
from wakeful.runtime.worker import SessionCluster


def answer(msgs: Sequence[Message], tools: Sequence[ToolDefinition]) -> Turn:
    last = msgs[-1]
    if isinstance(last, UserMessage):
        return use(call("reply_to_user", text=f"seen {len(last.event_ids)} event(s)"))
    return say("")


async def main(url: str, name: str, workdir: Path, lease_s: float) -> None:
    rt = Runtime(model=FunctionModel(answer), workdir=workdir, store_url=url)
    rt.cluster = SessionCluster(lease_seconds=lease_s, name=name)
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with rt:
            print(json.dumps({"ready": name}), flush=True)
            async for _ in signals:
                break
    print(json.dumps({"stopped": True}), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("--name", required=True)
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--lease", type=float, default=2.0)
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    anyio.run(main, args.url, args.name, args.workdir, args.lease)
