"""code_interpreter and reset_interpreter: real child processes, under bubblewrap and without it."""

from __future__ import annotations

import base64
import itertools
import os
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from process_probes import live_processes_matching
from tool_services import tool_services
from wakeful.errors import ToolError
from wakeful.messages import image_attachments
from wakeful.safety.sandbox import SandboxSettings, bwrap_works
from wakeful.services import Services
from wakeful.toolkits.execution.interpreter import (
    INTERPRETER_TOOLS,
    MAX_CODE_CHARS,
    _read_png,
    code_interpreter,
    reset_interpreter,
)
from wakeful.toolkits.execution.interpreter_pool import (
    InterpreterPool,
    pool_of,
    register_pool,
)
from wakeful.toolkits.execution.settings import InterpreterSettings
from wakeful.tools.lint import lint_tool
from wakeful.tools.spec import ToolContext, ToolResult

pytestmark = pytest.mark.anyio

_call_ids = itertools.count(1)
needs_bwrap = pytest.mark.skipif(not bwrap_works(), reason="bubblewrap cannot run here")
BACKENDS = [pytest.param("bwrap", marks=needs_bwrap), "none"]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "workspace"
    root.mkdir()
    return root


@pytest.fixture
def idle_marker() -> str:
    """A unique idle time: it is on the child's command line, so tests can find the process."""
    return f"{3000 + next(_call_ids) * 7 + os.getpid() % 1000}.125"


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def services(workspace: Path, backend: str, idle_marker: str) -> AsyncIterator[Services]:
    async with tool_services(workspace) as (services, _events), InterpreterPool() as pool:
        services.settings[SandboxSettings] = SandboxSettings(backend=backend)  # type: ignore[arg-type]
        services.settings[InterpreterSettings] = InterpreterSettings(
            idle_seconds=float(idle_marker)
        )
        register_pool(services, pool)
        yield services


async def run(
    services: Services, code: str, *, session: str = "main", **arguments: Any
) -> ToolResult:
    ctx = ToolContext(session, f"call_{next(_call_ids)}", "code_interpreter", services)
    return await code_interpreter.run({"code": code, **arguments}, ctx)


def no_live_interpreter(marker: str) -> bool:
    return live_processes_matching(marker) == []


# --- descriptions ------------------------------------------------------------------------------


def test_the_tools_meet_the_description_standard() -> None:
    assert [t.name for t in INTERPRETER_TOOLS] == ["code_interpreter", "reset_interpreter"]
    for t in INTERPRETER_TOOLS:
        assert lint_tool(t) == [], t.name
    description = code_interpreter.spec.description
    assert "no network" in description and "only the workspace is writable" in description


# --- running code ------------------------------------------------------------------------------


async def test_variables_persist_across_calls_and_a_final_expression_is_shown(
    services: Services,
) -> None:
    first = await run(services, "x = 41\ndef double(n):\n    return 2 * n")
    assert not first.is_error
    assert first.content.startswith("Cell 1 ran in ") and first.content.endswith("No output.")
    second = await run(services, "print('x is', x)\ndouble(x + 1)")
    assert not second.is_error, second.content
    assert "stdout:\nx is 41" in second.content
    assert second.content.endswith("Out:\n84")
    assert second.structured["cell"] == 2 and not second.structured["fresh_interpreter"]


async def test_numpy_pandas_and_sympy_work(services: Services) -> None:
    result = await run(
        services,
        "import numpy as np, pandas as pd, sympy as sp\n"
        "df = pd.DataFrame({'a': np.arange(4), 'b': np.arange(4) ** 2})\n"
        "x = sp.symbols('x')\n"
        "print(sp.integrate(2 * x, x))\n"
        "df['b'].sum()",
        timeout_seconds=120,
    )
    assert not result.is_error, result.content
    assert "stdout:\nx**2" in result.content
    assert result.content.endswith("Out:\nnp.int64(14)")


