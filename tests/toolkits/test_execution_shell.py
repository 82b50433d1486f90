"""shell_exec and shell_history with real sandboxed subprocesses, and the long-output cutter."""

from __future__ import annotations

import shutil
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from process_probes import live_processes_matching
from tool_services import Events, tool_services
from wakeful.errors import ToolError
from wakeful.events import TOOL_RESULT
from wakeful.safety.commands import PolicySettings
from wakeful.safety.sandbox import SandboxSettings, bwrap_works
from wakeful.services import Services
from wakeful.toolkits.execution.long_output import keep_head_and_tail
from wakeful.toolkits.execution.shell_exec import SHELL_TOOLS, shell_exec, shell_history
from wakeful.tools.lint import lint_tool
from wakeful.tools.spec import ToolContext, ToolResult

needs_bwrap = pytest.mark.skipif(
    shutil.which("bwrap") is None or not bwrap_works(),
    reason="bubblewrap (`bwrap`) is not installed or cannot create namespaces here",
)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "workspace"
    (path / "sub").mkdir(parents=True)
    return path


@pytest.fixture
async def services(root: Path) -> AsyncIterator[tuple[Services, Events]]:
    async with tool_services(root) as (services, events):
        yield services, events


def context(
    services: Services, *, call_id: str = "call_1", session: str = "main", approved: bool = False
) -> ToolContext:
    return ToolContext(session, call_id, "shell_exec", services, approved=approved)


async def run(services: Services, **arguments: Any) -> ToolResult:
    return await shell_exec.run(arguments, context(services))


# --- the tools' descriptions -------------------------------------------------------------------


def test_the_shell_tools_pass_the_description_linter() -> None:
    assert [t.name for t in SHELL_TOOLS] == ["shell_exec", "shell_history"]
    for t in SHELL_TOOLS:
        assert lint_tool(t) == [], t.name


# --- running -----------------------------------------------------------------------------------


@needs_bwrap
@pytest.mark.anyio
async def test_returns_exit_code_and_output_in_the_workspace(
    services: tuple[Services, Events], root: Path
) -> None:
    result = await run(services[0], command="pwd; echo oops >&2", cwd="sub")

    assert not result.is_error
    assert result.content == f"Exit code 0. Output:\n{root / 'sub'}\noops"
    assert result.structured["exit_code"] == 0
    assert result.structured["saved_output"] is None
    assert result.structured["sandbox"].startswith("bwrap: no network")
    assert list((root / ".wakeful" / "outputs").iterdir()) == []  # short output is not kept


@needs_bwrap
@pytest.mark.anyio
async def test_a_failure_is_an_error_result(services: tuple[Services, Events]) -> None:
    result = await run(services[0], command="echo no >&2; exit 3")

    assert result.is_error
    assert result.content == "Command failed with exit code 3. Output:\nno"


@needs_bwrap
@pytest.mark.anyio
async def test_long_output_keeps_head_and_tail_and_saves_the_whole(
    services: tuple[Services, Events], root: Path
) -> None:
    result = await shell_exec.run({"command": "seq 1 5000"}, context(services[0], call_id="c/9"))

    lines = result.content.splitlines()
    assert lines[1:51] == [str(n) for n in range(1, 51)]
    assert lines[52:] == [str(n) for n in range(4951, 5001)]
    saved = ".wakeful/outputs/c_9.txt"
    assert (
        lines[51] == f"[… 4900 lines omitted; full output saved to {saved}; read it with read_file]"
    )
    assert (root / saved).read_text() == "".join(f"{n}\n" for n in range(1, 5001))
    assert result.structured["saved_output"] == saved


@needs_bwrap
@pytest.mark.anyio
async def test_a_very_long_line_is_cut_visibly(
    services: tuple[Services, Events], root: Path
) -> None:
    result = await run(services[0], command="head -c 50000 /dev/zero | tr '\\0' x")

    assert len(result.content) < 11_000
    assert "characters omitted" in result.content
    assert "full output saved to .wakeful/outputs/call_1.txt" in result.content
    assert (root / ".wakeful/outputs/call_1.txt").read_text() == "x" * 50000


@needs_bwrap
@pytest.mark.anyio
async def test_the_saved_output_stops_at_the_file_size_limit(root: Path) -> None:
    async with tool_services(root) as (services, _):
        services.settings[SandboxSettings] = SandboxSettings(file_size_mb=1)
        result = await run(services, command="yes | head -c 3000000")

    assert result.structured["saved_output"].startswith(".wakeful/outputs/call_1.txt (only its")
    assert (root / ".wakeful/outputs/call_1.txt").stat().st_size == 1024 * 1024


