"""Start-to-exit time of `true` under the sandbox versus a plain subprocess, in the same run.

Usage: .venv/bin/python bench/sandbox_start.py [N] [--quick]   (N runs of each, 200 by
default; --quick: 40)

The sandboxed run is what shell_exec pays per call beyond the command itself: the cgroup join,
prlimit, bubblewrap's namespaces and mounts, the seccomp filter, the workspace quota's watcher,
and the cgroup cleanup afterwards. Target: under 30 ms added at the median. The same sandbox
without its hardening (user namespace, seccomp filter, size-limited /tmp) is timed beside it,
to show what the hardening costs.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio

from report import header
from wakeful.safety.sandbox import Sandbox, SandboxSettings
from wakeful.safety.sandbox.bwrap import BwrapFeatures


async def plain() -> None:
    await anyio.run_process(["true"], check=True)


def sandboxed(sandbox: Sandbox, workspace: Path) -> Callable[[], Awaitable[None]]:
    async def once() -> None:
        async with sandbox.prepare(["true"], cwd=workspace) as prepared:
            await anyio.run_process(prepared.argv, env=prepared.env, cwd=prepared.cwd, check=True)

    return once


async def timings(run: Callable[[], Awaitable[None]], n: int) -> list[float]:
    await run()  # warm up (the bwrap probe, page cache)
    times = []
    for _ in range(n):
        started = time.perf_counter()
        await run()
        times.append((time.perf_counter() - started) * 1000)
    return times


def row(name: str, times: list[float]) -> str:
    ordered = sorted(times)
    p50 = statistics.median(ordered)
    p95 = ordered[int(len(ordered) * 0.95) - 1]
    return f"{name:<22}{p50:>9.2f}{p95:>9.2f}{statistics.fmean(ordered):>9.2f}"


async def main(n: int) -> None:
    with tempfile.TemporaryDirectory() as directory:
        workspace = Path(directory)
        sandbox = Sandbox(SandboxSettings(), workspace)
        base = await timings(plain, n)
        boxed = await timings(sandboxed(sandbox, workspace), n)
        plain_bwrap = Sandbox(SandboxSettings(), workspace)
        plain_bwrap._features = BwrapFeatures(user_namespace=False, seccomp=False, tmp_size=False)
        unhardened = await timings(sandboxed(plain_bwrap, workspace), n)
    header("Sandbox start-up: `true` under the sandbox vs a plain subprocess")
    print(f"N={n} runs each; sandbox backend: {sandbox.backend}")
    print(f"{'':<22}{'p50 ms':>9}{'p95 ms':>9}{'mean ms':>9}")
    print(row("plain subprocess", base))
    print(row(f"sandbox ({sandbox.backend})", boxed))
    print(row("  without hardening", unhardened))
    added = statistics.median(boxed) - statistics.median(base)
    hardening = statistics.median(boxed) - statistics.median(unhardened)
    print(f"added latency (p50): {added:.2f} ms (target < 30 ms)")
    print(f"of which the hardening (p50): {hardening:.2f} ms")


if __name__ == "__main__":
    arguments = [a for a in sys.argv[1:] if a != "--quick"]
    runs = int(arguments[0]) if arguments else (40 if "--quick" in sys.argv else 200)
    anyio.run(main, runs)
