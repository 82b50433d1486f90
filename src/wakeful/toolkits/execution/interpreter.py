"""`code_interpreter` and `reset_interpreter`: sandboxed Python whose variables persist per session.

Each session gets one long-lived Python process (see :mod:`.interpreter_pool` for who starts and
stops it, and :mod:`.interpreter_driver` for what runs inside). The process runs under the OS
sandbox (:class:`wakeful.safety.sandbox.Sandbox`) with the workspace as its working directory.

Limits. Each call has a wall-clock timeout (default 60 s); when it passes, the interpreter is
killed and its variables are lost. RLIMIT_CPU counts CPU time over a process's whole life, so the
sandbox's per-command `cpu_seconds` would end a busy session after a minute of work in total: the
interpreter gets `InterpreterSettings.lifetime_cpu_seconds` (an hour) instead, and the per-call
timeout does the per-call bounding. Memory, process and file-size limits are the sandbox's own.
"""

from __future__ import annotations

import base64
import os
import re
import stat
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any

import anyio
from pydantic import Field

from ...errors import ToolError
from ...mcp.results import describe_size
from ...safety.beneath import Root
from ...safety.paths import display_path
from ...safety.sandbox import PreparedCommand, Sandbox, SandboxSettings
from ...services import settings_of
from ...tools.spec import Tool, ToolAnnotations, ToolContext, ToolResult, tool
from ..perception.workspace import workspace_root
from .interpreter_pool import CellReply, Launcher, Outcome, pool_of
from .long_output import keep_head_and_tail
from .settings import InterpreterSettings

__all__ = [
    "DEFAULT_TIMEOUT_SECONDS",
    "INTERPRETER_TOOLS",
    "MAX_CODE_CHARS",
    "MAX_TIMEOUT_SECONDS",
    "code_interpreter",
    "reset_interpreter",
]

DEFAULT_TIMEOUT_SECONDS = 60
MAX_TIMEOUT_SECONDS = 600
MAX_CODE_CHARS = 100_000
MAX_IMAGES = 8
MAX_IMAGE_BYTES = 5 * 1024 * 1024
PLOT_DIR = ".wakeful/plots"
OUTPUT_DIR = ".wakeful/output"
_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
_UNSAFE_STEM = re.compile(r"[^A-Za-z0-9_-]+")


@tool(
    annotations=ToolAnnotations(read_only=False, destructive=True, idempotent=False),
    examples=(
        {"code": "import pandas as pd\ndf = pd.read_csv('data/sales.csv')\ndf.describe()"},
        {"code": "df.groupby('region')['amount'].sum().sort_values()"},
        {
            "code": "import matplotlib.pyplot as plt\nplt.plot(df['day'], df['amount'])\n"
            "plt.title('Sales')"
        },
        {"code": "import sympy as sp\nx = sp.symbols('x')\nsp.integrate(sp.sin(x)**2, x)"},
        {"code": "train(model, epochs=50)", "timeout_seconds": 300},
    ),
)
async def code_interpreter(
    ctx: ToolContext,
    code: Annotated[
        str,
        Field(
            min_length=1,
            max_length=MAX_CODE_CHARS,
            description="Python source to run, like a notebook cell; the value of a final "
            f"expression is shown. At most {MAX_CODE_CHARS:,} characters, e.g. "
            "'import numpy as np\\nnp.arange(10).mean()'.",
        ),
    ],
    timeout_seconds: Annotated[
        int,
        Field(
            ge=1,
            le=MAX_TIMEOUT_SECONDS,
            description=f"Wall-clock seconds this call may run (1-{MAX_TIMEOUT_SECONDS}); when "
            "they pass the interpreter is killed and its variables are lost, e.g. 120.",
        ),
    ] = DEFAULT_TIMEOUT_SECONDS,
) -> ToolResult:
    """Run Python code in this session's persistent interpreter, like a notebook cell.

    Use it for calculation, data analysis and plots: numpy, pandas, sympy and matplotlib are
    installed. Variables, imports and functions persist from one call to the next within the
    session (each session has its own interpreter), so load data once and explore it in later
    calls. The working directory is the workspace root: read and write files there with
    relative paths. Call reset_interpreter to start over with no variables.

    It runs in a sandbox: no network access (it cannot download data or install packages), and
    only the workspace is writable; the rest of the system is read-only and /tmp is private.
    It does not accept input() (stdin is empty), cannot show windows (plt.show() does nothing;
    open figures are saved and returned after each call), and does not keep variables through a
    timeout, a crash, or 30 minutes without a call: a fresh interpreter then starts and the
    result says so.

    Result: "Cell 3 ran in 0.2 s.", then sections "stdout:", "stderr:" and "Out:" (the repr of
    a final expression, e.g. a DataFrame), each shown only when not empty; an exception gives
    "Cell 3 raised ValueError (the session's variables are kept)." and a traceback of your code
    (an error result). Each figure left open is saved as a PNG under .wakeful/plots/ ("Plot:
    .wakeful/plots/call_1-1.png") and returned as an image ("[image: image/png, 40 KB]";
    structured["images"] = [{"mime_type", "data"}]). Output over 200 lines or 10,000 characters
    keeps its first and last 50 lines, and the whole is saved to a file named in the result.
    structured holds cell, seconds, plots, error, fresh_interpreter and variables_lost.

    Cost: starting an interpreter takes about 0.1 s (importing pandas about 1 s, once); then as
    long as the code runs, up to timeout_seconds. At most about 10,000 characters of text per
    stream, plus up to 8 PNG images.
    """
    root = workspace_root(ctx)
    if "\x00" in code:
        where = code.index("\x00")
        raise ToolError(
            f"The code holds a NUL character (at index {where}), which Python source cannot "
            "contain. Remove it; to build such a string in code, write the escape '\\x00'."
        )
    if not code.strip():
        raise ToolError(
            f"The code is only whitespace ({len(code)} characters), so there is nothing to run. "
            "Send the Python statements to run, e.g. 'print(1 + 1)'."
        )
    settings = settings_of(ctx.services, InterpreterSettings)
    stem = _stem_of(ctx.call_id)
    outcome = await pool_of(ctx.services).run(
        ctx.session,
        code,
        launch=await _sandbox_launcher(ctx, root, settings),
        workdir=root,
        settings=settings,
        time_limit=timeout_seconds,
        plot_dir=PLOT_DIR,
        plot_stem=stem,
    )
    return await _result(outcome, root=root, stem=stem, time_limit=timeout_seconds)


