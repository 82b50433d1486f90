"""run_shell in the sandbox, where the runtime was given sandbox settings (as `wakeful run` is):
the workspace is writable, the rest of the system is not, and nothing outlives the command."""

from __future__ import annotations

import shutil
from pathlib import Path

import anyio
import pytest

from process_probes import live_processes_matching
from tool_services import tool_services
from wakeful.safety.sandbox import SandboxSettings
from wakeful.toolkits.execution.run_shell import run_shell
from wakeful.tools.spec import ToolContext

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed"),
]


async def test_run_shell_runs_in_the_sandbox_when_one_is_configured(tmp_path: Path) -> None:
    async with tool_services(tmp_path) as (services, _events):
        services.settings[SandboxSettings] = SandboxSettings(backend="bwrap")
        ctx = ToolContext("main", "c1", "run_shell", services)
        wrote = await run_shell.run({"command": "echo inside > here.txt && cat here.txt"}, ctx)
        refused = await run_shell.run({"command": "touch /etc/wakeful-escape"}, ctx)
        marker = "wakeful-sandbox-daemon-5151"
        await run_shell.run(
            {"command": f"setsid bash -c 'exec -a {marker} sleep 1000' & sleep 0.2"}, ctx
        )
    assert not wrote.is_error and "inside" in wrote.content
    assert (tmp_path / "here.txt").read_text() == "inside\n"
    assert refused.is_error
    assert "Read-only file system" in refused.content
    assert not await anyio.Path("/etc/wakeful-escape").exists()
    assert live_processes_matching(marker) == []


async def test_without_sandbox_settings_it_is_sandboxed_all_the_same(tmp_path: Path) -> None:
    # Secure by default: a Runtime built without [safety.sandbox] (the README's library
    # example) must not hand the model the runtime's own permissions.
    outside = tmp_path / "outside"
    outside.mkdir()
    workspace = tmp_path / "ws"
    workspace.mkdir()
    async with tool_services(workspace) as (services, _events):
        ctx = ToolContext("main", "c1", "run_shell", services)
        escaped = await run_shell.run({"command": f"echo x > {outside}/f.txt"}, ctx)
        inside = await run_shell.run({"command": "echo y > f.txt && cat f.txt"}, ctx)
    assert escaped.is_error
    assert not (outside / "f.txt").exists()
    assert not inside.is_error and "NOT A SANDBOX" not in inside.content
    assert (workspace / "f.txt").read_text() == "y\n"


async def test_only_an_explicit_none_backend_runs_unconfined_and_every_result_says_so(
    tmp_path: Path,
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    workspace = tmp_path / "ws"
    workspace.mkdir()
    async with tool_services(workspace) as (services, _events):
        services.settings[SandboxSettings] = SandboxSettings(backend="none")
        ctx = ToolContext("main", "c1", "run_shell", services)
        result = await run_shell.run({"command": f"echo x > {outside}/f.txt"}, ctx)
    assert not result.is_error
    assert (outside / "f.txt").read_text() == "x\n"
    assert "[Sandbox: none — NOT A SANDBOX" in result.content


async def test_a_command_past_the_disk_quota_is_stopped_and_told_why(tmp_path: Path) -> None:
    async with tool_services(tmp_path) as (services, _events):
        services.settings[SandboxSettings] = SandboxSettings(backend="bwrap", disk_quota_mb=10)
        ctx = ToolContext("main", "c1", "run_shell", services)
        result = await run_shell.run(
            {"command": "for i in $(seq 1 200); do head -c 2M /dev/zero > f$i; done"}, ctx
        )
    assert result.is_error
    assert "grew past its disk quota of 10 MB" in result.content


async def test_a_fast_write_past_the_quota_is_reported_and_the_next_command_stopped(
    tmp_path: Path,
) -> None:
    async with tool_services(tmp_path) as (services, _events):
        services.settings[SandboxSettings] = SandboxSettings(backend="bwrap", disk_quota_mb=10)
        ctx = ToolContext("main", "c1", "run_shell", services)
        fast = await run_shell.run({"command": "head -c 30M /dev/zero > big"}, ctx)
        nxt = await run_shell.run({"command": "sleep 5; echo finished"}, ctx)
    assert "grew past its disk quota of 10 MB" in fast.content
    assert nxt.is_error and "finished" not in nxt.content
    assert "grew past its disk quota of 10 MB" in nxt.content
