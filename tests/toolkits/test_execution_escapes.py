"""The red team's escapes, replayed against `wakeful mcp serve execution` as an MCP client would
send them, over stdio to the real command, with a client that approves every call it is asked
about (the sandbox must hold even when a person said yes)."""

from __future__ import annotations

import os
import shutil
import sqlite3
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.client.context import ClientRequestContext

from mcp import Client, StdioServerParameters
from wakeful.safety.sandbox import bwrap_works

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(
        shutil.which("bwrap") is None or not bwrap_works(),
        reason="bubblewrap (`bwrap`) is not installed or cannot create namespaces here",
    ),
]


def read(path: str) -> str:
    return Path(path).read_text()


def exists(path: str) -> bool:
    return Path(path).exists()


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def approve_everything(
    context: ClientRequestContext, params: types.ElicitRequestParams
) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"approve": True, "reason": "test"})


@asynccontextmanager
async def execution_server(root: Path, *extra: str) -> AsyncIterator[Client]:
    args = ["-m", "wakeful.cli.mcp", "serve", "execution", "--root", str(root), *extra]
    params = StdioServerParameters(command=sys.executable, args=args, cwd=root)
    async with Client(params, elicitation_callback=approve_everything) as client:
        yield client


async def call(client: Client, tool: str, arguments: dict[str, Any]) -> types.CallToolResult:
    with anyio.fail_after(60):
        return await client.call_tool(tool, arguments)


MOUNT_ESCAPE = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
results = []
r = libc.mount(b"none", b"/etc", None, 32 | 4096, None)  # MS_REMOUNT | MS_BIND
results.append(("remount", r, ctypes.get_errno()))
r = libc.umount2(b"/etc/shadow", 2)
results.append(("umount", r, ctypes.get_errno()))
try:
    open("/etc/wakeful-mcp-escape", "w").write("x")
    results.append(("wrote", 0, 0))
except OSError as exc:
    results.append(("write", -1, exc.errno))
