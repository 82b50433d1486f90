"""The sandbox with real bubblewrap: commands try to escape and must stay contained."""

from __future__ import annotations

import logging
import os
import shutil
import time
from pathlib import Path

import anyio
import pytest
from pydantic import ValidationError

from process_probes import live_processes_matching
from wakeful.errors import ToolError
from wakeful.safety.sandbox import CgroupLimits, Sandbox, SandboxSettings, bwrap_works
from wakeful.tools.process import run_process
from wakeful.tools.spec import ToolResult

needs_bwrap = pytest.mark.skipif(
    shutil.which("bwrap") is None or not bwrap_works(),
    reason="bubblewrap (`bwrap`) is not installed or cannot create namespaces here",
)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "workspace"
    path.mkdir()
    return path


async def run_in(
    sandbox: Sandbox, command: str, *, cwd: Path | None = None, limit: float = 30
) -> ToolResult:
    async with sandbox.prepare(["bash", "-c", command], cwd=cwd or sandbox.workspace) as prepared:
        return await run_process(
            None, argv=prepared.argv, cwd=prepared.cwd, env=prepared.env, timeout=limit
        )


def bwrap_sandbox(workspace: Path, **settings: object) -> Sandbox:
    return Sandbox(SandboxSettings.model_validate({"backend": "bwrap", **settings}), workspace)


def exists(path: str | Path) -> bool:
    return Path(path).exists()


def process_count() -> int:
    return sum(1 for entry in Path("/proc").iterdir() if entry.name.isdigit())


# --- the workspace and the file system -----------------------------------------------------------


@needs_bwrap
@pytest.mark.anyio
async def test_the_workspace_is_writable_and_the_cwd(workspace: Path) -> None:
    (workspace / "sub").mkdir()
    sandbox = bwrap_sandbox(workspace)
    result = await run_in(sandbox, "pwd; echo made > made.txt", cwd=workspace / "sub")

    assert not result.is_error, result.content
    assert str(workspace / "sub") in result.content
    assert (workspace / "sub" / "made.txt").read_text() == "made\n"


@needs_bwrap
@pytest.mark.anyio
async def test_writes_outside_the_workspace_fail(workspace: Path, tmp_path: Path) -> None:
    sandbox = bwrap_sandbox(workspace)
    for target in ("/etc/wakeful-escape", "/root/wakeful-escape", "/usr/escape", "/escape"):
        result = await run_in(sandbox, f"echo x > {target}")
        assert result.is_error and "Read-only file system" in result.content, target
    # The parent directory lies in the sandbox's private /tmp: a write lands there, not here.
    await run_in(sandbox, "echo x > ../escape")
    assert not exists(tmp_path / "escape")
    assert not exists("/etc/wakeful-escape")
    assert not exists("/root/wakeful-escape")


