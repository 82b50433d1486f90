"""The program inside `code_interpreter`'s child process: it runs cells in one persistent namespace.

The tool starts it as `python -c <this file's source> IDLE_SECONDS`, so it imports nothing from
wakeful and needs no path of ours to be visible inside the sandbox. It speaks JSON lines on
private copies of its stdin and stdout, one request and one reply per cell:

* request: `{"code": str, "cell": int, "plot_dir": str, "plot_stem": str, "max_output_bytes": int}`
* reply: `{"cell", "stdout", "stderr", "value", "error", "plots", "plot_errors", "seconds"}`, where
  `value` is the repr of a final expression (or null), `error` is `{"type", "message",
  "traceback"}` (or null) and `plots` are the PNG paths saved for the figures the cell left open.

Before the first request it writes `{"ready": true, "pid": …, "python": …}`. File descriptors 1
and 2 point at two unlinked temporary files while a cell runs, so what C code and subprocesses
print is captured too, and nothing a cell prints can corrupt the protocol. A thread reads the
requests: when the tool closes the pipe (or its process dies), the driver exits at once, even in
the middle of a cell; when no request comes for IDLE_SECONDS, it exits with IDLE_EXIT_STATUS.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import json
import linecache
import os
import queue
import sys
import tempfile
import threading
import time
import traceback
import warnings
from typing import Any, BinaryIO

IDLE_EXIT_STATUS = 85
MAX_VALUE_CHARS = 1_000_000
TRACEBACK_FRAMES = 20
CELL_PREFIX = "<cell "


class _Capture:
    """One standard stream (fd 1 or 2) redirected into an unlinked temporary file."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.file = tempfile.TemporaryFile()  # noqa: SIM115 - open for the process's life
        os.dup2(self.file.fileno(), fd)

    def take(self, limit: int) -> str:
        """The bytes written since the last take (head and tail when over `limit`); then empty."""
        size = os.fstat(self.fd).st_size
        if size <= limit:
            data = os.pread(self.fd, size, 0)
        else:
            half = limit // 2
            dropped = size - 2 * half
            marker = f"\n[… {dropped:,} bytes of output not kept by the interpreter …]\n"
            data = (
                os.pread(self.fd, half, 0) + marker.encode() + os.pread(self.fd, half, size - half)
            )
        os.ftruncate(self.fd, 0)
        os.lseek(self.fd, 0, os.SEEK_SET)
        return data.decode("utf-8", errors="replace")


def _run_cell(
    code: str, filename: str, namespace: dict[str, Any]
) -> tuple[str | None, dict[str, str] | None]:
    """Run `code` like a notebook cell: the value of a final expression is shown as its repr."""
    try:
        tree = ast.parse(code, filename, "exec")
    except SyntaxError as exc:
        return None, _error(exc, None)
    # Functions defined in a cell show their source in later tracebacks, as in a notebook.
    linecache.cache[filename] = (len(code), None, code.splitlines(keepends=True), filename)
    last: ast.Expression | None = None
    final = tree.body[-1] if tree.body else None
    if isinstance(final, ast.Expr):
        tree.body.pop()
        last = ast.Expression(final.value)
    try:
        exec(compile(tree, filename, "exec"), namespace)
        if last is None:
            return None, None
        value = eval(compile(last, filename, "eval"), namespace)
    except BaseException as exc:  # the cell's failure is the reply; the session lives on
        return None, _error(exc, exc.__traceback__)
    if value is None:
        return None, None
    namespace["_"] = value
    try:
        shown = repr(value)
    except BaseException as exc:  # a broken __repr__ is the cell's error
        return None, _error(exc, exc.__traceback__)
    shown = _encodable(shown)
    if len(shown) > MAX_VALUE_CHARS:
        extra = len(shown) - MAX_VALUE_CHARS
        shown = shown[:MAX_VALUE_CHARS] + f"[… {extra:,} characters of the repr not kept …]"
    return shown, None


