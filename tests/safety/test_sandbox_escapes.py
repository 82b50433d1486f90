"""Escapes tried from inside the sandbox, as the runtime's own user (root in CI, as an attacker
would find it): capabilities, mounts, the kernel's tunables, other namespaces, the files the host
executes, and the disk. Each test first states what a successful escape would leave behind."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from wakeful.safety.sandbox import Sandbox, SandboxSettings, bwrap_works
from wakeful.safety.sandbox.bwrap import bwrap_features
from wakeful.safety.sandbox.seccomp import seccomp_supported
from wakeful.tools.process import run_process
from wakeful.tools.spec import ToolResult

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(
        shutil.which("bwrap") is None or not bwrap_works(),
        reason="bubblewrap (`bwrap`) is not installed or cannot create namespaces here",
    ),
]
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="the escapes of a root runtime")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "workspace"
    path.mkdir()
    return path


def exists(path: str | Path) -> bool:
    return Path(path).exists()


def bytes_in(directory: Path) -> int:
    return sum(f.stat().st_size for f in directory.iterdir())


def sandbox_in(workspace: Path, **settings: object) -> Sandbox:
    return Sandbox(SandboxSettings.model_validate({"backend": "bwrap", **settings}), workspace)


async def run_in(sandbox: Sandbox, command: str, *, limit: float = 30) -> ToolResult:
    async with sandbox.prepare(["bash", "-c", command], cwd=sandbox.workspace) as prepared:
        return await run_process(
            None, argv=prepared.argv, cwd=prepared.cwd, env=prepared.env, timeout=limit
        )


async def python_in(sandbox: Sandbox, code: str) -> ToolResult:
    path = sandbox.workspace / "probe.py"
    path.write_text(code)
    return await run_in(sandbox, "python3 probe.py")


def test_the_machine_offers_the_whole_hardening() -> None:
    # CI runs on a machine that can: if this fails, every sandbox is weaker than it says.
    features = bwrap_features()
    assert features is not None
    assert features.user_namespace and features.tmp_size
    assert features.seccomp == seccomp_supported()


# --- capabilities and identity -------------------------------------------------------------------


async def test_no_capability_and_no_new_privileges(workspace: Path) -> None:
    result = await run_in(sandbox_in(workspace), "grep -E '^(Cap|NoNewPrivs)' /proc/self/status")

    fields = dict(line.split(":\t") for line in result.content.splitlines() if ":\t" in line)
    for name in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(fields[name], 16) == 0, (name, result.content)
    assert fields["NoNewPrivs"] == "1"


@as_root
async def test_a_root_runtime_runs_commands_as_an_unprivileged_user(workspace: Path) -> None:
    result = await run_in(sandbox_in(workspace), "id -u; id -g")

    assert result.content.split()[-2:] == ["65534", "65534"], result.content


# --- mounts --------------------------------------------------------------------------------------


@as_root
async def test_mount_from_python_cannot_make_etc_writable(workspace: Path) -> None:
    # The escape found by the red team: remount /etc read-write through ctypes, write a file.
    planted = Path("/etc/wakeful-escape-probe")
    code = f"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
MS_REMOUNT, MS_BIND = 32, 4096
r = libc.mount(b"none", b"/etc", None, MS_REMOUNT | MS_BIND, None)
print("remount", r, os.strerror(ctypes.get_errno()))
r = libc.mount(b"tmpfs", b"/mnt", b"tmpfs", 0, None)
print("tmpfs", r, os.strerror(ctypes.get_errno()))
r = libc.umount2(b"/etc/shadow", 2)
print("umount", r, os.strerror(ctypes.get_errno()))
try:
    open({str(planted)!r}, "w").write("x")
    print("WROTE")
except OSError as exc:
    print("write", exc.strerror)
"""
    result = await python_in(sandbox_in(workspace), code)

    assert "remount -1 Operation not permitted" in result.content
    assert "tmpfs -1 Operation not permitted" in result.content
    assert "umount -1 Operation not permitted" in result.content
    assert "WROTE" not in result.content
    assert not exists(planted)


async def test_the_mount_command_and_umount_fail(workspace: Path) -> None:
    result = await run_in(
        sandbox_in(workspace),
        "mount -t tmpfs x /etc; echo mount=$?; umount /etc/shadow; echo umount=$?; "
        "umount -l /etc; echo lazy=$?; cat /etc/shadow | wc -c",
    )

    assert "mount=32" in result.content or "mount=1" in result.content
    assert "umount=0" not in result.content and "lazy=0" not in result.content
    assert result.content.rstrip().endswith("0")  # the masked shadow file stays empty


