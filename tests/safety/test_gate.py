"""The safety layers around every call, in a running runtime: sidecar, person, breaker, reviewer,
verification. The model is scripted; the tools, the runtime and the approvals are real."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import FrozenInstanceError, replace
from pathlib import Path
from typing import Annotated, Any

import anyio
import pytest
from pydantic import Field

from tool_services import tool_services
from wakeful.agent.router import Classifier, Router
from wakeful.errors import ToolError
from wakeful.events import user_input
from wakeful.messages import Message, ToolMessage, UserMessage
from wakeful.models import FunctionModel, ScriptedModel, Turn, call, say, use
from wakeful.models.base import Model, ToolDefinition
from wakeful.runtime import Runtime
from wakeful.safety.approvals import Approvals
from wakeful.safety.breaker import DenialBreaker
from wakeful.safety.commands import CommandPolicy, PolicySettings
from wakeful.safety.gate import CallGate
from wakeful.safety.reviewer import Reviewer
from wakeful.safety.sidecar import ModelSidecar, RuleSidecar, SidecarSettings
from wakeful.safety.verification import VerifyRule
from wakeful.services import Outbox
from wakeful.store.sqlite import Store
from wakeful.tools.spec import ToolAnnotations, ToolContext, ToolResult, tool

pytestmark = pytest.mark.anyio

RAN: list[str] = []


@tool
async def pretend_shell(
    ctx: ToolContext,
    command: Annotated[str, Field(description="A command, e.g. 'ls'")],
) -> str:
    """Records the command instead of running it (so a test can never run `rm -rf /`)."""
    RAN.append(command)
    return f"ran {command} (approved={ctx.approved})"


@tool
async def transfer_money(
    to: Annotated[str, Field(description="Recipient, e.g. 'bob'")],
    amount: Annotated[int, Field(description="Amount, e.g. 10")],
) -> str:
    """Moves money; cannot be undone."""
    RAN.append(f"transfer {amount} to {to}")
    return "transferred"


@tool
async def save_note(
    ctx: ToolContext,
    path: Annotated[str, Field(description="File, e.g. 'a.txt'")],
    content: Annotated[str, Field(description="Text, e.g. 'hi'")],
) -> str:
    """Writes a note under the workdir."""
    assert ctx.services.workdir is not None
    (ctx.services.workdir / path).write_text(content)
    return f"saved {path}"


@pytest.fixture(autouse=True)
def _clear_ran() -> None:
    RAN.clear()


def gate(workdir: Path, **kwargs: Any) -> CallGate:
    settings = SidecarSettings(shell_tools={"pretend_shell": "command"})
    sidecar = RuleSidecar(settings, CommandPolicy(PolicySettings(workspace=workdir)))
    return CallGate(sidecar=sidecar, **kwargs)


def runtime(model: Model, workdir: Path, the_gate: CallGate, **kwargs: Any) -> Runtime:
    return Runtime(
        model=model,
        tools=[pretend_shell, transfer_money, save_note],
        with_core_tools=False,
        with_timers=False,
        workdir=workdir,
        gate=the_gate,
        **kwargs,
    )


def tool_results(rt: Runtime) -> list[ToolMessage]:
    return [m for m in rt.sessions["main"].trajectory.messages if isinstance(m, ToolMessage)]


async def wait_for_question(rt: Runtime) -> str:
    """The id of the approval question once it reaches the user."""
    with anyio.fail_after(5):
        while True:
            for sent in rt.outbox.sent:
                found = re.search(r"Approval needed \[([0-9a-f]+)\]", sent["text"])
                if found:
                    return found.group(1)
            await anyio.sleep(0.01)


async def test_a_denied_call_never_runs_and_the_agent_reads_why(tmp_path: Path) -> None:
    model = ScriptedModel([use(call("pretend_shell", command="rm -rf /")), say("ok")])
    async with runtime(model, tmp_path, gate(tmp_path)) as rt:
        await rt.submit(user_input("clean up"))
        await rt.wait_idle()
        (result,) = tool_results(rt)
    assert RAN == []
    assert result.status == "error"
    assert "The safety checks refused this call; pretend_shell was not run." in result.content
    assert "Do not repeat the same call" in result.content


async def test_an_ask_waits_for_the_users_approval_then_runs(tmp_path: Path) -> None:
    model = ScriptedModel([use(call("pretend_shell", command="rm -rf src")), say("done")])
    async with runtime(model, tmp_path, gate(tmp_path)) as rt:
        await rt.submit(user_input("remove the build directory"))
        question_id = await wait_for_question(rt)
        assert RAN == []  # nothing runs before the answer
        decision = await rt.submit(user_input(f"/approve {question_id}"))
        assert not decision.wake
        await rt.wait_idle()
        (result,) = tool_results(rt)
        texts = [
            m.content for m in rt.sessions["main"].trajectory.messages if isinstance(m, UserMessage)
        ]
    assert RAN == ["rm -rf src"]
    assert result.content == (
        "ran rm -rf src (approved=True)\n\nApproved by the user. This decision is recorded as "
        'case 1; cite it as "as decided in case 1".'
    )
    assert not any(f"/approve {question_id}" in t for t in texts)  # the answer is not a new message


async def test_a_declined_call_returns_the_users_reason(tmp_path: Path) -> None:
    model = ScriptedModel([use(call("pretend_shell", command="rm -rf src")), say("fine")])
    async with runtime(model, tmp_path, gate(tmp_path)) as rt:
        await rt.submit(user_input("remove the build directory"))
        question_id = await wait_for_question(rt)
        await rt.submit(user_input(f"/deny {question_id} I still need it"))
        await rt.wait_idle()
        (result,) = tool_results(rt)
    assert RAN == []
    assert "The user did not approve this call" in result.content
    assert "I still need it" in result.content


async def test_nobody_answering_in_time_is_a_no(tmp_path: Path) -> None:
    model = ScriptedModel([use(call("pretend_shell", command="rm -rf src")), say("ok")])
    the_gate = gate(tmp_path)
    async with runtime(model, tmp_path, the_gate) as rt:
        assert rt.approvals is not None
        rt.approvals.timeout_seconds = 0.1
        await rt.submit(user_input("remove it"))
        await rt.wait_idle()
        (result,) = tool_results(rt)
    assert RAN == []
    assert "Nobody answered the approval request" in result.content


async def test_repeated_denials_trip_the_breaker_and_a_person_decides(tmp_path: Path) -> None:
    turns = [use(call("pretend_shell", call_id=f"c{i}", command="rm -rf /")) for i in range(4)]
    model = ScriptedModel([*turns, say("giving up")])
    the_gate = gate(tmp_path, breaker=DenialBreaker(threshold=3))
    async with runtime(model, tmp_path, the_gate) as rt:
        await rt.submit(user_input("wipe it"))
        question_id = await wait_for_question(rt)
        results = tool_results(rt)
        assert len(results) == 3 and all("refused" in r.content for r in results)
        await rt.submit(user_input(f"/deny {question_id} never"))
        await rt.wait_idle()
        fourth = tool_results(rt)[3]
    assert RAN == []
    assert "refused 4 calls in a row" in rt.outbox.sent[0]["text"]
    assert "never" in fourth.content


async def test_the_reviewer_rejects_with_its_reason_as_a_tool_error(tmp_path: Path) -> None:
    reviewer_model = ScriptedModel(
        [say('{"decision": "reject", "reason": "the user asked for 10, not 10000"}')]
    )
    reviewer = Reviewer(reviewer_model, tools=["transfer_*"], rules="Only do what the user asks.")
    model = ScriptedModel([use(call("transfer_money", to="bob", amount=10000)), say("sorry")])
    async with runtime(model, tmp_path, gate(tmp_path, reviewer=reviewer)) as rt:
        await rt.submit(user_input("send bob 10"))
        await rt.wait_idle()
        (result,) = tool_results(rt)
    assert RAN == []
    assert "The reviewer rejected this call" in result.content
    assert "the user asked for 10, not 10000" in result.content
    (review,) = reviewer_model.requests
    assert "Only do what the user asks." in review.messages[0].content
    assert "send bob 10" in review.messages[1].content  # it saw what the proposer saw
    assert '"amount": 10000' in review.messages[1].content


async def test_an_approving_reviewer_lets_it_run_and_an_unsure_one_asks_a_person(
    tmp_path: Path,
) -> None:
    reviewer_model = ScriptedModel(
        [
            say('{"decision": "approve", "reason": "as asked"}'),
            say('{"decision": "unsure", "reason": "amount unclear"}'),
        ]
    )
    reviewer = Reviewer(reviewer_model, tools=["transfer_money"])
    model = ScriptedModel(
        [
            use(call("transfer_money", to="bob", amount=10)),
            use(call("transfer_money", to="eve", amount=99)),
            say("done"),
        ]
    )
    async with runtime(model, tmp_path, gate(tmp_path, reviewer=reviewer)) as rt:
        await rt.submit(user_input("pay bob 10 and eve something"))
        question_id = await wait_for_question(rt)
        assert RAN == ["transfer 10 to bob"]
        assert "Reviewer unsure: amount unclear" in rt.outbox.sent[0]["text"]
        await rt.submit(user_input(f"/approve {question_id}"))
        await rt.wait_idle()
    assert RAN == ["transfer 10 to bob", "transfer 99 to eve"]


async def test_the_sidecar_model_starts_while_the_agent_model_still_streams(
    tmp_path: Path,
) -> None:
    phases: list[str] = []
    holder: dict[str, Runtime] = {}

    async def judge(messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> str:
        phases.append(holder["rt"].sessions["main"].phase)
        return '{"decision": "allow", "reason": "routine"}'

    the_gate = gate(tmp_path, model_sidecar=ModelSidecar(FunctionModel(judge)))
    the_gate.sidecar.settings.ask_tools.append("transfer_money")
    model = ScriptedModel(
        [
            Turn(tool_calls=[call("transfer_money", to="bob", amount=1)], after_calls_delay=0.2),
            say("ok"),
        ]
    )
    async with runtime(model, tmp_path, the_gate) as rt:
        holder["rt"] = rt
        await rt.submit(user_input("pay bob 1"))
        await rt.wait_idle()
    assert phases == ["model"]  # judged before the turn ended
    assert RAN == ["transfer 1 to bob"]


async def test_verification_hooks_add_their_findings_to_the_result(tmp_path: Path) -> None:
    rules = [
        VerifyRule(tool="save_note", reread=True),
        VerifyRule(tool="save_note", when_path="*.json", command="python3 -m json.tool {path}"),
    ]
    model = ScriptedModel(
        [
            use(call("save_note", path="a.json", content='{"ok": true}')),
            use(call("save_note", path="b.json", content="{broken")),
            use(call("save_note", path="c.txt", content="plain")),
            say("done"),
        ]
    )
    async with runtime(model, tmp_path, gate(tmp_path, verify_rules=rules)) as rt:
        await rt.submit(user_input("write notes"))
        await rt.wait_idle()
        good, bad, plain = tool_results(rt)
    assert "Verification:" in good.content
    assert "[ok] re-read a.json" in good.content
    assert "[ok] `python3 -m json.tool a.json`" in good.content
    assert "[FAILED] `python3 -m json.tool b.json`" in bad.content
    assert "Expecting property name" in bad.content
    assert "json.tool" not in plain.content  # when_path did not match
    assert "[ok] re-read c.txt" in plain.content


async def test_without_anyone_to_ask_an_ask_is_refused(tmp_path: Path) -> None:
    the_gate = gate(tmp_path)  # no approvals: as in an MCP server with no person behind it
    proposed = call("pretend_shell", command="rm -rf src")
    async with tool_services(tmp_path) as (services, _events):
        ctx = ToolContext("main", proposed.id, proposed.name, services)

        async def execute(ctx: ToolContext) -> ToolResult:
            return await pretend_shell.run({"command": "rm -rf src"}, ctx)

        result = await the_gate.run(pretend_shell, proposed, ctx, execute)
    assert RAN == []
    assert result.is_error
    assert "there is no one to ask here" in result.content


async def test_approvals_understand_plain_answers_only_when_one_question_is_open() -> None:
    from wakeful.services import Outbox

    approvals = Approvals(Outbox(), timeout_seconds=5)
    verdicts: list[Any] = []

    async def ask(name: str) -> None:
        verdicts.append(await approvals.ask("main", name, "", ("why",)))

    async with anyio.create_task_group() as tg:
        tg.start_soon(ask, "one")
        tg.start_soon(ask, "two")
        await anyio.wait_all_tasks_blocked()
        assert len(approvals.pending("main")) == 2
        assert not approvals.answer_from_text("main", "yes")  # which one? not guessed
        first, _ = approvals.pending("main")
        assert not approvals.answer_from_text("other-session", f"/approve {first.id}")
        assert approvals.answer_from_text("main", f"/deny {first.id} not now")
        await anyio.wait_all_tasks_blocked()
        assert len(approvals.pending("main")) == 1
        assert approvals.answer_from_text("main", "同意")
    assert sorted(v.decision for v in verdicts) == ["allow", "deny"]
    assert not approvals.answer_from_text("main", "yes")  # nothing open any more


@tool
async def flaky() -> str:
    """Always fails, as a service that is down would."""
    raise ToolError("the service is down")


async def test_the_runtime_audits_every_call_and_alerts_the_operator_once(tmp_path: Path) -> None:
    turns = [use(call("flaky", call_id=f"f{i}")) for i in range(4)]
    model = ScriptedModel([*turns, use(call("pretend_shell", command="rm -rf /")), say("ok")])
    store_path = tmp_path / "w.db"
    rt = Runtime(
        model=model,
        tools=[flaky, pretend_shell],
        with_core_tools=False,
        with_timers=False,
        workdir=tmp_path,
        gate=gate(tmp_path),
        store_path=store_path,
    )
    async with rt:
        await rt.submit(user_input("try it"))
        await rt.wait_idle()
    alerts = [m for m in rt.outbox.sent if m["channel"] == "operator"]
    assert len(alerts) == 1
    assert "The tool flaky failed 3 times" in alerts[0]["text"]
    assert rt.sessions.keys() == {"main"}  # the alert woke no agent
    reader = Store.read_only(store_path)
    try:
        rows = reader.audit_rows()
    finally:
        reader.close()
    assert [(r.tool, r.status) for r in rows] == [
        *[("flaky", "error")] * 4,
        ("pretend_shell", "denied"),
    ]
    assert rows[0].data["decisions"] == [{"layer": "sidecar", "decision": "allow", "reasons": []}]
    assert rows[4].data["decisions"][0]["decision"] == "deny"
    assert "the service is down" in rows[0].data["error"]


@tool(annotations=ToolAnnotations(read_only=True))
async def weather_now(city: Annotated[str, Field(description="City, e.g. 'Paris'")]) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


@tool
async def slow_step(seconds: Annotated[float, Field(description="Seconds, e.g. 0.3")]) -> str:
    """Waits a while, as a long main task would."""
    await anyio.sleep(seconds)
    return "done"


async def test_a_side_querys_calls_pass_the_gate_and_are_audited(tmp_path: Path) -> None:
    def route(messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> str:
        return "parallel" if "weather" in messages[-1].content else "queue"

    def side(messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> Turn | str:
        if isinstance(messages[-1], ToolMessage):
            return say(f"It is {messages[-1].content}.")
        return use(call("weather_now", city="Paris"))

    main = ScriptedModel([use(call("slow_step", seconds=0.4)), say("")])
    store_path = tmp_path / "w.db"
    rt = Runtime(
        model=main,
        tools=[weather_now, slow_step],
        with_core_tools=False,
        with_timers=False,
        workdir=tmp_path,
        gate=gate(tmp_path),
        store_path=store_path,
        router=Router(classifier=Classifier(FunctionModel(route), timeout=1)),
        parallel_model=FunctionModel(side),
    )
    async with rt:
        await rt.submit(user_input("do the long thing"))
        with anyio.fail_after(5):
            while rt.sessions["main"].phase != "tools":  # noqa: ASYNC110 - polling a phase
                await anyio.sleep(0.01)
        decision = await rt.submit(user_input("what's the weather in Paris?"))
        await rt.wait_idle()
    assert decision.strategy == "parallel"
    reader = Store.read_only(store_path)
    try:
        audited = [(r.tool, r.status) for r in reader.audit_rows()]
    finally:
        reader.close()
    assert ("weather_now", "ok") in audited
    assert ("slow_step", "ok") in audited


async def test_one_gate_serves_two_runtimes_one_after_the_other(tmp_path: Path) -> None:
    # The runtime used to fill in the gate it was given (audit log, approvals), so a second
    # runtime with the same gate audited into the first one's closed store and every call failed.
    shared = gate(tmp_path)
    for run in ("first", "second"):
        model = ScriptedModel([use(call("save_note", path=f"{run}.txt", content=run)), say("")])
        async with runtime(model, tmp_path, shared, store_path=tmp_path / f"{run}.db") as rt:
            await rt.submit(user_input("save it"))
            await rt.wait_idle()
            (result,) = tool_results(rt)
            assert result.status == "ok", result.content
        assert (tmp_path / f"{run}.txt").read_text() == run
    assert shared.audit is None and shared.approvals is None  # never filled in
    for run in ("first", "second"):
        reader = Store.read_only(tmp_path / f"{run}.db")
        try:
            assert [row.tool for row in reader.audit_rows()] == ["save_note"]
        finally:
            reader.close()


async def test_one_gate_serves_two_runtimes_at_the_same_time(tmp_path: Path) -> None:
    shared = gate(tmp_path)
    model = ScriptedModel([use(call("save_note", path="a.txt", content="a")), say("")])
    other = ScriptedModel([use(call("save_note", path="b.txt", content="b")), say("")])
    first = runtime(model, tmp_path, shared, store_path=tmp_path / "a.db")
    second = runtime(other, tmp_path, shared, store_path=tmp_path / "b.db")
    async with first, second:
        await first.submit(user_input("save a"))
        await second.submit(user_input("save b"))
        await first.wait_idle()
        await second.wait_idle()
        assert first.gate is not shared and second.gate is not shared
        assert first.approvals is not second.approvals
        for rt in (first, second):
            (result,) = tool_results(rt)
            assert result.status == "ok", result.content
    for name in ("a.db", "b.db"):  # each runtime audited into its own store
        reader = Store.read_only(tmp_path / name)
        try:
            assert [row.tool for row in reader.audit_rows()] == ["save_note"]
        finally:
            reader.close()


def test_a_gate_cannot_be_changed_once_made(tmp_path: Path) -> None:
    # What a runtime or an MCP connection adds (approvals, audit log, asker) goes into a copy.
    the_gate = gate(tmp_path)
    with pytest.raises(FrozenInstanceError):
        the_gate.approvals = Approvals(Outbox())  # type: ignore[misc]
    with pytest.raises(FrozenInstanceError):
        the_gate.audit = None  # type: ignore[misc]
    bound = replace(the_gate, approvals=Approvals(Outbox()))
    assert bound.approvals is not None and the_gate.approvals is None
    assert bound.sidecar is the_gate.sidecar