@needs_bwrap
@pytest.mark.anyio
async def test_no_daemon_outlives_the_call(services: tuple[Services, Events]) -> None:
    result = await run(
        services[0],
        command="setsid sleep 987661 & nohup sleep 987662 >/dev/null 2>&1 & (sleep 987663 &); "
        "echo started",
    )
    assert result.content.endswith("started")
    assert live_processes_matching("sleep 98766") == []


@needs_bwrap
@pytest.mark.anyio
async def test_a_timeout_stops_everything(services: tuple[Services, Events]) -> None:
    started = time.monotonic()
    result = await run(
        services[0], command="setsid sleep 987664 & sleep 987665", timeout_seconds=0.5
    )

    assert time.monotonic() - started < 5
    assert result.is_error and result.structured["timed_out"] is True
    assert "timed out after 0.5 s" in result.content
    assert live_processes_matching("sleep 98766") == []


@needs_bwrap
@pytest.mark.anyio
async def test_a_fork_bomb_reports_the_process_limit(root: Path) -> None:
    async with tool_services(root) as (services, _):
        services.settings[SandboxSettings] = SandboxSettings(max_processes=32)
        # In a script the command policy cannot see it (written inline, the policy refuses it):
        # the sandbox is the layer that has to hold.
        (root / "bomb.sh").write_text(":(){ :|:& };:\n")
        result = await run(services, command="bash bomb.sh ; sleep 2", timeout_seconds=10)
    if not result.structured["limits_hit"]:
        pytest.skip("no pids cgroup here, so hitting the limit is not reported")
    assert "limit of 32 processes" in result.content


@needs_bwrap
@pytest.mark.anyio
async def test_the_environment_is_filtered(
    services: tuple[Services, Events], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WAKEFUL_TEST_TOKEN", "sk-secret")
    result = await run(services[0], command="env")
    assert "sk-secret" not in result.content


@pytest.mark.anyio
async def test_the_none_backend_note_is_in_every_result(root: Path) -> None:
    async with tool_services(root) as (services, _):
        services.settings[SandboxSettings] = SandboxSettings(backend="none")
        result = await run(services, command="echo hi")

    assert result.content.startswith("Exit code 0. Output:\nhi\n")
    assert "[Sandbox: none — NOT A SANDBOX" in result.content
    assert result.structured["sandbox"].startswith("none — NOT A SANDBOX")


@needs_bwrap
@pytest.mark.anyio
async def test_background_runs_as_a_task_and_delivers_an_event(
    services: tuple[Services, Events],
) -> None:
    svc, events = services
    returned = time.monotonic()
    started = await run(svc, command="sleep 0.2; echo built", background=True)
    assert time.monotonic() - returned < 0.2

    assert isinstance(started.structured, dict) and started.structured["status"] == "running"
    event = await events.first(lambda e: e.kind == TOOL_RESULT)
    assert event.context["task_id"] == started.structured["task_id"]
    assert event.content == "Exit code 0. Output:\nbuilt"
    history = await shell_history.run({}, context(svc))
    assert history.structured["commands"][0]["background"] is True


# --- history -----------------------------------------------------------------------------------


@needs_bwrap
@pytest.mark.anyio
async def test_history_lists_the_sessions_commands_newest_last_in_pages(
    services: tuple[Services, Events],
) -> None:
    svc, _ = services
    for n in range(5):
        await run(svc, command=f"exit {n}")
    await shell_exec.run({"command": "true"}, context(svc, session="other"))

    page = await shell_history.run({"limit": 2}, context(svc))
    earlier = await shell_history.run({"limit": 2, "before": 4}, context(svc))

    assert page.content.splitlines()[0] == "Commands 4–5 of 5 shown"
    assert [c["command"] for c in page.structured["commands"]] == ["exit 3", "exit 4"]
    assert page.structured["commands"][-1]["exit_code"] == 4
    assert page.structured["next_before"] == 4
    assert [c["command"] for c in earlier.structured["commands"]] == ["exit 1", "exit 2"]
    other = await shell_history.run({}, context(svc, session="other"))
    assert [c["command"] for c in other.structured["commands"]] == ["true"]


@pytest.mark.anyio
async def test_history_of_a_session_without_commands(services: tuple[Services, Events]) -> None:
    result = await shell_history.run({}, context(services[0], session="fresh"))
    assert result.content == "This session has run no shell commands yet."


@pytest.mark.anyio
async def test_history_refuses_a_bad_limit(services: tuple[Services, Events]) -> None:
    with pytest.raises(ToolError, match="limit"):
        await shell_history.run({"limit": 0}, context(services[0]))


# --- bad input ---------------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"command": ""}, "command"),
        ({"command": "   "}, "empty"),
        ({"command": "echo a\x00b"}, "NUL byte"),
        ({"command": "true", "timeout_seconds": 0}, "timeout_seconds"),
        ({"command": "true", "timeout_seconds": -5}, "timeout_seconds"),
        ({"command": "true", "timeout_seconds": 100_000}, "timeout_seconds"),
        ({"command": "true", "cwd": "../.."}, "outside the root"),
        ({"command": "true", "cwd": "/etc"}, "outside the root"),
        ({"command": "true", "cwd": "missing"}, "no file or directory"),
        ({"command": "true", "shell": "zsh"}, "not a parameter"),
    ],
)
async def test_bad_input_is_a_tool_error(
    services: tuple[Services, Events], arguments: dict[str, Any], message: str
) -> None:
    with pytest.raises(ToolError, match=message):
        await shell_exec.run(arguments, context(services[0]))


