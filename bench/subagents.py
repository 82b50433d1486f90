"""Subagents in a real runtime: what a spawn costs, many children at once, and how fast a
cancellation reaches a whole tree.

One zero-latency FunctionModel plays every agent (it reads the system prompt to know which),
so the figures are the runtime's. Each scenario runs twice: without a store and with a SQLite
store (the Runtime's default, `store_synchronous="normal"`). Times are taken by a session
observer when a message is recorded in a trajectory.

1. Spawn overhead: per call, the time from the parent's tool call being recorded to its
   result being recorded, for an inline call of a tool that does nothing, a sync
   `spawn_subagent` whose child calls return_result at once with the minimal context strategy,
   and the same with the agent's default (adaptive); interleaved, each made by a parent in a
   fresh session (a conversation of two messages). A last row makes 100 adaptive spawns one
   after the other in one conversation and reports the last 10: adaptive selection reads the
   whole parent conversation, so a spawn costs more as the conversation grows.
2. 100 concurrent async children (SubagentLimits(max_children=100, max_tree=200)): one parent
   turn spawns them all, each returns at once; the time from that turn to the last
   `subagent.result` reaching the parent's trajectory, the events handled per second (each
   child's task and each result to the parent, counted in the trajectories) and the RSS of the
   process before and at its peak during the run (each row in a fresh interpreter, after a
   warm-up run of 5 children).
3. Cancellation of a tree of 50 descendants (a lead child with 5 branches of 9 leaves: depth 3;
   every leaf waits in ask_parent): the parent cancels the lead; the time until cancel_subagent
   returns (every status cancelled) and until every one of the 51 sessions has stopped (idle,
   no task left), over repetitions in one runtime (a new tree each time). The run fails if one
   is left running. The first and the last repetition are shown too: the runtime keeps every
   child it has seen, and the cost of a cancellation grows with them.

    python bench/subagents.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

import anyio

from report import Table, header, median, percentile, rss_bytes
from wakeful.agent.session import SessionConfig
from wakeful.events import user_input
from wakeful.messages import AssistantMessage, Message, SystemMessage, ToolMessage, UserMessage
from wakeful.models import FunctionModel, StreamPart, Turn, call, say, use
from wakeful.models.base import ToolDefinition
from wakeful.runtime import Runtime
from wakeful.subagents.definitions import AgentDefinition
from wakeful.subagents.limits import SubagentLimits
from wakeful.tools.spec import tool

RUN_TIMEOUT_SECONDS = 120.0
CHILDREN = 100
BRANCHES, LEAVES = 5, 9  # 5 + 5 * 9 = 50 descendants of the lead
POLL_SECONDS = 0.001
LONG_SPAWNS = 100  # sync spawns in one conversation

AGENTS = [
    AgentDefinition(name=name, description=f"The {name} of the benchmark.", role="You work.")
    for name in ("quick", "lead", "branch", "leaf")
]


@tool
async def do_nothing() -> str:
    """Return at once."""
    return "ok"


Script = Callable[[Sequence[Message]], Turn]


def who(messages: Sequence[Message]) -> str:
    """ "parent", or the child's agent name, from the system prompt."""
    system = messages[0]
    assert isinstance(system, SystemMessage)
    found = re.search(r"You are a subagent \((\w+), id sub_\w+\)", system.content)
    return found.group(1) if found else "parent"


def first_turn(messages: Sequence[Message]) -> bool:
    return len(messages) == 2 and isinstance(messages[1], UserMessage)


def idle(messages: Sequence[Message]) -> Turn:
    return say("")