@needs_bwrap
@pytest.mark.anyio
async def test_a_fake_home_ssh_key_outside_the_workspace_cannot_be_read(
    workspace: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("PRIVATE KEY")
    sandbox = bwrap_sandbox(workspace)

    result = await run_in(sandbox, f"cat {home}/.ssh/id_rsa; cat ~/.ssh/id_rsa; echo HOME=$HOME")

    assert "PRIVATE KEY" not in result.content
    assert "No such file or directory" in result.content
    assert "HOME=/tmp" in result.content


@needs_bwrap
@pytest.mark.anyio
async def test_root_and_home_and_password_hashes_are_hidden(workspace: Path) -> None:
    sandbox = bwrap_sandbox(workspace)
    result = await run_in(sandbox, "ls -A /home; ls -A /root; cat /etc/shadow")

    lines = result.content.splitlines()[1:]
    assert "No such file or directory" in lines[0]  # /home does not exist inside
    assert lines[1] in {".pyenv", ""} or "No such file" in lines[1]  # at most the Python
    assert "root:" not in result.content  # no password hashes


@needs_bwrap
@pytest.mark.anyio
async def test_a_symlink_out_of_the_workspace_leads_nowhere(
    workspace: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("secret")
    (workspace / "link").symlink_to(outside)
    sandbox = bwrap_sandbox(workspace)

    read = await run_in(sandbox, "cat link")
    # The target's directory is in the sandbox's private /tmp: a write through the link lands
    # in that throwaway copy, never in the real file.
    await run_in(sandbox, "echo overwritten > link")
    again = await run_in(sandbox, "cat link")

    assert read.is_error and "No such file or directory" in read.content
    assert again.is_error
    assert outside.read_text() == "secret"


@needs_bwrap
@pytest.mark.anyio
async def test_tmp_is_private_to_each_call(workspace: Path) -> None:
    sandbox = bwrap_sandbox(workspace)
    first = await run_in(sandbox, "echo left > /tmp/note; ls /tmp")
    second = await run_in(sandbox, "cat /tmp/note")

    assert "note" in first.content
    assert second.is_error and "No such file or directory" in second.content


# --- network -----------------------------------------------------------------------------------


@needs_bwrap
@pytest.mark.anyio
async def test_no_network_unless_granted(workspace: Path) -> None:
    async with await anyio.create_tcp_listener(local_host="127.0.0.1") as listener:
        port = listener.extra(anyio.abc.SocketAttribute.local_port)
        probe = f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected"

        closed = await run_in(bwrap_sandbox(workspace), probe)
        granted = await run_in(bwrap_sandbox(workspace, network=True), probe)

    assert closed.is_error and "connected" not in closed.content
    assert not granted.is_error, granted.content
    assert granted.content.endswith("connected")


# --- resource limits ---------------------------------------------------------------------------


@needs_bwrap
@pytest.mark.anyio
async def test_a_fork_bomb_ends_and_the_host_stays_usable(workspace: Path) -> None:
    probe = CgroupLimits.create(max_processes=64, memory_bytes=1 << 30)
    await probe.remove()
    if "pids" not in probe.controllers and os.geteuid() == 0:
        pytest.skip("no writable pids cgroup, and RLIMIT_NPROC does not bind root")
    before = process_count()
    sandbox = bwrap_sandbox(workspace, max_processes=64)
    started = time.monotonic()

    result = await run_in(sandbox, ":(){ :|:& };: ; sleep 3", limit=10)

    assert time.monotonic() - started < 20
    assert "Resource temporarily unavailable" in result.content  # the pids limit held it
    assert process_count() < before + 10
    assert not (await run_process(None, "echo still fine")).is_error


@needs_bwrap
@pytest.mark.anyio
async def test_allocating_past_the_memory_limit_fails(workspace: Path) -> None:
    sandbox = bwrap_sandbox(workspace, memory_mb=256)
    result = await run_in(sandbox, "python -c 'b = bytearray(4 * 1024**3)'")

    assert result.is_error
    assert "MemoryError" in result.content


@needs_bwrap
@pytest.mark.anyio
async def test_writing_past_the_file_size_limit_fails(workspace: Path) -> None:
    sandbox = bwrap_sandbox(workspace, file_size_mb=1)
    script = "open('big', 'wb').write(b'x' * (2 * 1024 * 1024))"
    result = await run_in(sandbox, f'python -c "{script}"')

    assert result.is_error
    assert "File too large" in result.content
    assert (workspace / "big").stat().st_size <= 1024 * 1024


@needs_bwrap
@pytest.mark.anyio
async def test_cpu_time_is_limited(workspace: Path) -> None:
    sandbox = bwrap_sandbox(workspace, cpu_seconds=1)
    started = time.monotonic()
    result = await run_in(sandbox, "while :; do :; done", limit=20)

    assert time.monotonic() - started < 10
    # bwrap reports a signal as 128 + its number: SIGKILL (9) or SIGXCPU (24).
    assert result.structured["exit_code"] in (137, 152), result.content


# --- nothing outlives the call -----------------------------------------------------------------


@needs_bwrap
@pytest.mark.anyio
async def test_no_daemon_survives_the_call(workspace: Path) -> None:
    sandbox = bwrap_sandbox(workspace)
    command = (
        "setsid sleep 987651 & nohup sleep 987652 >/dev/null 2>&1 & "
        "(sleep 987653 &) ; (setsid bash -c 'sleep 987654 &' &) ; sleep 0.2; echo started"
    )
    result = await run_in(sandbox, command)

    assert result.content.splitlines()[-1] == "started"
    assert live_processes_matching("sleep 98765") == []


@needs_bwrap
@pytest.mark.anyio
async def test_cancellation_kills_everything(workspace: Path) -> None:
    sandbox = bwrap_sandbox(workspace)
    with anyio.move_on_after(1):
        await run_in(sandbox, "setsid sleep 987655 & sleep 987656")
    assert live_processes_matching("sleep 98765") == []


@needs_bwrap
@pytest.mark.anyio
async def test_a_timeout_kills_everything(workspace: Path) -> None:
    sandbox = bwrap_sandbox(workspace)
    result = await run_in(sandbox, "setsid sleep 987657 & sleep 987658", limit=0.5)

    assert result.is_error and "timed out after 0.5 s" in result.content
    assert live_processes_matching("sleep 98765") == []


# --- the environment ---------------------------------------------------------------------------


@needs_bwrap
@pytest.mark.anyio
async def test_the_environment_is_filtered(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WAKEFUL_TEST_TOKEN", "sk-secret")
    monkeypatch.setenv("LANG", "C.UTF-8")
    sandbox = bwrap_sandbox(workspace)
    result = await run_in(sandbox, "env")

    assert "sk-secret" not in result.content
    assert "LANG=C.UTF-8" in result.content


# --- the none backend --------------------------------------------------------------------------


@pytest.mark.anyio
async def test_the_none_backend_says_loudly_it_is_not_a_sandbox(
    workspace: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    import wakeful.safety.sandbox.sandbox as module

    monkeypatch.setattr(module, "_warned_none", False)
    monkeypatch.setenv("WAKEFUL_TEST_TOKEN", "sk-secret")
    with caplog.at_level(logging.WARNING):
        sandbox = Sandbox(SandboxSettings(backend="none"), workspace)
        Sandbox(SandboxSettings(backend="none"), workspace)

    assert sandbox.backend == "none"
    assert sandbox.describe().startswith("none — NOT A SANDBOX")
    assert [r.getMessage() for r in caplog.records].count(
        "sandbox backend " + module.NOT_A_SANDBOX
    ) == 1
    result = await run_in(sandbox, "echo token=$WAKEFUL_TEST_TOKEN; echo home=$HOME")
    assert "sk-secret" not in result.content
    home = result.content.splitlines()[-1].removeprefix("home=")
    assert "wakeful-home-" in home and not exists(home)  # private, removed afterwards


@pytest.mark.anyio
async def test_the_none_backend_still_stops_a_setsid_daemon_where_cgroups_exist(
    workspace: Path,
) -> None:
    sandbox = Sandbox(SandboxSettings(backend="none"), workspace)
    async with sandbox.prepare(["bash", "-c", "setsid sleep 987659 & echo ok"], cwd=workspace) as p:
        await run_process(None, argv=p.argv, cwd=p.cwd, env=p.env, timeout=10)
        has_cgroups = bool(p.cgroups.controllers)
    if not has_cgroups:
        pytest.skip("no writable cgroup on this machine; the none backend cannot stop daemons")
    assert live_processes_matching("sleep 987659") == []


@needs_bwrap
def test_auto_picks_bwrap_when_it_works(workspace: Path) -> None:
    assert Sandbox(SandboxSettings(), workspace).backend == "bwrap"
    assert "no network" in Sandbox(SandboxSettings(), workspace).describe()


# --- bad input ---------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_cwd_outside_the_workspace_is_refused(workspace: Path, tmp_path: Path) -> None:
    sandbox = Sandbox(SandboxSettings(backend="none"), workspace)
    with pytest.raises(ToolError, match="outside the workspace"):
        async with sandbox.prepare(["true"], cwd=tmp_path):
            pass


def test_settings_refuse_unknown_and_impossible_values() -> None:
    with pytest.raises(ValidationError):
        SandboxSettings.model_validate({"backend": "docker"})
    with pytest.raises(ValidationError):
        SandboxSettings.model_validate({"cpu_secs": 5})
    with pytest.raises(ValidationError):
        SandboxSettings(max_processes=0)


def test_processes_are_not_left_in_cgroups(workspace: Path) -> None:
    leftovers = [
        p
        for controller in ("pids", "memory")
        for p in Path("/sys/fs/cgroup", controller).rglob(f"wakeful-sandbox-{os.getpid()}-*")
    ]
    assert leftovers == []


def test_the_python_installation_is_bound_after_the_private_tmp() -> None:
    # A venv under /tmp (a checkout in /tmp) must stay visible inside the sandbox.
    import sys

    from wakeful.safety.sandbox.bwrap import bwrap_argv

    argv = bwrap_argv(["true"], workspace=Path("/srv/w"), cwd=Path("/srv/w"), network=False)
    tmpfs = argv.index("--tmpfs")
    prefix = str(Path(sys.prefix).resolve())
    binds = [i for i, a in enumerate(argv[:-1]) if a == "--ro-bind" and argv[i + 2] == prefix]
    if not binds:
        pytest.skip("this Python lives under a system path, bound with it")
    assert all(i > tmpfs for i in binds)