@pytest.mark.anyio
async def test_a_cwd_that_is_a_file_is_refused(
    services: tuple[Services, Events], root: Path
) -> None:
    (root / "notes.txt").write_text("x")
    with pytest.raises(ToolError, match="is a file, not a directory"):
        await run(services[0], command="true", cwd="notes.txt")


@pytest.mark.anyio
async def test_no_workspace_is_a_tool_error() -> None:
    async with tool_services(None) as (services, _):
        with pytest.raises(ToolError, match="no workspace"):
            await run(services, command="true")


# --- the command policy ------------------------------------------------------------------------


@needs_bwrap
@pytest.mark.anyio
async def test_a_denied_command_is_refused_with_reasons(services: tuple[Services, Events]) -> None:
    with pytest.raises(ToolError, match="refuses this command") as caught:
        await run(services[0], command="rm -rf /")
    assert "It was not run" in str(caught.value)


@needs_bwrap
@pytest.mark.anyio
async def test_a_command_that_needs_approval_runs_only_when_approved(
    services: tuple[Services, Events], root: Path
) -> None:
    svc, _ = services
    svc.settings[PolicySettings] = PolicySettings()
    command = "curl -s http://example.invalid/ ; echo ran > ran.txt"

    asked = await shell_exec.run({"command": command}, context(svc))
    assert asked.is_error and "needs a person's approval" in asked.content
    assert asked.structured["ran"] is False and asked.structured["reasons"]
    assert not (root / "ran.txt").exists()

    approved = await shell_exec.run({"command": command}, context(svc, approved=True))
    assert "needs a person's approval" not in approved.content
    assert (root / "ran.txt").exists()


# --- keep_head_and_tail ------------------------------------------------------------------------


def test_short_text_is_kept_whole_and_not_saved(tmp_path: Path) -> None:
    text = "\n".join(str(n) for n in range(200))
    shown, saved = keep_head_and_tail(text, root=tmp_path, save_as="out/a.txt")
    assert (shown, saved) == (text, None)
    assert not (tmp_path / "out").exists()


def test_long_text_keeps_fifty_lines_each_side(tmp_path: Path) -> None:
    text = "\n".join(str(n) for n in range(1, 1001))
    shown, saved = keep_head_and_tail(text, root=tmp_path, save_as="out/a.txt")

    lines = shown.splitlines()
    assert lines[:50] == [str(n) for n in range(1, 51)]
    assert (
        lines[50] == "[… 900 lines omitted; full output saved to out/a.txt; read it with read_file]"
    )
    assert lines[51:] == [str(n) for n in range(951, 1001)]
    assert saved == "out/a.txt" and (tmp_path / saved).read_text() == text


def test_one_huge_line_is_cut_by_characters(tmp_path: Path) -> None:
    text = "y" * 100_000
    shown, saved = keep_head_and_tail(text, root=tmp_path, save_as="b.txt")

    assert len(shown) < 10_500
    assert "characters omitted" in shown
    assert "full output saved to b.txt" in shown
    assert saved is not None and (tmp_path / saved).read_text() == text


@needs_bwrap
@pytest.mark.anyio
async def test_a_cancelled_call_leaves_no_partial_output_file(
    services: tuple[Services, Events], root: Path
) -> None:
    svc, _ = services
    with anyio.move_on_after(1.5):
        await run(svc, command="seq 1 5000; sleep 30")
    outputs = root / ".wakeful" / "outputs"
    assert not outputs.exists() or list(outputs.iterdir()) == []