def model_of(scripts: dict[str, Script]) -> FunctionModel:
    def play(messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> Turn:
        return scripts.get(who(messages), idle)(messages)

    return FunctionModel(play)


@dataclass
class Clock:
    """A session observer noting when each message is recorded."""

    calls: dict[str, float] = field(default_factory=dict)  # call id → recorded at
    results: dict[str, tuple[str, float]] = field(default_factory=dict)  # call id → name, at
    arrived: list[float] = field(default_factory=list)  # a subagent.result reached "main"
    sessions: set[str] = field(default_factory=set)

    def on_message(self, session: str, message: Message) -> None:
        now = time.perf_counter()
        self.sessions.add(session)
        if isinstance(message, AssistantMessage):
            for tool_call in message.tool_calls:
                self.calls[tool_call.id] = now
        elif isinstance(message, ToolMessage):
            self.results[message.tool_call_id] = (message.name, now)
        elif session == "main" and isinstance(message, UserMessage):
            self.arrived.extend(now for _ in range(message.content.count("(subagent.result)")))

    def on_stream_part(self, session: str, part: StreamPart) -> None:
        pass

    def on_turn_discarded(self, session: str, reason: str) -> None:
        pass


@asynccontextmanager
async def runtime(
    model: FunctionModel,
    clock: Clock,
    store: bool,
    limits: SubagentLimits | None = None,
    steps: int = 50,
) -> AsyncIterator[Runtime]:
    with tempfile.TemporaryDirectory() as tmp:
        rt = Runtime(
            model=model,
            tools=[do_nothing],
            with_core_tools=False,
            with_timers=False,
            store_path=Path(tmp) / "w.db" if store else None,
            observer=clock,
            agents=AGENTS,
            subagent_limits=limits,
            session_config=SessionConfig(max_model_requests_per_activation=steps + 10),
        )
        async with rt:
            yield rt


async def settle(rt: Runtime) -> None:
    with anyio.fail_after(RUN_TIMEOUT_SECONDS):
        await rt.wait_idle()


# --- 1. spawn overhead ----------------------------------------------------------------------------

# What the parent calls, by the text of its user input.
CALLS: dict[str, Callable[[], Turn]] = {
    "inline do_nothing": lambda: use(call("do_nothing")),
    "spawn_subagent, minimal context": lambda: use(
        call("spawn_subagent", agent="quick", task="Say ok.", context_strategy="minimal")
    ),
    "spawn_subagent, adaptive (default)": lambda: use(
        call("spawn_subagent", agent="quick", task="Say ok.")
    ),
}


def quick(messages: Sequence[Message]) -> Turn:
    """A child that returns at once."""
    return use(call("return_result", result="ok")) if first_turn(messages) else say("")


def call_times(clock: Clock, messages: Sequence[Message]) -> list[float]:
    """Milliseconds from each tool call to its result, in the order of `messages`; a spawn
    that did not hand back its child's result fails the run."""
    out = []
    for message in messages:
        if not isinstance(message, ToolMessage):
            continue
        if message.name == "spawn_subagent" and (
            message.status != "ok" or 'returned: "ok"' not in message.content
        ):
            raise RuntimeError(f"A spawn did not return its child's result: {message.content}")
        _, done = clock.results[message.tool_call_id]
        out.append((done - clock.calls[message.tool_call_id]) * 1000)
    return out


async def spawn_overhead(samples: int, store: bool) -> dict[str, list[float]]:
    """Milliseconds from call to result for each of CALLS, `samples` of each, interleaved,
    each made by a parent in a fresh session (a conversation of two messages)."""

    def parent(messages: Sequence[Message]) -> Turn:
        text = str(messages[-1].content)
        return CALLS[text]() if first_turn(messages) else say("done")

    clock = Clock()
    times: dict[str, list[float]] = {name: [] for name in CALLS}
    async with runtime(model_of({"parent": parent, "quick": quick}), clock, store) as rt:
        for i in range(samples):
            for n, name in enumerate(CALLS):
                session = f"p{i}_{n}"
                await rt.submit(user_input(name, session=session))
                await settle(rt)
                times[name].extend(call_times(clock, rt.sessions[session].trajectory.messages))
    for name, got in times.items():
        if len(got) != samples:
            raise RuntimeError(f"{len(got)} calls of {name} were made, not {samples}.")
    return times


async def long_conversation(spawns: int, store: bool) -> list[float]:
    """Milliseconds from call to result of `spawns` sync spawns (adaptive context) made one
    after the other in one conversation, which grows by two messages a spawn."""

    def parent(messages: Sequence[Message]) -> Turn:
        made = sum(1 for m in messages if isinstance(m, ToolMessage))
        return CALLS["spawn_subagent, adaptive (default)"]() if made < spawns else say("done")

    clock = Clock()
    model = model_of({"parent": parent, "quick": quick})
    async with runtime(model, clock, store, steps=spawns) as rt:
        await rt.submit(user_input("go"))
        await settle(rt)
        return call_times(clock, rt.sessions["main"].trajectory.messages)


# --- 2. many async children -----------------------------------------------------------------------


@dataclass
class FanOut:
    seconds: float
    events: int
    rss_before: int
    rss_peak: int


async def fan_out(children: int, store: bool, strategy: str) -> FanOut:
    """One parent turn spawns `children` async children with the context `strategy`; each
    returns at once."""

    def parent(messages: Sequence[Message]) -> Turn:
        if messages[-1].content == "go":
            return use(
                *(
                    call(
                        "spawn_subagent",
                        agent="quick",
                        task=f"Job {i}.",
                        mode="async",
                        context_strategy=strategy,
                    )
                    for i in range(children)
                )
            )
        return say("")

    clock = Clock()
    model = model_of({"parent": parent, "quick": quick})
    limits = SubagentLimits(max_children=children, max_tree=2 * children)
    peak = 0

    async def sample() -> None:
        nonlocal peak
        while True:
            peak = max(peak, rss_bytes())
            await anyio.sleep(0.005)

    async with runtime(model, clock, store, limits) as rt:
        await rt.session("main")
        before = rss_bytes()
        async with anyio.create_task_group() as tg:
            tg.start_soon(sample)
            await rt.submit(user_input("go"))
            await settle(rt)
            tg.cancel_scope.cancel()
        main = rt.sessions["main"].trajectory.messages
        started = next(
            clock.calls[m.tool_calls[0].id]
            for m in main
            if isinstance(m, AssistantMessage) and m.tool_calls
        )
        tasks = sum(
            1
            for name, session in rt.sessions.items()
            if name.startswith("sub_")
            and any("Job " in str(m.content) for m in session.trajectory.messages[1:2])
        )
    results = len(clock.arrived)
    if results != children or tasks != children:
        raise RuntimeError(f"{tasks} children got their task and {results} results arrived.")
    return FanOut(clock.arrived[-1] - started, tasks + results, before, max(peak, before))


async def fan_out_alone(children: int, store: bool, strategy: str) -> FanOut:
    """:func:`fan_out` in a fresh interpreter, so that its RSS is its own (after a warm-up run
    of 5 children there)."""
    command = [sys.executable, __file__, "--fan-out", str(children), str(store), strategy]
    done = await anyio.run_process(command, check=False)
    if done.returncode:
        raise RuntimeError(f"The fan-out run failed:\n{done.stderr.decode()}")
    return FanOut(**json.loads(done.stdout))


async def fan_out_here(children: int, store: bool, strategy: str) -> None:
    await fan_out(5, store, strategy)
    print(json.dumps(asdict(await fan_out(children, store, strategy))))


# --- 3. cancelling a tree -------------------------------------------------------------------------


async def cancel_tree(repeat: int, store: bool) -> tuple[list[float], list[float]]:
    """Milliseconds from the cancel call to (its result: every status cancelled, every session
    stopped), per repetition."""

    def parent(messages: Sequence[Message]) -> Turn:
        text = str(messages[-1].content)
        if text == "go":
            return use(call("spawn_subagent", agent="lead", task="Lead.", mode="async"))
        if text.startswith("cancel "):
            return use(call("cancel_subagent", subagent_id=text.split()[1], reason="bench"))
        return say("")

    def spawner(agent: str, count: int) -> Script:
        def script(messages: Sequence[Message]) -> Turn:
            if not first_turn(messages):
                return say("")
            spawns = (
                call("spawn_subagent", agent=agent, task=f"{agent} {i}.", mode="async")
                for i in range(count)
            )
            return use(*spawns)

        return script

    def leaf(messages: Sequence[Message]) -> Turn:
        return use(call("ask_parent", question="Go on?")) if first_turn(messages) else say("")

    clock = Clock()
    model = model_of(
        {
            "parent": parent,
            "lead": spawner("branch", BRANCHES),
            "branch": spawner("leaf", LEAVES),
            "leaf": leaf,
        }
    )
    limits = SubagentLimits(
        max_depth=3, max_children=LEAVES, max_tree=200, answer_timeout_seconds=600
    )
    tree = 1 + BRANCHES + BRANCHES * LEAVES
    returned: list[float] = []
    stopped: list[float] = []
    async with runtime(model, clock, store, limits) as rt:
        subagents = rt.subagents
        assert subagents is not None
        for _ in range(repeat):
            known = set(clock.sessions)
            await rt.submit(user_input("go"))
            with anyio.fail_after(RUN_TIMEOUT_SECONDS):
                while True:
                    ids = sorted(s for s in clock.sessions - known if s.startswith("sub_"))
                    waiting = sum(
                        1
                        for session in ids
                        if any(
                            isinstance(m, AssistantMessage)
                            and any(c.name == "ask_parent" for c in m.tool_calls)
                            for m in rt.sessions[session].trajectory.messages
                        )
                    )
                    if len(ids) == tree and waiting == BRANCHES * LEAVES:
                        break
                    await anyio.sleep(0.01)
            await anyio.sleep(0.05)  # let the branches take their leaves' questions
            lead = next(
                r for r in [await subagents.repository.get(s) for s in ids] if r and r.depth == 1
            )
            marker = len(clock.calls)
            await rt.submit(user_input(f"cancel {lead.id}"))
            with anyio.fail_after(RUN_TIMEOUT_SECONDS):
                while True:
                    cancel_calls = list(clock.calls)[marker:]
                    if cancel_calls and cancel_calls[0] in clock.results:
                        break
                    await anyio.sleep(POLL_SECONDS)
                while not all(stopped_session(rt, s) for s in ids):  # noqa: ASYNC110 - polling is the measurement
                    await anyio.sleep(POLL_SECONDS)
            at = time.perf_counter()
            call_id = cancel_calls[0]
            name, done = clock.results[call_id]
            records = [await subagents.repository.get(s) for s in ids]
            statuses = {r.status for r in records if r is not None}
            if name != "cancel_subagent" or statuses != {"cancelled"} or len(records) != tree:
                raise RuntimeError(f"After the cancel ({name}), the statuses are {statuses}.")
            returned.append((done - clock.calls[call_id]) * 1000)
            stopped.append((at - clock.calls[call_id]) * 1000)
            await settle(rt)
    return returned, stopped


def stopped_session(rt: Runtime, session: str) -> bool:
    found = rt.sessions.get(session)
    return found is not None and found.idle and not rt.tasks.has_unsettled(session)


# --- the report -----------------------------------------------------------------------------------


async def run(samples: int, repeat: int) -> None:
    stores = (("no store", False), ("SQLite", True))
    await spawn_overhead(3, False)  # warm-up: imports, schema builds

    header(
        f"Subagents: zero-latency model; spawn overhead ({samples} calls of each), "
        f"{CHILDREN} async children, cancelling a tree of {BRANCHES + BRANCHES * LEAVES} "
        f"descendants ({repeat} repetitions)"
    )
    table = Table(["call → result", "store", "n", "p50 ms", "p99 ms", "max ms"])
    for label, store in stores:
        for name, times in (await spawn_overhead(samples, store)).items():
            table.add(name, label, len(times), median(times), percentile(times, 99), max(times))
        later = (await long_conversation(LONG_SPAWNS, store))[-10:]
        table.add(
            f"… adaptive, spawns {LONG_SPAWNS - 9}-{LONG_SPAWNS} of one conversation",
            label,
            len(later),
            median(later),
            percentile(later, 99),
            max(later),
        )
    table.print()
    print()

    table = Table(
        [
            "async children",
            "store",
            "n",
            "all results s",
            "events/s",
            "RSS MiB before",
            "peak RSS MiB",
            "growth MiB",
        ]
    )
    for strategy in ("adaptive", "minimal"):
        for label, store in stores:
            fanned = await fan_out_alone(CHILDREN, store, strategy)
            table.add(
                f"{strategy} context" + (" (default)" if strategy == "adaptive" else ""),
                label,
                CHILDREN,
                fanned.seconds,
                fanned.events / fanned.seconds,
                fanned.rss_before / 2**20,
                fanned.rss_peak / 2**20,
                (fanned.rss_peak - fanned.rss_before) / 2**20,
            )
    table.print()
    print()

    tree = BRANCHES + BRANCHES * LEAVES
    table = Table(
        [
            f"cancel the lead of {tree}",
            "store",
            "n",
            "p50 ms",
            "p99 ms",
            "max ms",
            "1st tree ms",
            "last tree ms",
        ]
    )
    for label, store in stores:
        returned, stopped = await cancel_tree(repeat, store)
        for name, got in (
            ("cancel_subagent returned", returned),
            (f"all {tree + 1} sessions stopped", stopped),
        ):
            table.add(
                name, label, len(got), median(got), percentile(got, 99), max(got), got[0], got[-1]
            )
    table.print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="20 calls of each instead of 200, 3 cancellations, not 20",
    )
    parser.add_argument("--fan-out", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.fan_out:  # one run of scenario 2, from fan_out_alone
        children, store, strategy = args.fan_out
        anyio.run(fan_out_here, int(children), store == "True", strategy)
        return
    anyio.run(run, 20 if args.quick else 200, 3 if args.quick else 20)


if __name__ == "__main__":
    main()
