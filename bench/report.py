"""Percentiles, result tables and the machine description every benchmark prints.

Kept apart from the benchmarks so that each script reads as the scenario it measures. The
percentile is nearest-rank: with 100 samples, p99 is the second largest value, a sample that was
really observed rather than an interpolation between two.
"""

from __future__ import annotations

import math
import os
import platform
import sqlite3
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path


def percentile(samples: Sequence[float], p: float) -> float:
    """The nearest-rank `p`-th percentile (0 < p <= 100) of `samples`."""
    if not samples:
        raise ValueError("percentile() needs at least one sample.")
    ordered = sorted(samples)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


def median(samples: Sequence[float]) -> float:
    return statistics.median(samples)


def verdict(value: float, target: float, *, higher_is_better: bool = False) -> str:
    """PASS or FAIL against a target."""
    met = value >= target if higher_is_better else value <= target
    return "PASS" if met else "FAIL"


@dataclass
class Table:
    """A plain-text table: a header row, right-aligned numbers, left-aligned first column."""

    columns: Sequence[str]

    def __post_init__(self) -> None:
        self.rows: list[list[str]] = []

    def add(self, *cells: object) -> None:
        if len(cells) != len(self.columns):
            raise ValueError(f"A row needs {len(self.columns)} cells, got {len(cells)}.")
        self.rows.append([_cell(c) for c in cells])

    def render(self) -> str:
        widths = [
            max(len(self.columns[i]), *(len(row[i]) for row in self.rows))
            if self.rows
            else len(self.columns[i])
            for i in range(len(self.columns))
        ]

        def line(cells: Sequence[str]) -> str:
            first = cells[0].ljust(widths[0])
            rest = (cell.rjust(width) for cell, width in zip(cells[1:], widths[1:], strict=True))
            return "  ".join([first, *rest]).rstrip()

        rule = "  ".join("-" * w for w in widths)
        return "\n".join([line(self.columns), rule, *(line(row) for row in self.rows)])

    def print(self) -> None:
        print(self.render(), flush=True)


def _cell(value: object) -> str:
    if isinstance(value, float):
        if value == 0 or abs(value) >= 100:
            return f"{value:,.0f}"
        if abs(value) >= 10:
            return f"{value:.1f}"
        return f"{value:.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def total_memory_gib() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 1024**2
    except OSError:
        pass
    return float("nan")


def machine_summary() -> str:
    """One line naming the machine, so figures are never read without it."""
    return (
        f"{os.cpu_count()} CPUs ({cpu_model()}), {total_memory_gib():.1f} GiB RAM, "
        f"Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}, "
        f"{platform.system()} {platform.release()}, "
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC"
    )


def header(title: str) -> None:
    print(f"{title}\n{machine_summary()}\n", flush=True)


def rss_bytes() -> int:
    """The resident set size of this process now (Linux), in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("VmRSS not found in /proc/self/status; this benchmark needs Linux.")


if __name__ == "__main__":
    sys.exit("report.py is a module of the benchmarks; run one of the bench/*.py scripts.")
