"""Run every benchmark, one after the other, each in a fresh interpreter, and print their tables.

    python bench/run_all.py [--quick] [--only NAME ...] [--output FILE]

`--quick` passes `--quick` to each (about 1 minute in all instead of about 5, most of it the
tool discovery benchmark, which also runs MiniLM when `wakeful[embeddings]` is installed);
`--output` also writes everything printed to FILE, to paste into docs/benchmarks.md.

Some benchmarks need an extra beyond `pip install -e .` (:data:`NEEDS`): `[bench]` for the
pydantic-ai baseline, `[test]` for uvicorn. A benchmark whose module is missing is not started;
the report names the extra to install instead.
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import time
from pathlib import Path

from report import machine_summary

BENCH_DIR = Path(__file__).resolve().parent
BENCHMARKS = (
    "interrupt_latency",
    "loop_overhead",
    "event_throughput",
    "webhook_ingress",
    "email_arrival",
    "channel_filters",
    "web_console",
    "delivery_escalation",
    "session_memory",
    "startup_sessions",
    "timers",
    "mcp_round_trip",
    "read_file_big",
    "sandbox_start",
    "sidecar_latency",
    "command_policy",
    "file_tools",
    "prefix_stability",
    "delegation_context",
    "subagents",
    "wake_across_workers",
    "workers_scaling",
    "discovery",
)
# Benchmarks that live in a folder of their own, by name.
SCRIPTS = {"discovery": Path("discovery") / "run.py"}
# What a benchmark imports beyond wakeful's own dependencies: (module, the extra that installs it).
NEEDS: dict[str, tuple[tuple[str, str], ...]] = {
    "loop_overhead": (("pydantic_ai", "bench"),),
    "mcp_round_trip": (("uvicorn", "test"),),
    "wake_across_workers": (("psycopg", "postgres"),),
    "workers_scaling": (("psycopg", "postgres"),),
}


def missing_extras(name: str) -> list[str]:
    """What to install before benchmark `name` can run: one line per missing module."""
    return [
        f"{name} needs {module}, which the [{extra}] extra installs: "
        f".venv/bin/pip install -e '.[{extra}]' (or '.[bench,test]' for every benchmark)."
        for module, extra in NEEDS.get(name, ())
        if importlib.util.find_spec(module) is None
    ]


# Longer than the slowest benchmark takes in full (discovery: about 6 minutes on 2 CPUs).
LIMIT_SECONDS = 1800


def run(name: str, quick: bool) -> tuple[str, float, int]:
    """Run one benchmark; return what it printed, the seconds it took and its exit code."""
    script = BENCH_DIR / SCRIPTS.get(name, Path(f"{name}.py"))
    command = [sys.executable, str(script), *(["--quick"] if quick else [])]
    start = time.perf_counter()
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, check=False, timeout=LIMIT_SECONDS
        )
    except subprocess.TimeoutExpired as exc:
        # A benchmark that hangs is a failure to report, not a reason to stop the others.
        printed = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        return f"{printed}\n[killed after {LIMIT_SECONDS} s]", time.perf_counter() - start, 124
    elapsed = time.perf_counter() - start
    output = done.stdout + (f"\n[stderr]\n{done.stderr}" if done.returncode else "")
    return output, elapsed, done.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="run each benchmark with --quick")
    parser.add_argument("--only", nargs="+", choices=BENCHMARKS, help="run only these")
    parser.add_argument("--output", type=Path, help="also write the report to this file")
    args = parser.parse_args()

    lines = [f"wakeful benchmarks{' (--quick)' if args.quick else ''}", machine_summary(), ""]
    print("\n".join(lines), flush=True)
    failed = []
    for name in args.only or BENCHMARKS:
        missing = missing_extras(name)
        if missing:
            section = f"## {name} (not run)\n\n" + "\n".join(missing) + "\n"
            print(section, flush=True)
            lines.append(section)
            failed.append(name)
            continue
        output, elapsed, code = run(name, args.quick)
        section = f"## {name} ({elapsed:.1f} s)\n\n{output.rstrip()}\n"
        print(section, flush=True)
        lines.append(section)
        if code:
            failed.append(name)
    if args.output is not None:
        args.output.write_text("\n".join(lines))
    if failed:
        sys.exit(f"These benchmarks did not run or exited with an error: {', '.join(failed)}.")


if __name__ == "__main__":
    main()