async def test_etc_and_usr_stay_read_only(workspace: Path) -> None:
    result = await run_in(
        sandbox_in(workspace),
        "for p in /etc/wakeful-probe /usr/wakeful-probe /usr/bin/wakeful-probe "
        "/wakeful-probe; do touch $p 2>&1; done; chmod 777 /etc/passwd 2>&1; true",
    )

    assert result.content.count("Read-only file system") >= 5, result.content
    assert not any(exists(p) for p in ("/etc/wakeful-probe", "/usr/wakeful-probe"))


# --- the kernel --------------------------------------------------------------------------------


@as_root
async def test_kernel_tunables_cannot_be_written(workspace: Path) -> None:
    # The host's root user may write /proc/sys without any capability. Writing back the value
    # already there proves the point without changing the host even if the guard failed.
    result = await run_in(
        sandbox_in(workspace),
        "for f in /proc/sys/kernel/core_pattern /proc/sys/vm/overcommit_memory "
        '/proc/sys/kernel/modprobe; do v=$(cat $f); echo "$v" > $f && echo WROTE $f; done; '
        "echo 1 > /proc/sysrq-trigger && echo WROTE sysrq; "
        "ls /proc/irq/ >/dev/null 2>&1 && (echo f > /proc/irq/default_smp_affinity && "
        "echo WROTE irq); true",
    )

    assert "WROTE" not in result.content, result.content
    assert "Read-only file system" in result.content


async def test_the_seccomp_filter_refuses_kernel_interfaces(workspace: Path) -> None:
    if not seccomp_supported():
        pytest.skip("no seccomp filter for this architecture")
    machine = os.uname().machine
    numbers = {
        "x86_64": {"io_uring_setup": 425, "keyctl": 250, "ptrace": 101, "unshare": 272,
                   "clone3": 435, "bpf": 321, "add_key": 248},
        "aarch64": {"io_uring_setup": 425, "keyctl": 219, "ptrace": 117, "unshare": 97,
                    "clone3": 435, "bpf": 280, "add_key": 217},
    }[machine]  # fmt: skip
    code = f"""
import ctypes, fcntl, os, subprocess, termios, threading
libc = ctypes.CDLL(None, use_errno=True)
for name, nr in {numbers!r}.items():
    r = libc.syscall(nr, 0, 0, 0, 0)
    print(name, r, ctypes.get_errno())
try:
    fcntl.ioctl(1, termios.TIOCSTI, b"x")
except OSError as exc:
    print("TIOCSTI", exc.errno)
t = threading.Thread(target=print, args=("thread ok",)); t.start(); t.join()
print(subprocess.run(["echo", "child ok"], capture_output=True, text=True).stdout.strip())
"""
    result = await python_in(sandbox_in(workspace), code)

    lines = result.content.splitlines()
    for name in ("io_uring_setup", "keyctl", "ptrace", "unshare", "bpf", "add_key"):
        assert f"{name} -1 1" in lines, (name, result.content)  # EPERM
    assert "clone3 -1 38" in lines  # ENOSYS: the C library falls back to clone
    assert "TIOCSTI 1" in lines
    assert "thread ok" in lines and "child ok" in lines  # threads and processes still work


async def test_no_nested_user_namespace(workspace: Path) -> None:
    result = await run_in(sandbox_in(workspace), "unshare -U -r id; echo rc=$?")

    assert "rc=0" not in result.content
    assert "uid=0" not in result.content


async def test_host_secrets_stay_invisible(workspace: Path) -> None:
    result = await run_in(
        sandbox_in(workspace),
        "cat /etc/shadow /etc/gshadow 2>&1; ls -A /home 2>&1; ls /sys 2>&1; "
        "ls /run/systemd /var/run/docker.sock 2>&1; true",
    )

    assert "root:" not in result.content  # no password hash: the files are masked
    assert "/home': No such file or directory" in result.content
    assert "/sys': No such file or directory" in result.content
    assert "docker.sock': No such file or directory" in result.content


# --- files the host executes ---------------------------------------------------------------------


async def test_git_config_and_hooks_cannot_be_planted(workspace: Path) -> None:
    (workspace / ".git" / "hooks").mkdir(parents=True)
    (workspace / ".git" / "config").write_text("[core]\n")
    result = await run_in(
        sandbox_in(workspace),
        "echo '[core] fsmonitor = touch /tmp/pwned' >> .git/config; "
        "echo 'touch /tmp/pwned' > .git/hooks/pre-commit; "
        "echo ../evil > .git/commondir; "
        "mv .git .git-aside; rm -rf .git; mkdir -p .git/hooks; true",
    )

    assert (workspace / ".git" / "config").read_text() == "[core]\n"
    assert list((workspace / ".git" / "hooks").iterdir()) == []
    assert not (workspace / ".git" / "commondir").exists()
    assert not (workspace / ".git-aside").exists()
    assert "Read-only file system" in result.content


