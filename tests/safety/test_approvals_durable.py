"""The queue of requests to a person over a real store, across restarts (a new queue on the same
file): open requests come back with the time they had left, an outcome is handed over exactly
once, requests whose call ended with the restart are ended and a late answer is told so, ids
never collide with stored ones, and bad answers lose nothing stored."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, closing
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio import wait_all_tasks_blocked

from wakeful.events import HUMAN_ANSWER, Event
from wakeful.mcp.elicitation import ElicitationForm
from wakeful.messages import UserMessage
from wakeful.models import ScriptedModel, say
from wakeful.runtime import Runtime
from wakeful.safety import approvals as approvals_module
from wakeful.safety.approvals import ApprovalRequest, Approvals, answer_event
from wakeful.safety.decisions import HumanDecision
from wakeful.safety.request_records import restart_answer_event
from wakeful.services import Outbox
from wakeful.store.sqlite import Store

pytestmark = pytest.mark.anyio

DATE_FORM: dict[str, Any] = {
    "type": "object",
    "properties": {"date": {"type": "string", "format": "date"}},
    "required": ["date"],
}


class Run:
    """One run of the queue over the store: what it sent the person and the events it added."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.outbox = Outbox()
        self.approvals = Approvals(self.outbox, repository=store.human_requests)
        self.events: list[Event] = []

    async def deliver(self, event: Event) -> None:
        # What the runtime's delivery does: store it, drop an id stored already, hand it over.
        if await self.store.events.add_new(event):
            self.events.append(event)

    def said(self) -> list[str]:
        return [sent["text"] for sent in self.outbox.sent]


@asynccontextmanager
async def run(path: Path, *, serve: bool = True) -> AsyncIterator[Run]:
    """A queue on the store at `path`, restored from it and served (as a runtime does)."""
    async with await Store.open(path) as store:
        this = Run(store)
        await this.approvals.restore(form_of=ElicitationForm.from_schema)
        async with anyio.create_task_group() as tg:
            if serve:
                await tg.start(this.approvals.serve, this.deliver)
            yield this
            tg.cancel_scope.cancel()


async def until(condition: Any, seconds: float = 5) -> None:
    with anyio.fail_after(seconds):
        while not condition():  # noqa: ASYNC110
            await anyio.sleep(0.01)


async def answers_in_store(store: Store) -> list[Event]:
    return [s.event for s in await store.events.recent(100) if s.event.kind == HUMAN_ANSWER]


async def test_an_open_request_comes_back_after_a_restart_and_its_answer_is_an_event(
    tmp_path: Path,
) -> None:
    path = tmp_path / "w.db"
    async with run(path) as first:
        request = await first.approvals.open_approval(
            "main", "Pay 4,200 EUR to ACME?", timeout_seconds=3600, answered_in="event"
        )
        request_id = request.id
    async with run(path) as second:
        (back,) = second.approvals.pending("main")
        assert (back.id, back.summary, back.answered_in) == (
            request_id,
            "Pay 4,200 EUR to ACME?",
            "event",
        )
        # It waits for what is left of its time (from when it opened), and is not asked again.
        assert back.created == request.created
        assert second.said() == []
        assert second.approvals.answer_from_text("main", f"/approve {request_id} it matches")
        await until(lambda: second.events)
        (event,) = second.events
        assert event.kind == HUMAN_ANSWER and event.session == "main"
        assert event.text == (
            f'The approver answered request [{request_id}] ("Pay 4,200 EUR to ACME?"): approve. '
            'Their reason: "it matches".'
        )
        record = await second.store.human_requests.get(request_id)
        assert record is not None
        await until(lambda: not second.approvals.busy())
        record = await second.store.human_requests.get(request_id)
        assert record is not None and (record.status, record.delivered) == ("answered", True)
    async with run(path) as third:
        assert third.approvals.pending() == [] and third.events == []
        assert len(await answers_in_store(third.store)) == 1


async def test_a_default_that_fell_due_while_down_applies_at_the_start_and_says_so(
    tmp_path: Path,
) -> None:
    path = tmp_path / "w.db"
    async with run(path) as first:
        request = await first.approvals.open_input(
            "main",
            "Which date for the board meeting?",
            ElicitationForm.from_schema(DATE_FORM),
            schema=DATE_FORM,
            default={"date": "2027-01-08"},
            timeout_seconds=0.3,
            answered_in="event",
        )
    await anyio.sleep(0.5)  # the runtime is down when its time runs out
    async with run(path) as second:
        await until(lambda: second.events)
        (event,) = second.events
    assert event.text == (
        f'No answer to request [{request.id}] ("Which date for the board meeting?") in 0.3 s. '
        "Applied the default: date=2027-01-08."
    )
    assert event.context["applied_default"] is True
    assert event.context["values"] == {"date": "2027-01-08"}


