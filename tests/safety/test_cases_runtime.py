"""The runtime wiring of the learning loop: a runtime keeps the decisions on the gate's asks and
on the agent's own requests as cases in its store, shows the similar ones in the next question,
and the agent reads the case ids in its results."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

import anyio
import pytest
from pydantic import Field

from wakeful.events import user_input
from wakeful.messages import ToolMessage
from wakeful.models import ScriptedModel, say, use
from wakeful.models import call as tool_call
from wakeful.runtime import Runtime
from wakeful.safety.commands import CommandPolicy, PolicySettings
from wakeful.safety.gate import CallGate
from wakeful.safety.sidecar import RuleSidecar, SidecarSettings
from wakeful.store.cases import read_cases
from wakeful.store.sqlite import Store
from wakeful.toolkits.collaboration.human import HUMAN_TOOLS
from wakeful.tools.spec import tool

pytestmark = pytest.mark.anyio


@tool
async def pretend_shell(command: Annotated[str, Field(description="e.g. 'ls'")]) -> str:
    """Records nothing."""
    return f"ran {command}"


async def first_id(rt: Runtime, seen: int = 0) -> str:
    with anyio.fail_after(5):
        while True:
            for sent in rt.outbox.sent[seen:]:
                found = re.search(r"\[([0-9a-f]{4,12})\]", sent["text"])
                if found:
                    return found.group(1)
            await anyio.sleep(0.01)


async def test_runtime_keeps_cases(tmp_path: Path) -> None:
    settings = SidecarSettings(shell_tools={"pretend_shell": "command"})
    gate = CallGate(
        sidecar=RuleSidecar(settings, CommandPolicy(PolicySettings(workspace=tmp_path)))
    )
    model = ScriptedModel(
        [
            use(tool_call("pretend_shell", command="rm -rf src")),
            say("done"),
            use(
                tool_call(
                    "request_human_approval", question="Send the Q3 invoice to ACME?", wait=True
                )
            ),
            say("ok"),
            use(
                tool_call(
                    "request_human_approval", question="Send the Q4 invoice to ACME?", wait=True
                )
            ),
            say("ok"),
        ]
    )
    async with Runtime(
        model=model,
        tools=[pretend_shell, *HUMAN_TOOLS],
        with_timers=False,
        workdir=tmp_path,
        gate=gate,
        store_path=tmp_path / "w.db",
    ) as rt:
        assert "## When to ask a person first" in rt.session_config.system_prompt
        await rt.submit(user_input("remove the src directory"))
        await rt.submit(user_input(f"/approve {await first_id(rt)} fine"))
        await rt.wait_idle()
        seen = len(rt.outbox.sent)
        await rt.submit(user_input("send the invoice"))
        await rt.submit(user_input(f"/deny {await first_id(rt, seen)} not yet"))
        await rt.wait_idle()
        seen = len(rt.outbox.sent)
        await rt.submit(user_input("send the next invoice"))
        q4 = await first_id(rt, seen)
        question = rt.outbox.sent[-1]["text"]
        assert "Similar earlier decisions:\n- [PAST_DECISION case 2] denied" in question, question
        await rt.submit(user_input(f"/approve {q4}"))
        await rt.wait_idle()
        results = [m for m in rt.sessions["main"].trajectory.messages if isinstance(m, ToolMessage)]
        assert "recorded as case 1" in results[0].content
        assert "recorded as case 2" in results[1].content
        assert (
            "recorded as case 3" in results[2].content
            and "[PAST_DECISION case 2]" in results[2].content
        )
    with Store.read_only(tmp_path / "w.db") as reader:
        cases = read_cases(reader)
    assert [(c.tool, c.decision, c.reason, c.context) for c in cases] == [
        ("pretend_shell", "approved", "fine", "remove the src directory"),
        ("", "denied", "not yet", "send the invoice"),
        ("", "approved", "", "send the next invoice"),
    ]
