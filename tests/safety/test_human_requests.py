"""One queue of requests to a person: the gate's approvals, third parties' input requests and the
agent's own requests, each with a timeout, a default and a priority; the first answer wins, and
a late answer is recorded, not applied, and told to the person."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from anyio import wait_all_tasks_blocked

from wakeful.mcp.elicitation import ElicitationForm
from wakeful.safety.approvals import Approvals, HumanDecision
from wakeful.safety.verdict import Verdict
from wakeful.services import Outbox

pytestmark = pytest.mark.anyio

DATE_FORM: dict[str, Any] = {
    "type": "object",
    "properties": {"date": {"type": "string", "format": "date"}},
    "required": ["date"],
}


def said(outbox: Outbox) -> list[str]:
    return [entry["text"] for entry in outbox.sent]


async def test_the_agent_s_approval_waits_in_the_gate_s_queue_and_says_how_to_answer() -> None:
    outbox = Outbox()
    approvals = Approvals(outbox)
    decisions: list[HumanDecision] = []
    approvals.decision_listeners.append(decisions.append)
    async with anyio.create_task_group() as tg:
        verdicts: list[Any] = []

        async def gate_asks() -> None:
            verdicts.append(await approvals.ask("main", "run_shell", "rm -rf build", ("Deletes.",)))

        tg.start_soon(gate_asks)
        await wait_all_tasks_blocked()
        mine = await approvals.open_approval(
            "main", "Send the invoice to ACME?", priority="urgent", timeout_seconds=300
        )
        assert outbox.sent[-1]["urgency"] == "urgent"
        assert said(outbox)[-1] == (
            f'Approval requested [{mine.id}] by the agent: "Send the invoice to ACME?"\n'
            "With no answer in 5 min: deny.\n"
            f"Reply /approve {mine.id} (approve), or /deny {mine.id} <why> (deny)."
        )
        # One queue: both are listed, so a bare "yes" is not guessed.
        assert len(approvals.pending("main")) == 2
        assert not approvals.answer_from_text("main", "yes")
        assert approvals.answer_from_text("main", f"/deny {mine.id} the amount is wrong")
        decision = await approvals.decision(mine)
        gate_request = approvals.pending("main")[0]
        assert approvals.answer_from_text("main", "yes")  # now only the gate's is open
    assert decision.text() == (
        f'The approver answered request [{mine.id}] ("Send the invoice to ACME?"): deny. Their '
        'reason: "the amount is wrong".'
    )
    assert verdicts[0].decision == "allow"
    # The learning loop hears of both decisions, the gate's too.
    assert [(d.request_id, d.choice) for d in decisions] == [
        (mine.id, "deny"),
        (gate_request.id, "approve"),
    ]


async def test_no_answer_in_time_applies_the_default_and_says_so() -> None:
    outbox = Outbox()
    approvals = Approvals(outbox)
    request = await approvals.open_approval(
        "main", "Publish the post?", options=("yes", "no"), timeout_seconds=0.05
    )
    decision = await approvals.decision(request)
    assert (decision.status, decision.choice, decision.applied_default) == ("timed_out", "no", True)
    assert decision.text() == (
        f'No answer to request [{request.id}] ("Publish the post?") in '
        f"{decision.waited_seconds:.3g} s. Applied the default: no."
    )
    assert approvals.pending() == []


async def test_the_first_answer_wins_and_a_second_is_recorded_and_told() -> None:
    outbox = Outbox()
    approvals = Approvals(outbox)
    request = await approvals.open_approval("main", "Deploy now?", timeout_seconds=60)
    assert approvals.answer_from_text("main", f"/approve {request.id}")
    # A second answer, from another channel, before the waiter even looked.
    assert approvals.answer_from_text("main", f"/deny {request.id} wait")
    assert not approvals.resolve(request.id, False, "from the web console")
    decision = await approvals.decision(request)
    assert (decision.status, decision.choice) == ("answered", "approve")
    assert [late.answer for late in request.late] == ["deny: wait", "deny: from the web console"]
    assert await approvals.flush_notes() == 2
    assert said(outbox)[-2] == (
        f"Your answer to [{request.id}] (deny: wait) was recorded but not applied: it was "
        "already answered (approve); the first answer counts. If it still matters, say so in "
        "a message of your own."
    )


async def test_an_answer_after_the_timeout_is_recorded_not_applied_and_told() -> None:
    outbox = Outbox()
    approvals = Approvals(outbox)
    request = await approvals.open_approval("main", "Pay the supplier?", timeout_seconds=0.05)
    decision = await approvals.decision(request)
    async with anyio.create_task_group() as tg:
        tg.start_soon(approvals.serve)
        assert approvals.answer_from_text("main", f"/approve {request.id} sorry, was away")
        with anyio.fail_after(5):
            while len(outbox.sent) < 2:  # noqa: ASYNC110
                await anyio.sleep(0.01)
        tg.cancel_scope.cancel()
    assert request.decision == decision and decision.choice == "deny"
    assert request.late[0].answer == "approve: sorry, was away"
    assert said(outbox)[-1].startswith(
        f"Your answer to [{request.id}] (approve: sorry, was away) was recorded but not "
        f"applied: it had timed out after {duration(decision)}, and the default (deny) was "
        "applied."
    )
    # Another session cannot answer (nor learn about) it.
    assert not approvals.answer_from_text("other", f"/approve {request.id}")
    assert approvals.closed("main") == [request]


def duration(decision: HumanDecision) -> str:
    return f"{decision.waited_seconds:.3g} s"


async def test_an_input_request_takes_checked_values_and_applies_its_default_on_timeout() -> None:
    outbox = Outbox()
    approvals = Approvals(outbox)
    form = ElicitationForm.from_schema(DATE_FORM)
    request = await approvals.open_input(
        "main", "Which date for the board meeting?", form, timeout_seconds=60
    )
    assert said(outbox)[-1] == (
        f'Input requested [{request.id}] by the agent: "Which date for the board meeting?"\n'
        "Fields: date (a date like 2026-12-24, required)\n"
        "With no answer in 60 s: nothing is decided.\n"
        f"Reply /answer {request.id} date=2026-12-24 to give them, or /decline {request.id}."
    )
    async with anyio.create_task_group() as tg:
        got: list[HumanDecision] = []

        async def wait() -> None:
            got.append(await approvals.decision(request))

        tg.start_soon(wait)
        assert approvals.answer_from_text("main", f"/answer {request.id} date=24.12.2026")
        await wait_all_tasks_blocked()
        assert "was not taken: date must be a date like 2026-12-24" in said(outbox)[-1]
        assert approvals.answer_input(request.id, {"date": "2026-12-24"}).accepted
    assert got[0].values == {"date": "2026-12-24"}
    assert got[0].text().endswith(": date=2026-12-24.")

    defaulted = await approvals.open_input(
        "main", "Which date?", form, default={"date": "2027-01-08"}, timeout_seconds=0.05
    )
    decision = await approvals.decision(defaulted)
    assert (decision.status, decision.values, decision.applied_default) == (
        "timed_out",
        {"date": "2027-01-08"},
        True,
    )
    reply = approvals.answer_input(defaulted.id, "date=2027-01-09")
    assert not reply.accepted and "recorded but not applied: it had timed out" in reply.text


async def test_a_withdrawn_request_leaves_the_queue_without_a_decision() -> None:
    outbox = Outbox()
    approvals = Approvals(outbox)
    request = await approvals.open_approval("main", "Rotate the keys?", timeout_seconds=60)
    with anyio.move_on_after(0.05):
        await approvals.decision(request)
    assert approvals.pending() == [] and request.decision is None
    # An answer after its call ended is recorded, not applied, and the person is told why.
    assert approvals.answer_from_text("main", f"/approve {request.id}")
    assert request.decision is None and [late.answer for late in request.late] == ["approve"]
    assert await approvals.flush_notes() == 1
    assert said(outbox)[-1] == (
        f"Your answer to [{request.id}] (approve) was recorded but not applied: it had already "
        "ended: the call it was for ended before an answer came (it was cancelled, or the "
        "runtime stopped). If it still matters, say so in a message of your own."
    )


async def test_a_deployment_s_handler_answers_the_agent_s_yes_no_questions_too() -> None:
    outbox = Outbox()
    asked: list[str] = []

    async def console_buttons(request: Any) -> Verdict:
        asked.append(request.summary)
        return Verdict("deny", ("Not before the audit.",))

    approvals = Approvals(outbox, handler=console_buttons)
    request = await approvals.open_approval("main", "Close the books?", timeout_seconds=60)
    decision = await approvals.decision(request)
    assert asked == ["Close the books?"] and outbox.sent == []
    assert (decision.status, decision.choice, decision.reason) == (
        "answered",
        "deny",
        "Not before the audit.",
    )
