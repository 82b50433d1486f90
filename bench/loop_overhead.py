"""Loop overhead: a 200-step tool loop against a zero-latency model, µs per step.

Side by side in one run: wakeful's session loop driven by its FunctionModel, and pydantic-ai's
agent loop driven by pydantic-ai's FunctionModel (plain and streamed), all making the same tool
calls to the same trivial async tool. wakeful runs without persistence (as pydantic-ai does) and,
in further rows, with its SQLite store on: with the Runtime's default `store_synchronous="normal"`
(WAL, no fsync per commit; a commit survives a crash of the process, not a power loss) and with
`store_synchronous="full"` (an fsync per commit). Runs are interleaved, one warm-up run of each
loop is discarded, and each row is the median of the repeats.

    python bench/loop_overhead.py [--steps 200] [--repeat 7] [--quick] [--profile LOOP]

`--profile wakeful` (or `wakeful-sqlite`, `wakeful-sqlite-full`, `pydantic-ai`) prints where one
run spends its time.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import tempfile
import time
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path

import anyio

from report import Table, header, median, verdict
from wakeful.agent.session import SessionConfig
from wakeful.events import user_input
from wakeful.messages import Message
from wakeful.models import FunctionModel, Turn, call, say
from wakeful.models.base import ToolDefinition
from wakeful.runtime import Runtime
from wakeful.store.sqlite import WriteSync
from wakeful.tools.spec import tool

RUN_TIMEOUT_SECONDS = 120.0


@tool
async def add_one(x: int) -> int:
    """Add one to x."""
    return x + 1


async def wakeful_run(
    steps: int, store_path: Path | None, synchronous: WriteSync = "normal"
) -> float:
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
        store_synchronous=synchronous,
        # The default (50) stops runaway loops; this loop is meant to be long.
        session_config=SessionConfig(max_model_requests_per_activation=steps + 10),
    )
    async with rt:
        await rt.session("main")
        start = time.perf_counter()
        await rt.submit(user_input("go"))
        with anyio.fail_after(RUN_TIMEOUT_SECONDS):
            await rt.wait_idle()
        elapsed = time.perf_counter() - start
        tool_results = sum(1 for m in rt.sessions["main"].trajectory.messages if m.role == "tool")
    if count != steps + 1 or tool_results != steps:
        raise RuntimeError(f"wakeful made {count} requests and {tool_results} tool calls.")
    return elapsed


async def wakeful_sqlite_run(steps: int, mode: WriteSync) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        return await wakeful_run(steps, Path(tmp) / "bench.db", mode)


async def pydantic_ai_run(steps: int, streamed: bool) -> float:
    from pydantic_ai import Agent, AgentStreamEvent, RunContext, UsageLimits
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls
    from pydantic_ai.models.function import FunctionModel as PaiFunctionModel

    count = 0

    def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        nonlocal count
        count += 1
        if count <= steps:
            return ModelResponse(parts=[ToolCallPart("add_one", {"x": count})])
        return ModelResponse(parts=[TextPart("done")])

    async def stream_script(
        messages: list[ModelMessage], info: AgentInfo
    ) -> AsyncIterator[str | DeltaToolCalls]:
        nonlocal count
        count += 1
        if count <= steps:
            arguments = json.dumps({"x": count})
            yield {0: DeltaToolCall(name="add_one", json_args=arguments, tool_call_id=f"c{count}")}
        else:
            yield "done"

    async def drain(ctx: RunContext[object], events: AsyncIterable[AgentStreamEvent]) -> None:
        async for _ in events:
            pass

    model = (
        PaiFunctionModel(stream_function=stream_script) if streamed else PaiFunctionModel(script)
    )
    agent = Agent(model)

    @agent.tool_plain
    async def add_one(x: int) -> int:
        """Add one to x."""
        return x + 1

    # The default request limit (50) stops runaway loops; this loop is meant to be long.
    limits = UsageLimits(request_limit=None)
    start = time.perf_counter()
    if streamed:
        # With an event stream handler, `run` streams each model response.
        result = await agent.run("go", usage_limits=limits, event_stream_handler=drain)
    else:
        result = await agent.run("go", usage_limits=limits)
    elapsed = time.perf_counter() - start
    if count != steps + 1 or result.output != "done":
        raise RuntimeError(f"pydantic-ai made {count} requests and answered {result.output!r}.")
    return elapsed


def loops(steps: int) -> dict[str, Callable[[], Awaitable[float]]]:
    return {
        "wakeful": lambda: wakeful_run(steps, None),
        "wakeful + SQLite (normal, default)": lambda: wakeful_sqlite_run(steps, "normal"),
        "wakeful + SQLite (full)": lambda: wakeful_sqlite_run(steps, "full"),
        "pydantic-ai": lambda: pydantic_ai_run(steps, streamed=False),
        "pydantic-ai (streamed)": lambda: pydantic_ai_run(steps, streamed=True),
    }


def profile(name: str, steps: int) -> None:
    runs = {
        "wakeful": lambda: wakeful_run(steps, None),
        "wakeful-sqlite": lambda: wakeful_sqlite_run(steps, "normal"),
        "wakeful-sqlite-full": lambda: wakeful_sqlite_run(steps, "full"),
        "pydantic-ai": lambda: pydantic_ai_run(steps, streamed=False),
    }
    run = runs[name]
    anyio.run(run)  # warm-up: imports, schema builds
    profiler = cProfile.Profile()
    profiler.enable()
    anyio.run(run)
    profiler.disable()
    stats = pstats.Stats(profiler).strip_dirs()
    print(f"Profile of one {steps}-step run of {name}, by own time:")
    stats.sort_stats("tottime").print_stats(20)
    print("By cumulative time:")
    stats.sort_stats("cumulative").print_stats(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="1 repeat")
    parser.add_argument(
        "--profile",
        choices=["wakeful", "wakeful-sqlite", "wakeful-sqlite-full", "pydantic-ai"],
        help="profile one run of this loop instead of benchmarking",
    )
    args = parser.parse_args()
    if args.profile:
        profile(args.profile, args.steps)
        return
    repeat = 1 if args.quick else args.repeat

    runs = loops(args.steps)
    for run in runs.values():  # warm-up: imports, schema builds, first-touch allocations
        anyio.run(run)
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeat):
        for name, run in runs.items():
            times[name].append(anyio.run(run))

    header(
        f"Loop overhead: {args.steps}-step tool loop, zero-latency model, "
        f"median of {repeat} interleaved runs"
    )
    baseline = median(times["pydantic-ai"]) / args.steps * 1e6
    table = Table(["loop", "µs/step", "total ms", "min ms", "max ms", "vs pydantic-ai", "target"])
    for name, samples in times.items():
        per_step = median(samples) / args.steps * 1e6
        target = ""
        if name == "wakeful":
            target = f"≤ pydantic-ai: {verdict(per_step, baseline)}"
        table.add(
            name,
            per_step,
            median(samples) * 1e3,
            min(samples) * 1e3,
            max(samples) * 1e3,
            f"{per_step / baseline:.2f}x",
            target,
        )
    table.print()


if __name__ == "__main__":
    main()