@tool(
    annotations=ToolAnnotations(read_only=False, destructive=True, idempotent=True),
    examples=({},),
)
async def reset_interpreter(ctx: ToolContext) -> ToolResult:
    """Stop this session's Python interpreter, so the next code_interpreter call starts fresh.

    Use it when the session's variables are in a bad state, memory is full, or a clean start
    matters (e.g. to check that a script runs from scratch). It cannot bring back variables:
    everything defined in earlier calls is lost, though files written to the workspace stay.
    It does not affect other sessions' interpreters.

    Result: "The interpreter of this session was stopped; its variables are gone." or, when
    none was running, "No interpreter was running in this session; nothing was stopped."
    structured = {"stopped": true|false}.

    Cost: instant to 2 s (the time to stop the process); a one-line result of about 80
    characters.
    """
    stopped = await pool_of(ctx.services).reset(ctx.session)
    if stopped:
        text = "The interpreter of this session was stopped; its variables are gone."
    else:
        text = "No interpreter was running in this session; nothing was stopped."
    return ToolResult(text, structured={"stopped": stopped})


INTERPRETER_TOOLS: tuple[Tool, ...] = (code_interpreter, reset_interpreter)


async def _sandbox_launcher(
    ctx: ToolContext, root: Path, settings: InterpreterSettings
) -> Launcher:
    """`Sandbox.prepare` under the session's sandbox settings, CPU time counted per lifetime."""
    sandbox_settings = settings_of(ctx.services, SandboxSettings).model_copy(
        update={"cpu_seconds": settings.lifetime_cpu_seconds}
    )
    # The first Sandbox probes whether bubblewrap works (a subprocess): not on the event loop.
    sandbox = await anyio.to_thread.run_sync(Sandbox, sandbox_settings, root)

    @asynccontextmanager
    async def launch(
        argv: Sequence[str], *, cwd: Path, env: Mapping[str, str]
    ) -> AsyncIterator[PreparedCommand]:
        async with sandbox.prepare(argv, cwd=cwd, env=env) as prepared:
            yield prepared

    return launch


def _stem_of(call_id: str) -> str:
    stem = _UNSAFE_STEM.sub("_", call_id).strip("_")[:64]
    return stem or "call"


