"""What the rule-based sidecar adds to the tool-call path, with the model still streaming.

Two measurements, in one run:

1. The rule stage alone: `RuleSidecar.check` on typical calls (shell commands parsed by the
   command policy, a file write, a plain tool), in microseconds per check.
2. The tool-call path in a running session: a scripted model emits a tool call and keeps
   streaming for a moment (`after_calls_delay`), as a real model writing more would; the sidecar
   starts at the emission, the call runs when the turn ends. The time from the end of the turn
   to the tool starting is measured with the gate and without one (`gate=None`); the difference
   is the latency the sidecar adds to each call. Target (issue 4): under 1 ms.

    .venv/bin/python bench/sidecar_latency.py [--calls 300] [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

import anyio
from pydantic import Field

from report import Table, header, percentile, verdict
from wakeful.agent.session import SessionConfig
from wakeful.events import user_input
from wakeful.messages import Message, ToolMessage
from wakeful.models import FunctionModel, Turn, call, say
from wakeful.models.base import ToolDefinition
from wakeful.runtime import Runtime
from wakeful.safety.commands import CommandPolicy, PolicySettings
from wakeful.safety.gate import CallGate
from wakeful.safety.sidecar import RuleSidecar, SidecarSettings
from wakeful.tools.spec import ToolSpec, tool

TARGET_MS = 1.0
COMMANDS = [
    "ls -la",
    "git status",
    "cat README.md | grep -n install",
    "pytest -q tests/test_app.py",
    "python3 scripts/build.py --out dist",
    "find . -name '*.py' -newer setup.cfg | wc -l",
]
WRITE = ToolSpec("write_file", "Write a file.", {"type": "object"})

STARTED: list[float] = []


@tool
async def shell(command: Annotated[str, Field(description="A command, e.g. 'ls'")]) -> str:
    """Records when it started; runs nothing (the benchmark measures the path, not a shell)."""
    STARTED.append(time.perf_counter())
    return "ok"


def rule_stage(workdir: Path, rounds: int) -> Table:
    sidecar = RuleSidecar(
        SidecarSettings(shell_tools={"shell": "command"}),
        CommandPolicy(PolicySettings(workspace=workdir)),
    )
    cases: list[tuple[str, Any, ToolSpec | None]] = [
        (f"shell: {c}", call("shell", command=c), None) for c in COMMANDS
    ]
    cases.append(("write_file notes.txt", call("write_file", path="notes.txt", content="x"), WRITE))
    cases.append(("reply_to_user", call("reply_to_user", text="Done."), None))
    table = Table(["call", "p50 µs", "p99 µs"])
    for name, proposed, spec in cases:
        # warm: the grammar is loaded once. A call the policy would put to a person would make
        # the tool-path run below wait for an answer: every case must be allowed outright.
        verdict_of_case = sidecar.check(proposed, spec)
        if verdict_of_case.decision != "allow":
            raise SystemExit(
                f"The sidecar does not allow {name!r} outright ({verdict_of_case.decision}: "
                f"{' '.join(verdict_of_case.reasons)}); pick a command the policy allows."
            )
        samples = []
        for _ in range(rounds):
            started = time.perf_counter()
            sidecar.check(proposed, spec)
            samples.append((time.perf_counter() - started) * 1e6)
        table.add(name, statistics.median(samples), percentile(samples, 99))
    return table


async def tool_path(workdir: Path, calls: int, *, gated: bool) -> list[float]:
    """Milliseconds from the end of each turn to its tool starting."""
    turn_ends: list[float] = []

    async def play(messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> Turn:
        done = sum(1 for m in messages if isinstance(m, ToolMessage))
        if done >= calls:
            return say("done")
        command = COMMANDS[done % len(COMMANDS)]
        # The model keeps streaming 2 ms after it emitted the call; the turn ends after that.
        return Turn(tool_calls=[call("shell", command=command)], after_calls_delay=0.002)

    class Timed(FunctionModel):
        async def _run(self, request: Any) -> Any:  # type: ignore[override]
            async for part in super()._run(request):
                if type(part).__name__ == "TurnEnd":
                    turn_ends.append(time.perf_counter())
                yield part

    gate: CallGate | Literal["default"] | None = None
    if gated:
        gate = CallGate(
            sidecar=RuleSidecar(
                SidecarSettings(shell_tools={"shell": "command"}),
                CommandPolicy(PolicySettings(workspace=workdir)),
            )
        )
    STARTED.clear()
    runtime = Runtime(
        model=Timed(play),
        tools=[shell],
        with_core_tools=False,
        with_timers=False,
        workdir=workdir,
        gate=gate,
        result_cache=None,
        session_config=SessionConfig(max_model_requests_per_activation=calls + 5),
    )
    async with runtime:
        await runtime.submit(user_input("go"))
        await runtime.wait_idle()
    pairs = zip(turn_ends, STARTED, strict=False)
    return [(started - ended) * 1000 for ended, started in pairs][5:]  # skip warm-up


async def main(calls: int, rounds: int) -> None:
    header("Sidecar latency (rule-based)")
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        print("\nThe rule stage alone (RuleSidecar.check):")
        rule_stage(workdir, rounds).print()
        without = await tool_path(workdir, calls, gated=False)
        with_gate = await tool_path(workdir, calls, gated=True)
    print(f"\nEnd of turn → tool starts, {len(without)} calls each:")
    table = Table(["path", "p50 ms", "p99 ms", "added p50 ms", "target"])
    p50_without = statistics.median(without)
    p50_with = statistics.median(with_gate)
    added = p50_with - p50_without
    table.add("no gate", p50_without, percentile(without, 99), "", "")
    table.add(
        "rule sidecar (+breaker)",
        p50_with,
        percentile(with_gate, 99),
        added,
        f"< {TARGET_MS:g} ms: {verdict(added, TARGET_MS)}",
    )
    table.print()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--quick", action="store_true", help="60 calls, 300 rounds")
    args = parser.parse_args()
    calls, rounds = (60, 300) if args.quick else (args.calls, 2000)
    anyio.run(main, calls, rounds)