async def test_stdout_and_stderr_of_subprocesses_and_c_code_are_captured(
    services: Services,
) -> None:
    result = await run(
        services,
        "import os, sys\nprint('to stderr', file=sys.stderr)\nos.system('echo from a shell')",
    )
    assert not result.is_error, result.content
    assert "stdout:\nfrom a shell" in result.content
    assert "stderr:\nto stderr" in result.content
    assert "Out:\n0" in result.content  # os.system's exit status is the final expression


async def test_an_exception_shows_a_short_traceback_and_the_session_survives(
    services: Services,
) -> None:
    await run(services, "kept = 'still here'")
    failed = await run(services, "def divide(a):\n    return a / 0\n\ndivide(1)")
    assert failed.is_error
    assert failed.content.startswith("Cell 2 raised ZeroDivisionError")
    assert "variables are kept" in failed.content
    assert 'File "<cell 2>", line 4, in <module>' in failed.content
    assert "return a / 0" in failed.content
    assert "interpreter_driver" not in failed.content and "exec(" not in failed.content
    assert failed.structured["error"] == {
        "type": "ZeroDivisionError",
        "message": "division by zero",
    }
    syntax = await run(services, "def broken(:\n    pass")
    assert syntax.is_error and "raised SyntaxError" in syntax.content
    after = await run(services, "kept")
    assert after.content.endswith("Out:\n'still here'")


async def test_lone_surrogates_in_a_value_or_an_error_come_back_escaped(
    services: Services,
) -> None:
    # Found by test_every_tool's edge values: a repr holding a lone surrogate reached the MCP
    # bridge, which cannot encode it, and the call failed with UnicodeEncodeError.
    code = "class Odd:\n    def __repr__(self):\n        return 'odd \\ud800'\nOdd()"
    shown = await run(services, code)
    assert not shown.is_error and shown.content.endswith("Out:\nodd \\ud800")
    failed = await run(services, "raise ValueError('bad \\udfff')")
    assert failed.is_error and failed.structured["error"]["message"] == "bad \\udfff"
    for result in (shown, failed):
        result.content.encode("utf-8")  # what an MCP reply must be able to do


async def test_input_gets_end_of_file_instead_of_waiting(services: Services) -> None:
    result = await run(services, "input('name? ')", timeout_seconds=10)
    assert result.is_error and "raised EOFError" in result.content


async def test_a_plot_comes_back_as_an_image_and_a_saved_png(
    services: Services, workspace: Path
) -> None:
    result = await run(
        services,
        "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.title('t')\nplt.show()",
        timeout_seconds=120,
    )
    assert not result.is_error, result.content
    assert result.structured["plots"] and len(result.structured["plots"]) == 1
    saved = workspace / result.structured["plots"][0]
    assert saved.parent == workspace / ".wakeful" / "plots"
    png = saved.read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    assert f"Plot: {result.structured['plots'][0]}\n[image: image/png, " in result.content
    assert "stderr" not in result.content  # plt.show() neither blocks nor warns
    (image,) = image_attachments(result.structured)
    assert image.mime_type == "image/png" and base64.b64decode(image.data) == png
    again = await run(services, "1 + 1")
    assert again.structured["plots"] == [] and "images" not in again.structured


