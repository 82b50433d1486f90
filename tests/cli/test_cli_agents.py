"""`wakeful run` with agents defined: a real model configuration (an OpenAI-compatible server on
loopback), an agent from an AGENT.md folder and one from a [[agents]] table, and a sync
delegation through them, end to end in a subprocess."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from models.wire_servers import Reply, WireServer, serve_wire, text_reply, tool_call_reply
from wakeful.config import load_config
from wakeful.errors import ConfigError
from wakeful.store.sqlite import Store

AGENT_MD = """---
description: Finds one fact and cites its source.
tools: []
output_schema: {type: object, required: [answer], properties: {answer: {type: string}}}
---
You are a careful researcher. Answer with one fact.
"""

CONFIG = """[model]
provider = "openai"
name = "test"
base_url = "{url}"
max_retries = 0
timeout_seconds = 5

[[agents]]
name = "summarizer"
description = "Summarises a text in one sentence."
role = "You summarise."

[subagents]
max_depth = 1
"""


def env() -> dict[str, str]:
    dropped = {"OPENAI_API_KEY", "OPENAI_BASE_URL"}
    kept = {k: v for k, v in os.environ.items() if k not in dropped and "proxy" not in k.lower()}
    return kept | {"NO_PROXY": "127.0.0.1,localhost", "OPENAI_API_KEY": "test"}


def choose(body: dict[str, Any]) -> Reply:
    """The parent delegates to the researcher and relays the answer; the researcher returns
    its result."""
    messages = body["messages"]
    system, last = messages[0]["content"], messages[-1]
    if system.startswith("You are a subagent (researcher"):
        if last["role"] == "tool":
            return text_reply("")
        return tool_call_reply("return_result", result={"answer": "Paris"})
    if last["role"] == "user":
        return tool_call_reply("spawn_subagent", agent="researcher", task="Capital of France?")
    if last["role"] == "tool" and last["content"].startswith("Subagent"):
        return tool_call_reply("reply_to_user", text="The researcher says: " + last["content"])
    return text_reply("")


@pytest.mark.anyio
async def test_run_delegates_to_an_agent_defined_in_a_folder(tmp_path: Path) -> None:
    (tmp_path / "agents" / "researcher").mkdir(parents=True)
    (tmp_path / "agents" / "researcher" / "AGENT.md").write_text(AGENT_MD, encoding="utf-8")
    async with serve_wire(WireServer()) as server:
        server.choose = choose
        config = tmp_path / "wakeful.toml"
        config.write_text(CONFIG.format(url=f"{server.url}/v1"), encoding="utf-8")
        command = [sys.executable, "-m", "wakeful", "run", "--config", str(config)]
        with anyio.fail_after(60):
            finished = await anyio.run_process(
                command, input=b"ask the researcher\n", cwd=tmp_path, env=env(), check=False
            )
        requests = server.requests

    stdout, stderr = finished.stdout.decode(), finished.stderr.decode()
    assert finished.returncode == 0, stderr
    assert "The researcher says: Subagent sub_" in stdout
    assert '(researcher) returned: {"answer": "Paris"}' in stdout
    parent_tools = [t["function"]["name"] for t in requests[0].body["tools"]]
    assert {"spawn_subagent", "list_subagents", "cancel_subagent"} <= set(parent_tools)
    child = next(
        r for r in requests if r.body["messages"][0]["content"].startswith("You are a subagent")
    )
    child_tools = {t["function"]["name"] for t in child.body["tools"]}
    # tools: [] and max_depth = 1: only the child's own tools.
    assert child_tools == {"return_result", "ask_parent", "send_progress"}
    with Store.read_only(tmp_path / ".wakeful" / "wakeful.db") as reader:
        rows = reader.rows("SELECT agent, status, result, delivered FROM subagents")
    assert [tuple(r) for r in rows] == [("researcher", "done", json.dumps({"answer": "Paris"}), 1)]


def test_bad_agent_definitions_name_the_file_and_the_field(tmp_path: Path) -> None:
    folder = tmp_path / "agents" / "Bad Name"
    folder.mkdir(parents=True)
    (folder / "AGENT.md").write_text("---\ndescription: x\n---\nrole", encoding="utf-8")
    config = tmp_path / "wakeful.toml"
    config.write_text("", encoding="utf-8")
    with pytest.raises(
        ConfigError,
        match=r"agents/Bad Name/AGENT.md: name: Value error, 'Bad Name' is not an agent name",
    ):
        load_config(config).agent_definitions()

    (folder / "AGENT.md").unlink()
    folder.rmdir()
    config.write_text(
        '[[agents]]\nname = "twin"\ndescription = "a"\nrole = "b"\n'
        '[[agents]]\nname = "twin"\ndescription = "c"\nrole = "d"\n'
        '[[agents]]\nname = "typed"\ndescription = "e"\nrole = "f"\n'
        'output_schema = {type = "objekt"}\n',
        encoding="utf-8",
    )
    with pytest.raises(ConfigError, match="output_schema is not a valid JSON schema"):
        load_config(config).agent_definitions()
    config.write_text(
        '[[agents]]\nname = "twin"\ndescription = "a"\nrole = "b"\n'
        '[[agents]]\nname = "twin"\ndescription = "c"\nrole = "d"\n',
        encoding="utf-8",
    )
    with pytest.raises(ConfigError, match="Two agents are named 'twin'"):
        load_config(config).agent_definitions()


HUMAN_CONFIG = """[model]
provider = "openai"
name = "test"
base_url = "{url}"
max_retries = 0
timeout_seconds = 5