async def _result(outcome: Outcome, *, root: Path, stem: str, time_limit: int) -> ToolResult:
    notes: list[str] = []
    if outcome.previous_loss is not None:
        notes.append(
            f"Note: this session's previous interpreter had stopped ({outcome.previous_loss}), "
            "so its variables were lost; this code ran in a fresh interpreter."
        )
    structured: dict[str, Any] = {
        "cell": outcome.cell,
        "fresh_interpreter": outcome.fresh,
        "variables_lost": outcome.previous_loss is not None or outcome.kind != "reply",
        "timed_out": outcome.kind == "timed_out",
        "died": outcome.death,
    }
    if outcome.kind == "timed_out":
        header = (
            f"Cell {outcome.cell} did not finish within {time_limit} s, so the interpreter was "
            "killed: all variables of this session are lost, and the next call starts a fresh "
            "interpreter. Run shorter steps, or pass a larger timeout_seconds (up to "
            f"{MAX_TIMEOUT_SECONDS})."
        )
        return ToolResult("\n".join([*notes, header]), is_error=True, structured=structured)
    if outcome.kind == "died":
        header = (
            f"The interpreter died while running cell {outcome.cell}: {outcome.death}. All "
            "variables of this session are lost; the next call starts a fresh interpreter."
        )
        return ToolResult("\n".join([*notes, header]), is_error=True, structured=structured)
    reply = outcome.reply
    assert reply is not None
    parts = [*notes, _header(reply)]
    saved: dict[str, str] = {}
    for name, text in (("stdout", reply.stdout), ("stderr", reply.stderr), ("Out", reply.value)):
        if not text:
            continue
        text = text.removesuffix("\n")  # print()'s last newline; the section ends there anyway
        shown, path = await anyio.to_thread.run_sync(_keep, text, root, f"{stem}-{name.lower()}")
        if path is not None:
            saved[name.lower()] = path
        parts.append(f"{name}:\n{shown}")
    if reply.error is not None:
        parts.append(reply.error["traceback"])
        structured["error"] = {"type": reply.error["type"], "message": reply.error["message"]}
    images, plot_lines = await _plots(reply, root)
    parts.extend(plot_lines)
    parts.extend(reply.plot_errors)
    structured.update(
        seconds=reply.seconds, plots=[display_path(root / p, root) for p in reply.plots]
    )
    if saved:
        structured["saved_output"] = saved
    if images:
        structured["images"] = images
    return ToolResult("\n".join(parts), is_error=reply.error is not None, structured=structured)


def _header(reply: CellReply) -> str:
    if reply.error is not None:
        return (
            f"Cell {reply.cell} raised {reply.error['type']} after {reply.seconds:.2f} s (the "
            "session's variables are kept)."
        )
    quiet = "" if reply.stdout or reply.stderr or reply.value or reply.plots else " No output."
    return f"Cell {reply.cell} ran in {reply.seconds:.2f} s.{quiet}"


def _keep(text: str, root: Path, stem: str) -> tuple[str, str | None]:
    # The sandboxed code can write the output folder, so it could have made it (or a file in
    # it) a link to elsewhere: the save goes through the root's descriptor, never out of it.
    return keep_head_and_tail(text, root=root, save_as=f"{OUTPUT_DIR}/{stem}.txt")


async def _plots(reply: CellReply, root: Path) -> tuple[list[dict[str, str]], list[str]]:
    """The saved figures as images for the model, each read back only if it is a PNG in root."""
    images: list[dict[str, str]] = []
    lines: list[str] = []
    for relative in reply.plots:
        data, problem = await anyio.to_thread.run_sync(_read_png, root, relative)
        shown = relative.replace("\\", "/")
        if data is None:
            lines.append(f"Plot: {shown} (not returned as an image: {problem})")
            continue
        if len(images) >= MAX_IMAGES:
            lines.append(f"Plot: {shown} (not returned as an image: over {MAX_IMAGES} a call)")
            continue
        encoded = base64.b64encode(data).decode("ascii")
        images.append({"mime_type": "image/png", "data": encoded})
        lines.append(f"Plot: {shown}\n[image: image/png, {describe_size(encoded)}]")
    return images, lines


def _read_png(root: Path, relative: str) -> tuple[bytes | None, str]:
    # The sandboxed code could have replaced the plot (or its folder) with a link to a file
    # outside the workspace; opened through the root's descriptor, only a file under it is read.
    try:
        with Root(root) as opened, opened.open(relative) as found:
            if not stat.S_ISREG(os.fstat(found.fd).st_mode):
                return None, "it is not a regular file"
            data = os.read(found.fd, MAX_IMAGE_BYTES + 1)
    except (ToolError, OSError) as exc:
        return None, str(exc)
    if len(data) > MAX_IMAGE_BYTES:
        return None, f"over {MAX_IMAGE_BYTES // (1024 * 1024)} MB"
    if not data.startswith(_PNG_MAGIC):
        return None, "the file is no longer a PNG"
    return data, ""