status = open("/proc/self/status").read()
cap_eff = [l.split()[1] for l in status.splitlines() if l.startswith("CapEff")][0]
print(results, "CapEff=" + cap_eff)
"""


async def test_code_interpreter_cannot_mount_or_write_etc(tmp_path: Path) -> None:
    async with execution_server(tmp_path) as client:
        result = await call(client, "code_interpreter", {"code": MOUNT_ESCAPE})

    text = text_of(result)
    assert "CapEff=0000000000000000" in text, text
    assert "('remount', -1, 1)" in text and "('umount', -1, 1)" in text
    assert "wrote" not in text
    assert not exists("/etc/wakeful-mcp-escape")


async def test_a_script_run_by_shell_exec_cannot_mount_either(tmp_path: Path) -> None:
    (tmp_path / "escape.py").write_text(MOUNT_ESCAPE)
    async with execution_server(tmp_path) as client:
        result = await call(client, "shell_exec", {"command": "python3 escape.py"})

    text = text_of(result)
    assert "CapEff=0000000000000000" in text, text
    assert "wrote" not in text
    assert not exists("/etc/wakeful-mcp-escape")


@pytest.mark.skipif(os.geteuid() != 0, reason="the kernel tunables of a root runtime")
async def test_shell_exec_cannot_write_kernel_tunables(tmp_path: Path) -> None:
    before = read("/proc/sys/kernel/core_pattern")
    # Hidden in a script, past the command policy; it writes back the value already there,
    # harmless even if the guard failed.
    (tmp_path / "tune.py").write_text(
        "p = '/proc/sys/kernel/core_pattern'\nopen(p, 'w').write(open(p).read())\n"
    )
    async with execution_server(tmp_path) as client:
        result = await call(client, "shell_exec", {"command": "python3 tune.py"})

    assert result.is_error and "Read-only file system" in text_of(result), text_of(result)
    assert read("/proc/sys/kernel/core_pattern") == before


async def test_git_hooks_and_config_cannot_be_planted_through_any_tool(tmp_path: Path) -> None:
    (tmp_path / ".git" / "hooks").mkdir(parents=True)
    (tmp_path / ".git" / "config").write_text("[core]\n")
    async with execution_server(tmp_path) as client:
        hook = await call(
            client, "write_file", {"path": ".git/./hooks/pre-commit", "content": "#!/bin/sh\n"}
        )
        config = await call(
            client,
            "shell_exec",
            {"command": "printf '[core]\\n\\tfsmonitor = touch /tmp/pwned\\n' >> .git/config"},
        )
        python = await call(
            client,
            "code_interpreter",
            {"code": "open('.git/hooks/post-checkout', 'w').write('#!/bin/sh\\n')"},
        )

    assert hook.is_error and "protected" in text_of(hook)
    assert config.is_error and "Read-only file system" in text_of(config)
    assert python.is_error and "Read-only file system" in text_of(python)
    assert (tmp_path / ".git" / "config").read_text() == "[core]\n"
    assert list((tmp_path / ".git" / "hooks").iterdir()) == []


async def test_the_audit_log_cannot_be_erased_by_the_agent(tmp_path: Path) -> None:
    async with execution_server(tmp_path) as client:
        denied = await call(client, "shell_exec", {"command": "rm -rf /"})
        erase = await call(
            client,
            "shell_exec",
            {"command": "rm -f .wakeful/execution.db*; : > .wakeful/execution.db"},
        )
        overwrite = await call(
            client, "write_file", {"path": ".wakeful/execution.db", "content": "gone"}
        )

    assert denied.is_error
    assert erase.is_error and "Read-only file system" in text_of(erase), text_of(erase)
    assert overwrite.is_error and "protected" in text_of(overwrite)
    with sqlite3.connect(tmp_path / ".wakeful" / "execution.db") as db:
        tools = [row[0] for row in db.execute("SELECT tool FROM audit")]
    assert "shell_exec" in tools


async def test_a_configuration_the_agent_writes_into_the_root_is_not_read(tmp_path: Path) -> None:
    async with execution_server(tmp_path) as client:
        planted = await call(
            client,
            "shell_exec",
            {"command": "printf '[safety.sandbox]\\nbackend = \"none\"\\n' > wakeful.toml"},
        )
    assert not planted.is_error, text_of(planted)  # a new file: nothing protected it yet
    async with execution_server(tmp_path) as client:
        after = await call(client, "shell_exec", {"command": "grep CapEff /proc/self/status"})

    assert "CapEff:\t0000000000000000" in text_of(after)
    assert "NOT A SANDBOX" not in text_of(after)


async def test_a_configuration_named_with_config_is_read_and_kept_read_only(
    tmp_path: Path,
) -> None:
    config = tmp_path / "wakeful.toml"
    config.write_text("[safety.sandbox]\nmemory_mb = 1024\n")
    async with execution_server(tmp_path, "--config", str(config)) as client:
        rewrite = await call(client, "shell_exec", {"command": "echo '[x]' > wakeful.toml"})
        status = await call(client, "shell_exec", {"command": "true"})

    assert rewrite.is_error and "Read-only file system" in text_of(rewrite)
    assert config.read_text() == "[safety.sandbox]\nmemory_mb = 1024\n"
    assert status.structured_content is not None
    assert "1024 MB memory" in status.structured_content["sandbox"]


async def test_two_clients_keep_their_saved_outputs_apart(tmp_path: Path) -> None:
    # JSON-RPC ids restart with each connection: both first calls have the same request id.
    # Two connections to one server (as two Streamable HTTP sessions are) share its store.
    from wakeful.toolkits.execution.server import execution_server as build

    server = build(tmp_path)
    async with Client(server) as first, Client(server) as second:
        one = await call(first, "shell_exec", {"command": "seq 1 500"})
        two = await call(second, "shell_exec", {"command": "seq 1000 1500"})

    assert one.structured_content is not None and two.structured_content is not None
    saved_one = one.structured_content["saved_output"]
    saved_two = two.structured_content["saved_output"]
    assert saved_one != saved_two
    assert read(str(tmp_path / saved_one)).startswith("1\n")
    assert read(str(tmp_path / saved_two)).startswith("1000\n")