[tools.collaboration]
max_timeout_seconds = 60
"""


def ask_then_relay(body: dict[str, Any]) -> Reply:
    """The agent asks an approver without waiting, says so, and acts on the answer when it
    arrives as a separate event."""
    last = body["messages"][-1]
    content = last.get("content") or ""
    if last["role"] == "user" and "HUMAN_ANSWER" in content:
        return tool_call_reply("reply_to_user", text="Approver's decision: " + content)
    if last["role"] == "user":
        return tool_call_reply(
            "request_human_approval",
            question="Send the invoice of 4,200 EUR to ACME now?",
            timeout_seconds=1,
            priority="normal",
        )
    if last["role"] == "tool" and '"status": "waiting"' in content:
        return tool_call_reply("reply_to_user", text="I asked the approver; waiting.")
    return text_reply("")


@pytest.mark.anyio
async def test_run_asks_a_person_and_the_default_arrives_as_an_event(tmp_path: Path) -> None:
    async with serve_wire(WireServer()) as server:
        server.choose = ask_then_relay
        config = tmp_path / "wakeful.toml"
        config.write_text(HUMAN_CONFIG.format(url=f"{server.url}/v1"), encoding="utf-8")
        command = [sys.executable, "-m", "wakeful", "run", "--config", str(config)]
        with anyio.fail_after(60):
            finished = await anyio.run_process(
                command, input=b"send the ACME invoice\n", cwd=tmp_path, env=env(), check=False
            )
        requests = server.requests

    stdout, stderr = finished.stdout.decode(), finished.stderr.decode()
    assert finished.returncode == 0, stderr
    # The question reached the person (the console), the agent went on, and nobody answering
    # within the second applied the conservative default, which reached the agent as an event.
    assert "Send the invoice of 4,200 EUR to ACME now?" in stdout
    assert "I asked the approver; waiting." in stdout
    decision = stdout[stdout.index("Approver's decision:") :]
    assert "no answer" in decision.lower() and "deny" in decision.lower()
    assert any(
        "request_human_approval" in {t["function"]["name"] for t in r.body.get("tools", [])}
        for r in requests
    )
    with Store.read_only(tmp_path / ".wakeful" / "wakeful.db") as reader:
        rows = reader.rows("SELECT status, delivered FROM human_requests")
    assert [tuple(r) for r in rows] == [("timed_out", 1)]
