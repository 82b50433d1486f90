"""What opening beneath a root descriptor costs the file tools, against checking a path and
opening it by name again (the old, racy way).

    .venv/bin/python bench/file_tools.py [--calls N]

Three operations, each as the tools do it minus the tool framework (argument validation, the
worker thread and result formatting, the same for both ways):

- read: find a file under the root and read its 2 KB;
- list: find a directory of 50 entries and stat each entry;
- write: find where a file lands, read its current bytes, write a temporary file beside it and
  rename it over the file (fsync included, as the tools do).

Each on three paths: a file at the root, one six directories down, and one through a symlink
(`current -> releases/v2`). The new way is measured with openat2 (where the kernel has it) and
with the component walk that replaces it elsewhere. The old way is a copy kept here as the
baseline: `confine` (resolve with every symlink followed, check, return a path), then `open` by
that path.
"""

from __future__ import annotations

import os
import re
import secrets
import stat
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path, PurePosixPath
from urllib.parse import unquote

from report import Table, header, median, percentile
from wakeful.safety import beneath
from wakeful.safety.beneath import Root
from wakeful.toolkits.execution.file_targets import (
    existing_bytes,
    writable_target,
    write_atomically,
)

CALLS = (
    int(sys.argv[sys.argv.index("--calls") + 1])
    if "--calls" in sys.argv
    else (300 if "--quick" in sys.argv else 2000)
)
PATHS = {
    "top level": "README.md",
    "6 deep": "a/b/c/d/e/f/file.txt",
    "via symlink": "current/app.txt",
}
LIST_PATHS = {"top level": ".", "6 deep": "a/b/c/d/e/f", "via symlink": "current"}


# --- the baseline: the old path-based confinement, as it was ------------------------------------

_PERCENT_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")


def old_confine(root: Path, user_path: str) -> Path:
    real_root = root.resolve(strict=True)
    if "\x00" in user_path:
        raise ValueError("NUL")
    decoded = user_path
    for _ in range(3):
        if not _PERCENT_ESCAPE.search(decoded):
            break
        decoded = unquote(decoded)
        if ".." in PurePosixPath(decoded).parts:
            raise ValueError("encoded")
    candidate = Path(user_path) if user_path else Path(".")
    joined = candidate if candidate.is_absolute() else real_root / candidate
    lexical = Path(os.path.normpath(joined))
    if lexical != real_root and not lexical.is_relative_to(real_root):
        raise ValueError("outside")
    resolved = joined.resolve(strict=True)
    if resolved != real_root and not resolved.is_relative_to(real_root):
        raise ValueError("outside via symlink")
    return resolved


def old_read(root: Path, user_path: str) -> bytes:
    target = old_confine(root, user_path)
    with target.open("rb") as file:
        os.fstat(file.fileno())
        return file.read()


def old_list(root: Path, user_path: str) -> int:
    directory = old_confine(root, user_path)
    with os.scandir(directory) as listing:
        entries = sorted(listing, key=lambda e: e.name)
    return sum(1 for e in entries if e.stat(follow_symlinks=False))


def old_write(root: Path, user_path: str, data: bytes) -> None:
    target = old_confine(root, user_path)  # the file exists in this benchmark
    info = os.stat(target)
    if not stat.S_ISREG(info.st_mode):
        raise ValueError("not a file")
    target.read_bytes()
    mode = stat.S_IMODE(info.st_mode)
    temporary = target.parent / f".wakeful-{secrets.token_hex(6)}.tmp"
    handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    with os.fdopen(handle, "wb") as file:
        file.write(data)
        file.flush()
        os.fsync(file.fileno())
        os.fchmod(file.fileno(), mode)
    os.replace(temporary, target)


# --- the new way: beneath a root descriptor ------------------------------------------------------


def new_read(root_path: Path, user_path: str) -> bytes:
    with Root(root_path) as root, root.open(user_path) as found:
        os.fstat(found.fd)
        return found.read_bytes()


def new_list(root_path: Path, user_path: str) -> int:
    with Root(root_path) as root, root.open(user_path) as found:
        with os.scandir(found.fd) as listing:
            entries = sorted(listing, key=lambda e: e.name)
        return sum(1 for e in entries if e.stat(follow_symlinks=False))


def new_write(root_path: Path, user_path: str, data: bytes) -> None:
    with Root(root_path) as root, writable_target(root, user_path, False) as place:
        existing_bytes(place, place.shown)
        write_atomically(place, data)


# --- measuring -----------------------------------------------------------------------------------


def make_tree(base: Path) -> Path:
    root = base / "root"
    deep = root / "a" / "b" / "c" / "d" / "e" / "f"
    deep.mkdir(parents=True)
    (root / "releases" / "v2").mkdir(parents=True)
    (root / "current").symlink_to("releases/v2")
    text = b"x" * 2047 + b"\n"
    for directory in (root, deep, root / "releases" / "v2"):
        for i in range(49):
            (directory / f"entry-{i:02}.txt").write_bytes(b"")
    for path in (root / "README.md", deep / "file.txt", root / "releases" / "v2" / "app.txt"):
        path.write_bytes(text)
    return root


def per_call_us(operation: Callable[[], object]) -> tuple[float, float]:
    for _ in range(min(200, CALLS)):
        operation()
    samples = []
    for _ in range(CALLS):
        started = time.perf_counter_ns()
        operation()
        samples.append((time.perf_counter_ns() - started) / 1000)
    return median(samples), percentile(samples, 99)


def main() -> None:
    header(
        f"File tools: opening beneath a root descriptor vs confine + open by path ({CALLS} calls)"
    )
    kernel_has_openat2 = beneath.openat2_available()
    if not kernel_has_openat2:
        print("This kernel has no openat2: the 'openat2' column is the walk too.\n")
    table = Table(
        [
            "operation, path",
            "old p50 µs",
            "openat2 p50 µs",
            "walk p50 µs",
            "old p99",
            "openat2 p99",
            "walk p99",
        ]
    )
    data = b"y" * 2047 + b"\n"
    with tempfile.TemporaryDirectory() as tmp:
        root = make_tree(Path(tmp))
        cases: list[tuple[str, Callable[[], object], Callable[[], object]]] = []
        for label, path in PATHS.items():
            cases.append(
                (f"read, {label}", partial(old_read, root, path), partial(new_read, root, path))
            )
        for label, path in LIST_PATHS.items():
            cases.append(
                (f"list, {label}", partial(old_list, root, path), partial(new_list, root, path))
            )
        for label, path in PATHS.items():
            write_old = partial(old_write, root, path, data)
            cases.append((f"write, {label}", write_old, partial(new_write, root, path, data)))
        for label, before, new in cases:
            old_p50, old_p99 = per_call_us(before)
            beneath.use_openat2 = True
            openat2_p50, openat2_p99 = per_call_us(new)
            beneath.use_openat2 = False
            walk_p50, walk_p99 = per_call_us(new)
            beneath.use_openat2 = True
            table.add(label, old_p50, openat2_p50, walk_p50, old_p99, openat2_p99, walk_p99)
    table.print()


if __name__ == "__main__":
    main()
