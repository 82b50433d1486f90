"""Loop overhead: a 200-step tool loop against a zero-latency model, µs per step.

Side by side in one run: wakeful's session loop driven by its FunctionModel, and pydantic-ai's
agent loop driven by pydantic-ai's FunctionModel, both making the same 200 tool calls to the
same trivial async tool. wakeful runs without persistence (as pydantic-ai does) and, in a third
row, with its SQLite store on.

    python bench/loop_overhead.py [--steps 200] [--repeat 7]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel

from wakeful.events import user_input
from wakeful.messages import Message
from wakeful.models import FunctionModel, Turn, call, say
from wakeful.models.base import ToolDefinition
from wakeful.runtime import Runtime
from wakeful.tools.spec import tool


@tool
async def add_one(x: int) -> int:
    """Add one to x."""
    return x + 1


async def wakeful_run(steps: int, store_path: Path | None) -> float:
    count = 0

    def script(messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> Turn:
        nonlocal count
        count += 1
        return Turn(tool_calls=[call("add_one", x=count)]) if count <= steps else say("done")

    rt = Runtime(
        model=FunctionModel(script),
        tools=[add_one],
        with_core_tools=False,
        with_timers=False,
        store_path=store_path,
    )
    async with rt:
        session = await rt.session("main")
        start = time.perf_counter()
        await rt.submit(user_input("go"))
        while session.busy or session.pending or count <= steps:
            await anyio.lowlevel.checkpoint()
        elapsed = time.perf_counter() - start
    assert count == steps + 1
    return elapsed


async def pydantic_ai_run(steps: int) -> float:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo
    from pydantic_ai.models.function import FunctionModel as PaiFunctionModel

    count = 0

    def script(messages: list[Any], info: AgentInfo) -> ModelResponse:
        nonlocal count
        count += 1
        if count <= steps:
            return ModelResponse(parts=[ToolCallPart("add_one", {"x": count})])
        return ModelResponse(parts=[TextPart("done")])

    agent = Agent(PaiFunctionModel(script))

    @agent.tool_plain
    async def add_one(x: int) -> int:
        """Add one to x."""
        return x + 1

    start = time.perf_counter()
    await agent.run("go")
    elapsed = time.perf_counter() - start
    assert count == steps + 1
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()

    rows: dict[str, list[float]] = {"wakeful": [], "wakeful + SQLite": [], "pydantic-ai": []}
    for _ in range(args.repeat):
        rows["wakeful"].append(anyio.run(wakeful_run, args.steps, None))
        with tempfile.TemporaryDirectory() as tmp:
            rows["wakeful + SQLite"].append(
                anyio.run(wakeful_run, args.steps, Path(tmp) / "bench.db")
            )
        rows["pydantic-ai"].append(anyio.run(pydantic_ai_run, args.steps))

    print(
        f"Loop overhead: {args.steps}-step tool loop, zero-latency model, "
        f"median of {args.repeat} runs"
    )
    print(f"{'loop':<20} {'µs/step':>10} {'total ms':>10}")
    for name, times in rows.items():
        med = statistics.median(times)
        print(f"{name:<20} {med / args.steps * 1e6:>10.1f} {med * 1e3:>10.1f}")


if __name__ == "__main__":
    main()