@pytest.mark.parametrize("event_stored", [False, True])
async def test_an_outcome_not_yet_handed_over_is_handed_over_exactly_once(
    tmp_path: Path, event_stored: bool
) -> None:
    """A crash between recording the outcome and marking it delivered (before or after the
    event was stored): the next start hands it over, once."""
    path = tmp_path / "w.db"
    async with run(path, serve=False) as first:
        request = await first.approvals.open_approval(
            "main", "Deploy on Friday?", timeout_seconds=3600, answered_in="event"
        )
    decision = HumanDecision(
        request_id=request.id,
        session="main",
        kind="approval",
        question="Deploy on Friday?",
        status="answered",
        waited_seconds=42.0,
        choice="deny",
        reason="not on a Friday",
        default_words="deny",
    )
    async with await Store.open(path) as store:
        assert await store.human_requests.close(request.id, "answered", decision.to_json())
        if event_stored:
            record = await store.human_requests.get(request.id)
            assert record is not None
            opened = datetime.fromisoformat(record.opened_at)
            stored = ApprovalRequest(request.id, "main", "", "", (), created=opened)
            await store.events.add(answer_event(stored, decision))
    async with run(path) as second:
        await until(lambda: not second.approvals.busy())
        await wait_all_tasks_blocked()
        (event,) = await answers_in_store(second.store)
        assert event.text == (
            f'The approver answered request [{request.id}] ("Deploy on Friday?"): deny. Their '
            'reason: "not on a Friday".'
        )
        assert len(second.events) == (0 if event_stored else 1)
        record = await second.store.human_requests.get(request.id)
        assert record is not None and record.delivered
        # A late answer names the ended request.
        assert second.approvals.answer_from_text("main", f"/approve {request.id}")
        await until(lambda: len(second.said()) == 1)
        assert second.said()[0] == (
            f"Your answer to [{request.id}] (approve) was recorded but not applied: it was "
            "already answered (deny: not on a Friday); the first answer counts. If it still "
            "matters, say so in a message of your own."
        )
    async with run(path) as third:
        assert len(await answers_in_store(third.store)) == 1
        record = await third.store.human_requests.get(request.id)
        assert record is not None
        assert [late["answer"] for late in json.loads(record.late)] == ["approve"]


async def test_a_request_whose_call_ended_with_a_crash_is_ended_and_a_late_answer_told(
    tmp_path: Path,
) -> None:
    path = tmp_path / "w.db"
    async with run(path) as first:
        # The gate's question, and a request with wait=true: answered in their calls. Opened and
        # never waited for is what a kill -9 leaves in the store.
        gate = await first.approvals.open_approval(
            "main", "rm -rf build", asker="", tool="run_shell", reasons=("Deletes files.",)
        )
        mine = await first.approvals.open_approval("main", "Ship it?", answered_in="call")
    async with run(path) as second:
        assert second.approvals.pending() == []
        for request_id in (gate.id, mine.id):
            record = await second.store.human_requests.get(request_id)
            assert record is not None
            assert (record.status, record.delivered) == ("ended", True)
        assert second.approvals.answer_from_text("main", f"/approve {gate.id}")
        await until(lambda: len(second.said()) == 1)
        assert second.said()[0] == (
            f"Your answer to [{gate.id}] (approve) was recorded but not applied: it had already "
            "ended: the call it was for ended with a restart. If it still matters, say so in a "
            "message of your own."
        )
        assert second.events == []


async def test_a_call_cancelled_at_a_clean_stop_ends_its_request(tmp_path: Path) -> None:
    path = tmp_path / "w.db"
    async with run(path) as first, anyio.create_task_group() as tg:
        tg.start_soon(first.approvals.ask, "main", "run_shell", "rm -rf build", ("Deletes.",))
        await until(lambda: first.approvals.pending())
        (request,) = first.approvals.pending()
        tg.cancel_scope.cancel()
    async with run(path) as second:
        record = await second.store.human_requests.get(request.id)
        assert record is not None and (record.status, record.delivered) == ("ended", True)
        assert second.approvals.answer_from_text("main", f"/deny {request.id} too late?")
        await until(lambda: len(second.said()) == 1)
        assert (
            "it had already ended: the call it was for ended before an answer came"
            in (second.said()[0])
        )


