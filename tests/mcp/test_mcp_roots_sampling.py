"""What an MCP server may ask of this client during a call: its roots, and a run of its model
(sampling, with the operator's consent and within a budget). Against a real stdio server, on the
2026-07-28 protocol (input-required results) and the older one (server-to-client requests)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from loopback_http import serving
from mcp_servers.asks_client import SYSTEM_PROMPT, build_server
from tool_services import tool_services
from wakeful.mcp.client import MCPToolset
from wakeful.mcp.config import MCPServerConfig
from wakeful.messages import SystemMessage, UserMessage
from wakeful.models import ScriptedModel
from wakeful.models.base import Model
from wakeful.tools.spec import ToolContext, ToolResult

SERVER = Path(__file__).parent.parent / "mcp_servers" / "asks_client.py"

pytestmark = pytest.mark.anyio
protocols = pytest.mark.parametrize("protocol", ["2026", "legacy"])


def config(protocol: str, **options: Any) -> MCPServerConfig:
    legacy = ["--legacy"] if protocol == "legacy" else []
    return MCPServerConfig(name="asks", command=[sys.executable, str(SERVER), *legacy], **options)


async def call_each(toolset: MCPToolset, *calls: tuple[str, dict[str, Any]]) -> list[ToolResult]:
    tools = {t.name: t for t in toolset.tools()}
    results = []
    async with tool_services() as (services, _):
        for name, arguments in calls:
            ctx = ToolContext("main", "call_1", name, services)
            results.append(await tools[name].run(arguments, ctx))
    return results


async def run_calls(
    cfg: MCPServerConfig,
    *calls: tuple[str, dict[str, Any]],
    model: Model | None = None,
    workdir: Path | None = None,
) -> tuple[list[ToolResult], MCPToolset]:
    async with MCPToolset([cfg], model=model, workdir=workdir) as toolset:
        assert toolset.server("asks").state == "ready"
        return await call_each(toolset, *calls), toolset


@protocols
async def test_the_workspace_is_the_servers_root(protocol: str, tmp_path: Path) -> None:
    [where, declared], _ = await run_calls(
        config(protocol), ("where", {}), ("client_capabilities", {}), workdir=tmp_path
    )
    assert (where.content, where.is_error) == (tmp_path.as_uri(), False)
    assert declared.content == "roots"  # and not sampling: no server samples unless allowed


@protocols
async def test_configured_roots_replace_the_workspace(protocol: str, tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    cfg = config(protocol, roots=[tmp_path / "a", tmp_path / "b"])
    [where], _ = await run_calls(cfg, ("where", {}), workdir=tmp_path)
    assert where.content == f"{(tmp_path / 'a').as_uri()} {(tmp_path / 'b').as_uri()}"


async def test_a_remote_server_is_not_told_the_workdir(tmp_path: Path) -> None:
    async with serving(build_server().streamable_http_app(), lifespan="on") as port:
        remote = MCPServerConfig(name="asks", url=f"http://127.0.0.1:{port}/mcp")
        [declared], _ = await run_calls(remote, ("client_capabilities", {}), workdir=tmp_path)
    assert declared.content == "none"


def test_a_root_that_is_not_a_directory_is_explained(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="is not an existing directory"):
        config("2026", roots=[tmp_path / "missing"])


@protocols
async def test_without_workdir_or_roots_no_roots_are_declared(protocol: str) -> None:
    [where, declared], _ = await run_calls(
        config(protocol), ("where", {}), ("client_capabilities", {})
    )
    assert where.is_error
    assert declared.content == "none"


@protocols
async def test_sampling_needs_the_operators_consent(protocol: str) -> None:
    model = ScriptedModel(["never asked"])
    [summary, declared], _ = await run_calls(
        config(protocol), ("summarize", {"text": "x"}), ("client_capabilities", {}), model=model
    )
    assert summary.is_error
    assert declared.content == "none"
    assert model.requests == []


async def test_a_server_that_samples_without_consent_is_refused_by_the_client() -> None:
    model = ScriptedModel(["never sent"])
    [answer], _ = await run_calls(config("2026"), ("sample_anyway", {}), model=model)
    assert answer.is_error
    assert "may not use the runtime's model" in answer.content
    assert "allow_sampling = true" in answer.content
    assert model.requests == []


@protocols
async def test_an_allowed_server_samples_the_runtime_model(protocol: str) -> None:
    model = ScriptedModel(["A short summary of it."])
    cfg = config(protocol, allow_sampling=True)
    [declared, summary], toolset = await run_calls(
        cfg, ("client_capabilities", {}), ("summarize", {"text": "a long text"}), model=model
    )
    assert declared.content == "sampling"
    assert (summary.content, summary.is_error) == ("A short summary of it.", False)
    [request] = model.requests
    assert list(request.messages) == [
        SystemMessage(content=SYSTEM_PROMPT),
        UserMessage(content="Summarize: a long text"),
    ]
    assert request.tools == ()  # a third party's prompt cannot make the model call tools
    assert request.max_tokens == 64
    [record] = toolset.sampling_records()
    assert (record.server, record.outcome, record.max_tokens) == ("asks", "answered", 64)
    assert record.tokens > 0 and record.answer_chars == len("A short summary of it.")
    # The 2026-07-28 protocol says which call asked; on the older one it is the call in flight.
    assert (record.tool, record.session) == ("summarize", "main")


@protocols
async def test_sampling_stops_when_the_budget_is_spent(protocol: str) -> None:
    model = ScriptedModel(["first answer", "never sent"])
    cfg = config(protocol, allow_sampling=True, sampling_max_tokens_total=2)
    [first, second], toolset = await run_calls(
        cfg, ("summarize", {"text": "one"}), ("summarize", {"text": "two"}), model=model
    )
    assert first.content == "first answer"
    assert second.is_error
    assert "sampling budget of 2 tokens" in second.content
    assert "sampling_max_tokens_total" in second.content
    assert len(model.requests) == 1
    assert [r.outcome for r in toolset.sampling_records()] == ["answered", "refused"]


@protocols
async def test_image_content_is_refused(protocol: str) -> None:
    model = ScriptedModel(["never sent"])
    cfg = config(protocol, allow_sampling=True)
    [answer], toolset = await run_calls(cfg, ("describe_image", {}), model=model)
    assert answer.is_error
    assert "image content" in answer.content and "text only" in answer.content
    assert model.requests == []
    [record] = toolset.sampling_records()
    assert record.outcome == "refused"


@protocols
async def test_each_sampling_request_is_audited_and_the_operator_told_once(
    protocol: str, tmp_path: Path
) -> None:
    import io
    import json
    from collections.abc import Sequence

    from wakeful.events import user_input
    from wakeful.messages import Message, ToolMessage
    from wakeful.models import FunctionModel, Turn, call, say, use
    from wakeful.models.base import ToolDefinition
    from wakeful.runtime import Runtime
    from wakeful.safety.audit import export_jsonl

    def turn(messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> Turn | str:
        if not tools:
            return "a summary"  # a server's sampling request
        if not any(isinstance(m, ToolMessage) for m in messages):
            return use(call("summarize", text="one"), call("summarize", text="two"))
        return say("done")

    model = FunctionModel(turn)
    cfg = config(protocol, allow_sampling=True, sampling_max_tokens_total=2)
    store = tmp_path / "wakeful.db"
    async with Runtime(model=model, with_timers=False, mcp_servers=[cfg], store_path=store) as rt:
        await rt.submit(user_input("summarize two texts"))
        await rt.wait_idle()
        assert rt.store is not None
        exported = io.StringIO()
        await rt.store.flush()
        await export_jsonl(rt.store, exported, tool="sampling:asks")
        operator = [m["text"] for m in rt.outbox.sent if m["channel"] == "operator"]
    rows = [json.loads(line) for line in exported.getvalue().splitlines()]
    assert [(r["tool"], r["status"], r["session"]) for r in rows] == [
        ("sampling:asks", "ok", "main"),
        ("sampling:asks", "denied", "main"),
    ]
    answered, refused = (r["arguments"] for r in rows)
    assert (answered["server"], answered["tool"], answered["outcome"]) == (
        "asks",
        "summarize",
        "answered",
    )
    assert answered["tokens"] > 0 and answered["max_tokens"] == 64
    assert refused["outcome"] == "refused" and refused["tokens"] == 0
    assert "sampling budget of 2 tokens" in rows[1]["error"]
    assert rows[1]["decisions"][0]["decision"] == "deny"
    [alert] = [t for t in operator if "sampling" in t]
    assert alert.startswith(
        "MCP server 'asks' asked to use the runtime's model (MCP sampling) for the first time "
        "in this run (answered)."
    )
    assert "wakeful audit export --tool sampling:asks" in alert