def test_a_plot_that_links_outside_the_workspace_is_not_read(
    workspace: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.png"
    secret.write_bytes(b"\x89PNG\r\n\x1a\nsecret")
    (workspace / "plot.png").symlink_to(secret)
    (workspace / "fake.png").write_bytes(b"GIF89a")
    data, problem = _read_png(workspace, "plot.png")
    assert data is None and "outside the root" in problem
    data, problem = _read_png(workspace, "fake.png")
    assert data is None and problem == "the file is no longer a PNG"


async def test_long_output_keeps_head_and_tail_and_saves_the_whole(
    services: Services, workspace: Path
) -> None:
    result = await run(services, "for i in range(1000):\n    print('line', i)")
    assert not result.is_error
    assert "line 0\n" in result.content and "line 999" in result.content
    assert "line 500\n" not in result.content
    assert "900 lines omitted; full output saved to .wakeful/output/" in result.content
    saved = workspace / result.structured["saved_output"]["stdout"]
    assert saved.read_text().splitlines() == [f"line {i}" for i in range(1000)]


async def test_two_sessions_are_isolated(services: Services) -> None:
    await run(services, "owner = 'alice'", session="alice")
    await run(services, "owner = 'bob'", session="bob")
    alice = await run(services, "owner", session="alice")
    bob = await run(services, "owner", session="bob")
    assert alice.content.endswith("Out:\n'alice'") and bob.content.endswith("Out:\n'bob'")
    pool = pool_of(services)
    assert pool.pid_of("alice") != pool.pid_of("bob")


# --- stopping --------------------------------------------------------------------------------


async def test_a_timeout_kills_the_interpreter_and_says_the_variables_are_lost(
    services: Services, idle_marker: str
) -> None:
    await run(services, "x = 1")
    assert not no_live_interpreter(idle_marker)
    with anyio.fail_after(20):
        result = await run(services, "import time\ntime.sleep(30)", timeout_seconds=1)
    assert result.is_error
    assert "did not finish within 1 s" in result.content
    assert "variables of this session are lost" in result.content
    assert result.structured["timed_out"] and result.structured["variables_lost"]
    assert no_live_interpreter(idle_marker)
    fresh = await run(services, "x")
    assert fresh.is_error and "NameError" in fresh.content
    assert fresh.structured["fresh_interpreter"] and fresh.structured["cell"] == 1


@pytest.mark.parametrize(
    ("code", "death"),
    [
        ("import os\nos._exit(3)", "exited with status 3"),
        ("import ctypes\nctypes.string_at(0)", "killed by signal SIGSEGV"),
    ],
)
async def test_a_crash_is_reported_and_the_next_call_starts_fresh(
    services: Services, idle_marker: str, code: str, death: str
) -> None:
    await run(services, "x = 1")
    crashed = await run(services, code)
    assert crashed.is_error
    assert crashed.content.startswith("The interpreter died while running cell 2")
    assert death in crashed.content and "variables of this session are lost" in crashed.content
    assert no_live_interpreter(idle_marker)
    fresh = await run(services, "'x' in globals()")
    assert fresh.content.endswith("Out:\nFalse") and fresh.structured["fresh_interpreter"]


async def test_an_idle_interpreter_shuts_down_and_the_next_call_says_so(
    workspace: Path, backend: str
) -> None:
    async with tool_services(workspace) as (services, _), InterpreterPool() as pool:
        services.settings[SandboxSettings] = SandboxSettings(backend=backend)  # type: ignore[arg-type]
        services.settings[InterpreterSettings] = InterpreterSettings(idle_seconds=0.5)
        register_pool(services, pool)
        await run(services, "x = 1")
        assert pool.pid_of("main") is not None
        # Real idle time in a real child: it exits by itself after 0.5 s without a call.
        await anyio.sleep(2)
        assert pool.pid_of("main") is None
        result = await run(services, "'x' in globals()")
        assert "idle too long" in result.content and "variables were lost" in result.content
        assert result.content.endswith("Out:\nFalse")


async def test_cancellation_kills_the_interpreter(services: Services, idle_marker: str) -> None:
    await run(services, "x = 1")
    with anyio.move_on_after(1) as scope:
        await run(services, "import time\ntime.sleep(60)")
    assert scope.cancelled_caught
    assert no_live_interpreter(idle_marker)
    assert pool_of(services).sessions() == []


async def test_closing_the_pool_stops_every_interpreter(workspace: Path, idle_marker: str) -> None:
    async with tool_services(workspace) as (services, _):
        services.settings[InterpreterSettings] = InterpreterSettings(
            idle_seconds=float(idle_marker)
        )
        async with InterpreterPool() as pool:
            register_pool(services, pool)
            await run(services, "a = 1", session="one")
            await run(services, "b = 2", session="two")
            assert len(live_processes_matching(idle_marker)) >= 2
        assert no_live_interpreter(idle_marker)
        with pytest.raises(ToolError, match="have been shut down"):
            await run(services, "1")


async def test_reset_interpreter_forgets_the_variables(services: Services) -> None:
    ctx = ToolContext("main", "call_reset", "reset_interpreter", services)
    nothing = await reset_interpreter.run({}, ctx)
    assert nothing.structured == {"stopped": False} and "nothing was stopped" in nothing.content
    await run(services, "x = 1")
    stopped = await reset_interpreter.run({}, ctx)
    assert stopped.structured == {"stopped": True} and "variables are gone" in stopped.content
    after = await run(services, "'x' in globals()")
    assert after.content.endswith("Out:\nFalse")


# --- the sandbox -------------------------------------------------------------------------------


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.setblocking(False)
    yield server
    server.close()


@needs_bwrap
@pytest.mark.parametrize("backend", ["bwrap"])
async def test_in_the_sandbox_the_network_is_unreachable(
    services: Services, listener: socket.socket
) -> None:
    port = listener.getsockname()[1]
    result = await run(
        services,
        f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=3)",
    )
    assert result.is_error and "raised ConnectionRefusedError" in result.content
    with pytest.raises(BlockingIOError):
        listener.accept()  # nothing reached the host's port


