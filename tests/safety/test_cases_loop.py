"""The learning loop in a running runtime: the gate's "ask" goes to a person, the decision is kept
as a case in a real store, the next similar request shows it to the person, and the agent reads
the case ids in its tool results ("as decided in case 1")."""

from __future__ import annotations

import inspect
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
from wakeful.safety.approvals import Approvals
from wakeful.safety.cases import CaseBook, last_user_request
from wakeful.safety.commands import CommandPolicy, PolicySettings
from wakeful.safety.gate import CallGate
from wakeful.safety.sidecar import RuleSidecar, SidecarSettings
from wakeful.services import Outbox
from wakeful.store.sqlite import Store
from wakeful.tools.spec import tool

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(
        "cases" not in inspect.signature(Approvals.__init__).parameters,
        reason="Approvals takes no case book yet (the approvals/gate wiring of issue 16 item 6 "
        "is pending; see the report of the learning-loop work)",
    ),
]

RAN: list[str] = []


@tool
async def pretend_shell(
    command: Annotated[str, Field(description="A command, e.g. 'ls'")],
) -> str:
    """Records the command instead of running it."""
    RAN.append(command)
    return f"ran {command}"


async def question_id(outbox: Outbox, seen: int) -> tuple[str, str]:
    """The id and text of the next approval question after the first `seen` messages."""
    with anyio.fail_after(5):
        while True:
            for sent in outbox.sent[seen:]:
                found = re.search(r"Approval needed \[([0-9a-f]+)\]", sent["text"])
                if found:
                    return found.group(1), str(sent["text"])
            await anyio.sleep(0.01)


async def test_a_decision_is_kept_shown_next_time_and_cited_by_id(tmp_path: Path) -> None:
    RAN.clear()
    async with await Store.open(tmp_path / "cases.db") as store:
        outbox = Outbox()
        rt: Runtime | None = None

        def context_of(session: str) -> str:  # what a runtime gives its case book
            assert rt is not None
            return last_user_request(rt.sessions[session].trajectory.messages)

        book = CaseBook(store.cases, context_of=context_of)
        settings = SidecarSettings(shell_tools={"pretend_shell": "command"})
        gate = CallGate(
            sidecar=RuleSidecar(settings, CommandPolicy(PolicySettings(workspace=tmp_path))),
            approvals=Approvals(outbox, cases=book),
        )
        model = ScriptedModel(
            [
                use(tool_call("pretend_shell", command="rm -rf src")),
                say("done"),
                use(tool_call("pretend_shell", command="rm -rf src/generated")),
                say("ok"),
            ]
        )
        rt = Runtime(
            model=model,
            tools=[pretend_shell],
            with_core_tools=False,
            with_timers=False,
            workdir=tmp_path,
            gate=gate,
            outbox=outbox,
        )
        async with rt:
            await rt.submit(user_input("remove the src directory"))
            first_id, first_question = await question_id(outbox, 0)
            assert "Similar earlier decisions" not in first_question  # nothing to learn from yet
            await rt.submit(user_input(f"/approve {first_id} build output only"))
            await rt.wait_idle()
            seen = len(outbox.sent)

            await rt.submit(user_input("clear the generated src files"))
            second_id, second_question = await question_id(outbox, seen)
            # The person sees how they decided the similar request, with its id and reason.
            assert "Similar earlier decisions:\n- [PAST_DECISION case 1] approved" in (
                second_question
            )
            assert 'the person\'s reason: "build output only"' in second_question
            await rt.submit(user_input(f"/deny {second_id} not today"))
            await rt.wait_idle()
            results = [
                m for m in rt.sessions["main"].trajectory.messages if isinstance(m, ToolMessage)
            ]
        assert RAN == ["rm -rf src"]
        approved, denied = results
        # The agent reads the case id of each decision, and the similar earlier one.
        assert approved.content.startswith("ran rm -rf src\n\nApproved by the user")
        assert 'recorded as case 1; cite it as "as decided in case 1"' in approved.content
        assert denied.status == "error"
        assert 'recorded as case 2; cite it as "as decided in case 2"' in denied.content
        assert "[PAST_DECISION case 1] approved" in denied.content
        first, second = await store.cases.all()
    assert (first.decision, first.reason, first.request_id) == (
        "approved",
        "build output only",
        first_id,
    )
    assert first.tool == "pretend_shell" and first.request == "`rm -rf src`"
    assert first.context == "remove the src directory"
    assert (second.decision, second.reason, second.context) == (
        "denied",
        "not today",
        "clear the generated src files",
    )


async def test_a_request_nobody_answers_is_kept_as_a_timed_out_case(tmp_path: Path) -> None:
    RAN.clear()
    book = CaseBook()
    outbox = Outbox()
    settings = SidecarSettings(shell_tools={"pretend_shell": "command"})
    gate = CallGate(
        sidecar=RuleSidecar(settings, CommandPolicy(PolicySettings(workspace=tmp_path))),
        approvals=Approvals(outbox, cases=book, timeout_seconds=0.2),
    )
    model = ScriptedModel([use(tool_call("pretend_shell", command="rm -rf src")), say("ok")])
    async with Runtime(
        model=model,
        tools=[pretend_shell],
        with_core_tools=False,
        with_timers=False,
        workdir=tmp_path,
        gate=gate,
        outbox=outbox,
    ) as rt:
        await rt.submit(user_input("remove the src directory"))
        with anyio.fail_after(5):
            await rt.wait_idle()
        [result] = [
            m for m in rt.sessions["main"].trajectory.messages if isinstance(m, ToolMessage)
        ]
    assert RAN == []
    assert "Recorded as case 1 (no one decided: the default was applied after the timeout)." in (
        result.content
    )
    [case] = await book.repository.all()
    assert case.timed_out and case.decision == "denied"
    assert re.fullmatch(r"no answer in 0\.2\d* s; applied the default: deny", case.reason)