async def test_git_still_reads_the_repository(workspace: Path) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    await run_process(None, "git init -q && git -c user.email=a@b -c user.name=a commit -q "
                      "--allow-empty -m first", cwd=workspace)  # fmt: skip
    (workspace / "new.txt").write_text("x\n")
    result = await run_in(sandbox_in(workspace), "git status --short; git log --oneline")

    assert not result.is_error, result.content
    assert "?? new.txt" in result.content and "first" in result.content


async def test_state_and_configuration_are_read_only_but_scratch_is_not(workspace: Path) -> None:
    (workspace / ".wakeful").mkdir()
    (workspace / ".wakeful" / "execution.db").write_bytes(b"audit")
    (workspace / "wakeful.toml").write_text("[safety.sandbox]\n")
    (workspace / "wakeful.lock.json").write_text("{}")
    result = await run_in(
        sandbox_in(workspace),
        "echo x > .wakeful/execution.db; rm -f .wakeful/execution.db; "
        "echo 'backend = \"none\"' >> wakeful.toml; echo '{\"x\":1}' > wakeful.lock.json; "
        "mv .wakeful moved; mv wakeful.toml moved.toml; "
        "echo png > .wakeful/plots/p.png && echo plot-ok",
    )

    assert (workspace / ".wakeful" / "execution.db").read_bytes() == b"audit"
    assert (workspace / "wakeful.toml").read_text() == "[safety.sandbox]\n"
    assert (workspace / "wakeful.lock.json").read_text() == "{}"
    assert not (workspace / "moved").exists() and not (workspace / "moved.toml").exists()
    assert "plot-ok" in result.content
    assert (workspace / ".wakeful" / "plots" / "p.png").read_text() == "png\n"


async def test_a_read_only_path_inside_the_workspace_stays_read_only(workspace: Path) -> None:
    (workspace / "vendor").mkdir()
    (workspace / "vendor" / "lib.py").write_text("original\n")
    sandbox = sandbox_in(workspace, read_only_paths=[str(workspace / "vendor")])
    await run_in(sandbox, "echo changed > vendor/lib.py; echo ok > mine.txt")

    assert (workspace / "vendor" / "lib.py").read_text() == "original\n"
    assert (workspace / "mine.txt").read_text() == "ok\n"


# --- disk ----------------------------------------------------------------------------------------


async def test_a_command_that_fills_the_disk_is_stopped_at_the_quota(workspace: Path) -> None:
    sandbox = sandbox_in(workspace, disk_quota_mb=20, file_size_mb=8)
    async with sandbox.prepare(
        ["bash", "-c", "for i in $(seq 1 400); do head -c 4M /dev/zero > f$i; done; echo done"],
        cwd=workspace,
    ) as prepared:
        result = await run_process(
            None, argv=prepared.argv, cwd=prepared.cwd, env=prepared.env, timeout=60
        )
        hit = prepared.limits_hit()

    assert "disk quota" in hit
    assert "done" not in result.content
    written = bytes_in(workspace)
    assert written < 400 * 4 * 1024 * 1024 // 2  # stopped long before the end


async def test_a_command_within_the_quota_runs_to_its_end(workspace: Path) -> None:
    sandbox = sandbox_in(workspace, disk_quota_mb=50)
    async with sandbox.prepare(
        ["bash", "-c", "head -c 1M /dev/urandom > f; sleep 0.7; echo done"], cwd=workspace
    ) as prepared:
        result = await run_process(
            None, argv=prepared.argv, cwd=prepared.cwd, env=prepared.env, timeout=30
        )
        assert prepared.limits_hit() == []
    assert "done" in result.content


async def test_tmp_is_a_size_limited_tmpfs(workspace: Path) -> None:
    result = await run_in(
        sandbox_in(workspace, tmp_size_mb=4),
        "head -c 10M /dev/zero > /tmp/big; echo rc=$?; stat -c %s /tmp/big",
    )

    assert "No space left on device" in result.content
    assert int(result.content.split()[-1]) <= 4 * 1024 * 1024


def test_the_description_states_the_hardening(workspace: Path) -> None:
    text = sandbox_in(workspace).describe()
    assert "no capabilities" in text and "read-only" in text
    if bwrap_features() == bwrap_features().__class__(True, seccomp_supported(), True):  # type: ignore[union-attr]
        assert "seccomp filter" in text and "WEAKER" not in text