@needs_bwrap
@pytest.mark.parametrize("backend", ["bwrap"])
async def test_in_the_sandbox_only_the_workspace_is_writable(
    services: Services, workspace: Path, tmp_path: Path
) -> None:
    # The host's /tmp is not visible: a write beside the workspace lands in the private /tmp.
    outside = tmp_path / "outside.txt"
    result = await run(
        services,
        f"open('inside.txt', 'w').write('ok')\nopen({str(outside)!r}, 'w').write('escaped')",
    )
    assert not result.is_error, result.content
    assert (workspace / "inside.txt").read_text() == "ok"
    assert not outside.exists()
    hidden = await run(services, f"open({str(Path(__file__))!r})")
    assert hidden.is_error and "raised FileNotFoundError" in hidden.content
    system = await run(services, "open('/usr/wakeful-test', 'w')")
    assert system.is_error and "Read-only file system" in system.content


# --- bad input ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "fragment"),
    [
        ({"code": ""}, "field `code`: String should have at least 1 character"),
        ({"code": "x" * (MAX_CODE_CHARS + 1)}, "field `code`: String should have at most"),
        ({"code": "1", "timeout_seconds": 0}, "field `timeout_seconds`: Input should be greater"),
        ({"code": "1", "timeout_seconds": 601}, "field `timeout_seconds`: Input should be less"),
        ({"code": "1", "language": "r"}, "field `language` is not a parameter of this tool"),
        ({"code": "print(1)\x00"}, "holds a NUL character (at index 8)"),
        ({"code": " \n\t"}, "only whitespace (3 characters)"),
    ],
)
@pytest.mark.parametrize("backend", ["none"])
async def test_bad_input_is_named_and_nothing_runs(
    services: Services, idle_marker: str, arguments: dict[str, Any], fragment: str
) -> None:
    ctx = ToolContext("main", "call_bad", "code_interpreter", services)
    with pytest.raises(ToolError) as info:
        await code_interpreter.run(arguments, ctx)
    assert fragment in str(info.value)
    assert no_live_interpreter(idle_marker)


async def test_without_a_workspace_the_tool_says_how_to_configure_one() -> None:
    async with tool_services(None) as (services, _):
        ctx = ToolContext("main", "call_1", "code_interpreter", services)
        with pytest.raises(ToolError, match="no root directory to work in"):
            await code_interpreter.run({"code": "1"}, ctx)
