"""Post-execution verification: checks that run after a tool succeeded, findings in its result.

The chapter's advice is to verify in another modality than the one that produced the change:
not "read the diff again" but "run it". A deployment lists hooks per tool in wakeful.toml::

    [[safety.verify]]
    tool = "write_file"
    when_path = "*.toml"
    command = "python -c 'import tomllib,sys; tomllib.load(open(sys.argv[1], \"rb\"))' {path}"

    [[safety.verify]]
    tool = "edit_file"
    when_path = "tests/*.py"
    command = "python -m pytest -q {path}"

`command` runs in the workspace, inside the sandbox of `[safety.sandbox]`, with `{path}` replaced
by the call's path argument, shell-quoted; `reread = true` re-reads the file the call wrote and
reports its size and digest, and whether the text the call meant to write is there. Findings
are appended to the result as a "Verification:" section and to its structured content; a failed
check does not undo anything — it tells the agent what to fix.
"""

from __future__ import annotations

import fnmatch
import hashlib
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
from pydantic import BaseModel, ConfigDict, Field

from ..errors import ToolError
from ..messages import ToolCall
from ..services import settings_of
from ..tools.process import run_process
from ..tools.spec import ToolContext, ToolResult
from .beneath import Root
from .sandbox import Sandbox, SandboxSettings

_FINDING_CHARS = 1_500


class VerifyRule(BaseModel):
    """One `[[safety.verify]]` entry."""

    model_config = ConfigDict(extra="forbid")

    tool: str = Field(description="Tool name or glob, e.g. 'write_file'.")
    when_path: str | None = Field(
        default=None, description="Only when the call's path matches this glob, e.g. '*.json'."
    )
    command: str | None = Field(default=None, description="Shell command; {path} is replaced.")
    reread: bool = False
    timeout_seconds: float = Field(default=120.0, gt=0, le=3600)

    def applies(self, tool_name: str, arguments: Mapping[str, Any]) -> bool:
        if not fnmatch.fnmatchcase(tool_name, self.tool):
            return False
        if self.when_path is None:
            return True
        path = arguments.get("path")
        return isinstance(path, str) and fnmatch.fnmatch(path, self.when_path)


async def verify(
    rules: Sequence[VerifyRule],
    call: ToolCall,
    arguments: Mapping[str, Any],
    result: ToolResult,
    ctx: ToolContext,
) -> ToolResult:
    """Run the hooks that apply to a successful call; return the result with their findings."""
    if result.is_error:
        return result
    findings: list[dict[str, Any]] = []
    for rule in rules:
        if not rule.applies(call.name, arguments):
            continue
        if rule.reread:
            findings.append(await _reread(arguments, ctx))
        if rule.command is not None:
            findings.append(await _run_check(rule, arguments, ctx))
    if not findings:
        return result
    lines = [f"- [{'ok' if f['ok'] else 'FAILED'}] {f['check']}: {f['detail']}" for f in findings]
    content = result.content + "\n\nVerification:\n" + "\n".join(lines)
    structured = result.structured
    if isinstance(structured, dict):
        structured = {**structured, "verification": findings}
    elif structured is None:
        structured = {"verification": findings}
    return ToolResult(content, is_error=result.is_error, structured=structured)


async def _reread(arguments: Mapping[str, Any], ctx: ToolContext) -> dict[str, Any]:
    path = arguments.get("path")
    root = ctx.services.workdir
    if not isinstance(path, str) or root is None:
        return {"check": "re-read", "ok": False, "detail": "the call has no path to re-read"}

    def read() -> bytes:
        # By descriptor beneath the root, as the file tools write (see .beneath).
        with Root(root) as opened, opened.open(path) as found:
            return found.read_bytes()

    try:
        data = await anyio.to_thread.run_sync(read)
    except (OSError, ToolError) as exc:
        return {"check": f"re-read {path}", "ok": False, "detail": f"could not read it: {exc}"}
    digest = hashlib.sha256(data).hexdigest()[:16]
    expected = arguments.get("content", arguments.get("new"))
    ok = True
    detail = f"{len(data)} bytes, sha256 {digest}…"
    if isinstance(expected, str):
        present = expected.encode("utf-8", errors="surrogateescape") in data
        ok = present
        detail += (
            "; the text the call wrote is there"
            if present
            else "; the text the call meant to write is NOT in the file"
        )
    return {"check": f"re-read {path}", "ok": ok, "detail": detail}


async def _run_check(
    rule: VerifyRule, arguments: Mapping[str, Any], ctx: ToolContext
) -> dict[str, Any]:
    assert rule.command is not None
    path = arguments.get("path")
    command = rule.command.replace("{path}", shlex.quote(path) if isinstance(path, str) else "")
    root = ctx.services.workdir if ctx.services.workdir is not None else Path.cwd()
    # A check runs what the agent wrote, so it runs where the agent's own commands do: in the
    # sandbox (with the `none` backend, only its limits apply).
    sandbox = await anyio.to_thread.run_sync(
        Sandbox, settings_of(ctx.services, SandboxSettings), root
    )
    async with sandbox.prepare(["bash", "-c", command], cwd=root) as prepared:
        result = await run_process(
            None,
            argv=prepared.argv,
            cwd=prepared.cwd,
            env=prepared.env,
            timeout=rule.timeout_seconds,
        )
    text = result.content
    if len(text) > _FINDING_CHARS:
        text = text[:_FINDING_CHARS] + f"… [{len(result.content) - _FINDING_CHARS} chars omitted]"
    return {"check": f"`{command}`", "ok": not result.is_error, "detail": text}