def _encodable(text: str) -> str:
    """`text` with lone surrogates written as escapes ('\\ud800'), as the cell's stdout shows
    them: a repr or message may hold them, and no UTF-8 reply (an MCP result) can."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _error(exc: BaseException, tb: Any) -> dict[str, str]:
    # Drop the driver's own frames: the traceback starts at the first frame of a cell.
    while tb is not None and not tb.tb_frame.f_code.co_filename.startswith(CELL_PREFIX):
        tb = tb.tb_next
    lines = traceback.format_exception(type(exc), exc, tb, limit=-TRACEBACK_FRAMES)
    return {
        "type": type(exc).__name__,
        "message": _encodable(str(exc)),
        "traceback": _encodable("".join(lines).rstrip("\n")),
    }


def _save_figures(plot_dir: str, stem: str) -> tuple[list[str], list[str]]:
    """Save every open matplotlib figure as a PNG and close it, as a notebook shows them."""
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is None:
        return [], []
    saved: list[str] = []
    failed: list[str] = []
    numbers = pyplot.get_fignums()
    if numbers:
        os.makedirs(plot_dir, exist_ok=True)
    for index, number in enumerate(numbers, start=1):
        path = os.path.join(plot_dir, f"{stem}-{index}.png")
        try:
            pyplot.figure(number).savefig(path, format="png", dpi=100)
        except Exception as exc:  # reported with the figure's number
            failed.append(f"figure {number} could not be saved: {type(exc).__name__}: {exc}")
        else:
            saved.append(path)
    pyplot.close("all")
    return saved, failed


def _flush_standard_streams() -> None:
    for stream in (sys.stdout, sys.stderr):
        # A cell may have closed or replaced the stream; what it wrote is in the file anyway.
        with contextlib.suppress(OSError, ValueError, AttributeError):
            stream.flush()


def _read_requests(source: BinaryIO, requests: queue.Queue[bytes]) -> None:
    for line in source:
        requests.put(line)
    # The tool closed the pipe or its process died: nobody will read a reply, so stop now.
    os._exit(0)


def main() -> None:
    idle_seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 1800.0
    requests_in = os.fdopen(os.dup(0), "rb")
    replies_out = os.fdopen(os.dup(1), "wb")
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    stdout, stderr = _Capture(1), _Capture(2)
    sys.stdin = open(os.devnull, encoding="utf-8")  # noqa: SIM115 - lives as long as the process
    sys.stdout = open(1, "w", encoding="utf-8", errors="backslashreplace", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False)  # noqa: SIM115
    # With the Agg backend plt.show() does nothing; figures are saved after each cell instead,
    # so its "cannot be shown" warning would only confuse.
    warnings.filterwarnings("ignore", message="FigureCanvasAgg is non-interactive")
    sys.path.insert(0, "")  # import modules from the workspace, as `python` in it would
    namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
    requests: queue.Queue[bytes] = queue.Queue()
    threading.Thread(target=_read_requests, args=(requests_in, requests), daemon=True).start()

    def reply(message: dict[str, Any]) -> None:
        replies_out.write(json.dumps(message).encode() + b"\n")
        replies_out.flush()

    reply({"ready": True, "pid": os.getpid(), "python": sys.version.split()[0]})
    while True:
        try:
            line = requests.get(timeout=idle_seconds)
        except queue.Empty:
            os._exit(IDLE_EXIT_STATUS)
        request = json.loads(line)
        cell = int(request["cell"])
        limit = int(request["max_output_bytes"])
        started = time.monotonic()
        value, error = _run_cell(request["code"], f"{CELL_PREFIX}{cell}>", namespace)
        plots, plot_errors = _save_figures(request["plot_dir"], request["plot_stem"])
        _flush_standard_streams()
        reply(
            {
                "cell": cell,
                "stdout": stdout.take(limit),
                "stderr": stderr.take(limit),
                "value": value,
                "error": error,
                "plots": plots,
                "plot_errors": plot_errors,
                "seconds": round(time.monotonic() - started, 3),
            }
        )


if __name__ == "__main__":
    main()