async def test_a_call_cancelled_while_its_question_is_being_sent_ends_as_its_call_did(
    tmp_path: Path,
) -> None:
    """A stop while a slow channel still carries the question: the person may well have it, so
    a later answer is told the call ended, not that the question could not be sent."""
    path = tmp_path / "w.db"
    async with run(path) as first, anyio.create_task_group() as tg:
        handed = anyio.Event()

        async def slow_phone(message: Any) -> str | None:
            handed.set()
            await anyio.sleep_forever()
            return None

        first.outbox.deliveries["phone"] = slow_phone
        first.outbox.route = lambda message, channel: ["phone"]
        tg.start_soon(first.approvals.ask, "main", "run_shell", "rm -rf build", ("Deletes.",))
        await handed.wait()
        (request,) = first.approvals.pending()
        tg.cancel_scope.cancel()
    async with run(path) as second:
        record = await second.store.human_requests.get(request.id)
        assert record is not None and (record.status, record.delivered) == ("ended", True)
        assert second.approvals.answer_from_text("main", f"/deny {request.id}")
        await until(lambda: len(second.said()) == 1)
        assert "the call it was for ended before an answer came" in second.said()[0]


@pytest.fixture
def token_hex(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The ids the queue draws, in order (the standard library's randomness, scripted)."""
    drawn: list[str] = []

    def scripted(nbytes: int) -> str:
        return drawn.pop(0) if drawn else "ffff"[: nbytes * 2].ljust(nbytes * 2, "f")

    monkeypatch.setattr(approvals_module.secrets, "token_hex", scripted)
    yield drawn


async def test_ids_never_collide_with_stored_ones(tmp_path: Path, token_hex: list[str]) -> None:
    path = tmp_path / "w.db"
    async with run(path) as first:
        token_hex.extend(["a3f9"])
        old = await first.approvals.open_approval("main", "First?", answered_in="event")
        assert old.id == "a3f9"
        assert await first.store.human_requests.close("a3f9", "ended", "{}", delivered=True)
    async with run(path) as second:
        token_hex.extend(["a3f9", "a3f9", "b71c"])
        new = await second.approvals.open_approval("main", "Second?", answered_in="event")
        assert new.id == "b71c"
        stored = await second.store.human_requests.get("a3f9")
        assert stored is not None and stored.question == "First?"


async def test_bad_answers_lose_nothing_stored(tmp_path: Path) -> None:
    path = tmp_path / "w.db"
    async with run(path) as first:
        request = await first.approvals.open_input(
            "main",
            "Which date?",
            ElicitationForm.from_schema(DATE_FORM),
            schema=DATE_FORM,
            timeout_seconds=3600,
            answered_in="event",
        )
        before = await first.store.human_requests.get(request.id)
        # An unknown id is not an answer (the message goes to the agent as it is).
        assert not first.approvals.answer_from_text("main", "/approve ffff0")
        assert not first.approvals.answer_from_text("main", "/answer ffff0 date=2026-12-24")
        # An answer that does not fit the form is told to the person; the request stays open.
        reply = first.approvals.answer_input(request.id, "date=soon")
        assert not reply.accepted and "date must be a date like 2026-12-24" in reply.text
        assert await first.store.human_requests.get(request.id) == before
    async with run(path) as second:
        (back,) = second.approvals.pending_inputs("main")
        assert back.id == request.id and back.form is not None
        assert second.approvals.answer_input(request.id, {"date": "2026-12-24"}).accepted
        await until(lambda: second.events)
        assert second.events[0].context["values"] == {"date": "2026-12-24"}


# --- a stored request that cannot be rebuilt -------------------------------------------------

NOT_RESTORED_WORDS = (
    'The request [c0de] ("Which date for the board meeting?") could not be restored after the '
    "restart and has no answer: ask again if it is still needed."
)


def store_request_row(path: Path, data: str, **row: Any) -> None:
    """Write a request into the store's table as it is, past every check of the repository (what
    a damaged file or another version of wakeful leaves)."""
    values = {
        "id": "c0de",
        "session": "main",
        "kind": "input",
        "question": "Which date for the board meeting?",
        "priority": "normal",
        "opened_at": "2026-12-01T12:00:00+00:00",
        "deadline": None,
        "data": data,
        "status": "open",
    } | row
    names = ", ".join(values)
    marks = ", ".join("?" for _ in values)
    with closing(sqlite3.connect(path)) as db, db:
        db.execute(f"INSERT INTO human_requests ({names}) VALUES ({marks})", tuple(values.values()))


def last_user_text(model: ScriptedModel) -> str:
    message = model.requests[-1].messages[-1]
    assert isinstance(message, UserMessage)
    return str(message.content)


CUT_SHORT = '{"answered_in": "event", "shape": "form", "schema": {"type": '
ANOTHER_VERSION = '{"answered_in": "event", "shape": "poll", "choices": 3}'


@pytest.mark.parametrize(
    "data",
    [pytest.param(CUT_SHORT, id="cut-short"), pytest.param(ANOTHER_VERSION, id="another-version")],
)
async def test_a_request_that_cannot_be_rebuilt_tells_its_session_once(
    tmp_path: Path, data: str
) -> None:
    """The agent asked without waiting, and what the store kept cannot be read back: the agent
    is told there will be no answer (else it would wait forever), once across restarts, and a
    late answer is told that the request ended."""
    path = tmp_path / "w.db"
    async with await Store.open(path):
        pass
    store_request_row(path, data)
    model = ScriptedModel([say("I will ask the board again.")])
    async with Runtime(model=model, store_path=path, with_timers=False, workdir=tmp_path) as rt:
        await until(lambda: len(model.requests) == 1)
        with anyio.fail_after(10):
            await rt.wait_idle()
        assert NOT_RESTORED_WORDS in last_user_text(model)
        assert rt.store is not None and rt.approvals is not None
        (event,) = await answers_in_store(rt.store)
        assert (event.session, event.context["request_id"]) == ("main", "c0de")
        assert event.context["status"] == "not_restored"
        record = await rt.store.human_requests.get("c0de")
        assert record is not None and (record.status, record.delivered) == ("ended", True)
        assert rt.approvals.answer_from_text("main", "/answer c0de date=2027-01-08")
        await until(lambda: any("[c0de]" in sent["text"] for sent in rt.outbox.sent))
        (note,) = [sent["text"] for sent in rt.outbox.sent if "[c0de]" in sent["text"]]
        assert note == (
            "Your answer to [c0de] (date=2027-01-08) was recorded but not applied: it had "
            "already ended: it could not be restored after a restart. If it still matters, say "
            "so in a message of your own."
        )
    again = ScriptedModel([])
    async with Runtime(model=again, store_path=path, with_timers=False, workdir=tmp_path) as rt:
        with anyio.fail_after(10):
            await rt.wait_idle()
        assert rt.store is not None
        assert again.requests == []
        assert len(await answers_in_store(rt.store)) == 1


async def test_a_crash_after_telling_the_session_does_not_tell_it_twice(tmp_path: Path) -> None:
    """Ended and told (the event stored), but not yet marked delivered when the runtime died:
    the next start finds the event stored already and only marks it."""
    path = tmp_path / "w.db"
    async with await Store.open(path):
        pass
    store_request_row(path, "{", status="ended", decision=json.dumps({"ended": "unreadable"}))
    async with await Store.open(path) as store:
        record = await store.human_requests.get("c0de")
        assert record is not None
        await store.events.add(restart_answer_event(record, None))
    async with run(path) as second:
        await until(lambda: not second.approvals.busy())
        await wait_all_tasks_blocked()
        assert second.events == []
        (told,) = await answers_in_store(second.store)
        assert told.text == NOT_RESTORED_WORDS
        record = await second.store.human_requests.get("c0de")
        assert record is not None and record.delivered
    async with run(path) as third:
        await wait_all_tasks_blocked()
        assert third.events == [] and not third.approvals.busy()


async def test_the_stored_outcome_of_a_request_that_cannot_be_rebuilt_is_handed_over(
    tmp_path: Path,
) -> None:
    path = tmp_path / "w.db"
    async with run(path):
        pass
    decision = HumanDecision(
        request_id="c0de",
        session="main",
        kind="input",
        question="Which date for the board meeting?",
        status="answered",
        waited_seconds=60.0,
        values={"date": "2027-01-08"},
    )
    store_request_row(path, "not json", status="answered", decision=decision.to_json())
    async with run(path) as second:
        await until(lambda: not second.approvals.busy())
        (event,) = second.events
    assert event.text == (
        'The approver answered request [c0de] ("Which date for the board meeting?"): '
        "date=2027-01-08."
    )
    assert event.context["values"] == {"date": "2027-01-08"}


async def test_a_request_answered_in_its_call_that_cannot_be_rebuilt_ends_without_an_event(
    tmp_path: Path,
) -> None:
    """Its call ended with the restart (the session was told so by the call's end): nothing
    more goes to the session."""
    path = tmp_path / "w.db"
    async with run(path):
        pass
    data = '{"answered_in": "call", "shape": "yes_no", "options": 3}'
    store_request_row(path, data, kind="approval")
    async with run(path) as second:
        await wait_all_tasks_blocked()
        assert second.events == [] and not second.approvals.busy()
        record = await second.store.human_requests.get("c0de")
        assert record is not None and (record.status, record.delivered) == ("ended", True)
        assert second.approvals.answer_from_text("main", "/approve c0de")
        await until(lambda: len(second.said()) == 1)
        assert "it had already ended: the call it was for ended with a restart" in second.said()[0]
