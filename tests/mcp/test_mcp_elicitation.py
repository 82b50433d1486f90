"""MCP elicitation: a server that asks the user for input during a call gets a person's answer,
asked through the runtime's approvals (the same exchange, ids, timeout and default as approvals)
and typed as `/answer ID field=value …` or `/decline ID`. Against a real stdio server, on the
2026-07-28 protocol (input-required results) and the older one (server-to-client requests)."""

from __future__ import annotations

import re
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types
import pytest

from mcp_servers.elicits import BOOKING_QUESTION, SIGN_IN_URL
from tool_services import tool_services
from wakeful.events import user_input
from wakeful.mcp.client import MCPToolset
from wakeful.mcp.config import MCPServerConfig
from wakeful.mcp.elicitation import CallOrigin, ElicitationForm, MCPElicitation
from wakeful.messages import ToolMessage
from wakeful.models import ScriptedModel, call, say, use
from wakeful.runtime import Runtime
from wakeful.safety.approvals import Approvals, InvalidAnswer
from wakeful.safety.gate import CallGate
from wakeful.services import Outbox
from wakeful.tools.spec import ToolContext, ToolResult

SERVER = Path(__file__).parent.parent / "mcp_servers" / "elicits.py"
QUESTION_ID = re.compile(r"Input requested \[([0-9a-f]+)\]")

pytestmark = pytest.mark.anyio
protocols = pytest.mark.parametrize("protocol", ["2026", "legacy"])


def config(protocol: str = "2026", **options: Any) -> MCPServerConfig:
    legacy = ["--legacy"] if protocol == "legacy" else []
    return MCPServerConfig(
        name="bookings", command=[sys.executable, str(SERVER), *legacy], **options
    )


class Person:
    """Reads the questions the outbox carries, as the user on a channel would."""

    def __init__(self, outbox: Outbox) -> None:
        self.messages: list[dict[str, Any]] = []
        self._arrived = anyio.Event()
        outbox.listeners.append(self._receive)

    async def _receive(self, message: dict[str, Any]) -> None:
        self.messages.append(message)
        self._arrived.set()

    async def question(self) -> tuple[str, str]:
        """The id and text of the first input request sent (waits for it)."""
        text = await self.first(QUESTION_ID.search)
        found = QUESTION_ID.search(text)
        assert found is not None
        return found.group(1), text

    async def first(self, matches: Callable[[str], object]) -> str:
        """The first message whose text `matches` (waits for it)."""
        with anyio.fail_after(20):
            while True:
                for message in self.messages:
                    if matches(message["text"]):
                        return str(message["text"])
                self._arrived = anyio.Event()
                await self._arrived.wait()

    def texts(self) -> list[str]:
        return [m["text"] for m in self.messages]


@asynccontextmanager
async def toolset(cfg: MCPServerConfig, approvals: Approvals) -> AsyncIterator[MCPToolset]:
    async with MCPToolset([cfg], approvals=approvals) as mcp:
        assert mcp.server("bookings").state == "ready"
        yield mcp


async def call_while(
    mcp: MCPToolset, name: str, arguments: dict[str, Any], person: Callable[[], Any]
) -> ToolResult:
    """Call a tool while `person` (an async function) answers what it asks."""
    tools = {t.name: t for t in mcp.tools()}
    results: list[ToolResult] = []
    async with tool_services() as (services, _):
        ctx = ToolContext("main", "call_1", name, services)

        async def run() -> None:
            results.append(await tools[name].run(arguments, ctx))

        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            await person()
    return results[0]


@protocols
async def test_the_user_answers_a_servers_form_through_the_approvals(protocol: str) -> None:
    outbox = Outbox()
    approvals = Approvals(outbox)
    reader = Person(outbox)
    async with toolset(config(protocol), approvals) as mcp:

        async def answer() -> None:
            request_id, text = await reader.question()
            assert text.startswith(f"Input requested [{request_id}] by MCP server 'bookings'")
            assert "for the call to book_table" in text
            assert BOOKING_QUESTION in text
            assert "MCP server 'bookings' asks this, not the agent" in text
            assert "date: The day of the booking (a date like 2026-12-24, required)" in text
            assert "guests: How many people (a whole number from 1 to 12, required)" in text
            assert "seating" in text and "one of: indoor, outdoor" in text
            assert f"/answer {request_id} date=2026-12-24 guests=3 seating=indoor" in text
            assert f"/decline {request_id}" in text
            reply = approvals.answer_input(request_id, {"date": "2026-12-24", "guests": 4})
            assert reply.accepted, reply.text

        result = await call_while(mcp, "book_table", {"restaurant": "Luigi's"}, answer)
    assert not result.is_error
    assert result.content.startswith("Booked Luigi's on 2026-12-24 for 4 (indoor).")
    assert "MCP server 'bookings' asked the user for input" in result.content
    assert "the user answered" in result.content
    assert approvals.pending_inputs() == []


@protocols
async def test_a_declined_request_is_told_to_the_server_and_the_agent(protocol: str) -> None:
    outbox = Outbox()
    approvals = Approvals(outbox)
    reader = Person(outbox)
    async with toolset(config(protocol), approvals) as mcp:

        async def decline() -> None:
            request_id, _ = await reader.question()
            assert approvals.answer_from_text("main", f"/decline {request_id} not today")

        result = await call_while(mcp, "book_table", {"restaurant": "Luigi's"}, decline)
    assert "Nothing was booked at Luigi's: the user's answer was decline." in result.content
    assert "the user declined: not today; the server was told it was declined" in result.content


async def test_no_answer_in_time_is_a_decline() -> None:
    outbox = Outbox()
    approvals = Approvals(outbox, timeout_seconds=0.5)
    reader = Person(outbox)
    async with toolset(config(), approvals) as mcp:

        async def stay_silent() -> None:
            await reader.question()

        result = await call_while(mcp, "book_table", {"restaurant": "Luigi's"}, stay_silent)
    assert "the user's answer was decline" in result.content
    assert "nobody answered the input request" in result.content
    assert "within 0.5 s, so it was declined" in result.content


async def test_a_bad_answer_is_explained_and_the_question_stays_open() -> None:
    outbox = Outbox()
    approvals = Approvals(outbox)
    reader = Person(outbox)
    async with toolset(config(), approvals) as mcp:

        async def answer_badly_then_well() -> None:
            request_id, _ = await reader.question()
            assert approvals.answer_from_text(
                "main", f"/answer {request_id} date=2026-12-24 guests=40"
            )
            problem = await reader.first(lambda text: "was not taken" in text)
            assert problem == (
                f"That answer to [{request_id}] was not taken: guests must be a whole number "
                f"from 1 to 12; 40 is not. Reply /answer {request_id} date=2026-12-24 guests=3 "
                f"seating=indoor, or /decline {request_id}."
            )
            assert [r.id for r in approvals.pending_inputs("main")] == [request_id]
            assert approvals.answer_from_text(
                "main", f"/answer {request_id} date=2026-12-25 guests=2 seating=Outdoor"
            )

        result = await call_while(
            mcp, "book_table", {"restaurant": "Luigi's"}, answer_badly_then_well
        )
    assert result.content.startswith("Booked Luigi's on 2026-12-25 for 2 (outdoor).")


@protocols
async def test_a_server_not_allowed_to_elicit_is_not_offered_it(protocol: str) -> None:
    outbox = Outbox()
    approvals = Approvals(outbox)
    async with toolset(config(protocol, allow_elicitation=False), approvals) as mcp:

        async def nobody() -> None:
            pass

        result = await call_while(mcp, "book_table", {"restaurant": "Luigi's"}, nobody)
    assert result.is_error
    assert outbox.sent == []  # nobody was asked
    assert result.content.startswith(
        "MCP server 'bookings' cannot run book_table for this client: it needs a client "
        "capability that is not offered to it"
    )
    assert "allow_elicitation = false" in result.content
    assert "Do not call book_table again" in result.content


async def test_a_page_to_open_is_shown_with_its_site_and_accepted() -> None:
    outbox = Outbox()
    approvals = Approvals(outbox)
    reader = Person(outbox)
    async with toolset(config("legacy"), approvals) as mcp:

        async def open_page() -> None:
            request_id, text = await reader.question()
            assert f"It asks you to open {SIGN_IN_URL} (on calendar.example)" in text
            assert f"Reply /answer {request_id} once you have opened it" in text
            assert approvals.answer_from_text("main", f"/answer {request_id}")

        result = await call_while(mcp, "read_calendar", {}, open_page)
    assert result.content.startswith("sign-in answer: accept")


async def test_an_agent_books_a_table_with_the_users_answer_in_a_runtime() -> None:
    """The whole path: the agent calls the tool, the user answers in the chat (a message the
    runtime takes out of the stream), the agent gets the server's result."""
    model = ScriptedModel([use(call("book_table", restaurant="Luigi's")), say("booked")])
    async with Runtime(model=model, with_timers=False, mcp_servers=[config()]) as rt:
        reader = Person(rt.outbox)
        await rt.submit(user_input("book me a table at Luigi's"))
        request_id, _ = await reader.question()
        await rt.submit(user_input(f"/answer {request_id} date=2026-12-24 guests=4"))
        with anyio.fail_after(20):
            await rt.wait_idle()
        [result] = [
            m for m in rt.sessions["main"].trajectory.messages if isinstance(m, ToolMessage)
        ]
        texts = [m.content for m in rt.sessions["main"].trajectory.messages]
    assert result.content.startswith("Booked Luigi's on 2026-12-24 for 4 (indoor).")
    assert not any(isinstance(t, str) and t.startswith("/answer") for t in texts)


async def test_a_runtime_times_out_a_question_with_its_approval_timeout() -> None:
    model = ScriptedModel([use(call("book_table", restaurant="Luigi's")), say("not booked")])
    gate = CallGate(approval_timeout_seconds=0.5)
    async with Runtime(model=model, with_timers=False, mcp_servers=[config()], gate=gate) as rt:
        await rt.submit(user_input("book me a table at Luigi's"))
        with anyio.fail_after(20):
            await rt.wait_idle()
        [result] = [
            m for m in rt.sessions["main"].trajectory.messages if isinstance(m, ToolMessage)
        ]
    assert "the user's answer was decline" in result.content
    assert "nobody answered the input request" in result.content


# --- the form a person fills in: what MCP allows, and how typed answers are read ---------------

BOOKING_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 2, "maxLength": 20},
        "email": {"type": "string", "format": "email"},
        "vegetarian": {"type": "boolean", "default": False},
        "budget": {"type": "number", "minimum": 0},
        "course": {"type": "string", "oneOf": [{"const": "c1", "title": "Starter"}]},
        "extras": {
            "type": "array",
            "items": {"type": "string", "enum": ["bread", "wine", "cake"]},
            "maxItems": 2,
        },
    },
    "required": ["name"],
}


def booking_form() -> ElicitationForm:
    return ElicitationForm.from_schema(BOOKING_SCHEMA)


def test_typed_answers_become_values_of_the_schemas_types() -> None:
    values = booking_form().parse(
        "name='Ada Lovelace' email=ada@example.com vegetarian=yes budget=12.5 course=starter "
        "extras=bread,cake"
    )
    assert values == {
        "name": "Ada Lovelace",
        "email": "ada@example.com",
        "vegetarian": True,
        "budget": 12.5,
        "course": "c1",
        "extras": ["bread", "cake"],
    }
    assert booking_form().parse("name=Ada") == {"name": "Ada", "vegetarian": False}  # a default


def test_a_form_of_one_field_takes_the_whole_answer() -> None:
    form = ElicitationForm.from_schema(
        {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    )
    assert form.parse("New York") == {"city": "New York"}


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        ("email=ada@example.com", "name is required."),
        ("name=A", "name must be from 2 to 20 characters long, not 1."),
        ("name=Ada email=nope", "email must be an email address like name@example.com"),
        ("name=Ada vegetarian=maybe", "vegetarian must be yes or no, not 'maybe'."),
        ("name=Ada budget=-1", "budget must be a number of at least 0; -1 is not."),
        ("name=Ada extras=bread,wine,cake", "extras takes of at most 2 choices, not 3."),
        ("name=Ada extras=soup", "extras must be any of, separated by commas: bread, wine"),
        ("name=Ada colour=red", "there is no field 'colour'; the fields are name, email"),
        ("name=Ada name=Bob", "name is given twice."),
        ("Ada", "'Ada' is not of the form field=value"),
        ("name='Ada", "the answer could not be read (No closing quotation)."),
    ],
)
def test_a_bad_answer_says_what_is_wrong(answer: str, problem: str) -> None:
    with pytest.raises(InvalidAnswer) as caught:
        booking_form().parse(answer)
    assert str(caught.value).startswith(problem)


def test_values_from_code_are_checked_too() -> None:
    assert booking_form().check({"name": "Ada", "budget": 3}) == {
        "name": "Ada",
        "budget": 3,
        "vegetarian": False,
    }
    with pytest.raises(InvalidAnswer, match="vegetarian must be yes or no"):
        booking_form().check({"name": "Ada", "vegetarian": "perhaps"})
    with pytest.raises(InvalidAnswer, match="name must be text, not 7"):
        booking_form().check({"name": 7})


@pytest.mark.parametrize(
    ("schema", "problem"),
    [
        (
            {"type": "object", "properties": {"address": {"type": "object"}}},
            "property 'address' of the requested schema has type 'object'; MCP elicitation "
            "allows only flat properties",
        ),
        (
            {"type": "object", "properties": {"when": {"type": "string", "format": "time"}}},
            "property 'when' has the string format 'time'; MCP allows date, date-time, email, uri",
        ),
        ({"type": "array"}, "the requested schema has type 'array'"),
    ],
)
async def test_a_form_mcp_does_not_allow_is_refused_without_asking(
    schema: dict[str, Any], problem: str
) -> None:
    outbox = Outbox()
    elicitation = MCPElicitation("bookings", Approvals(outbox))
    origin = CallOrigin("main", "book_table")
    params = mcp_types.ElicitRequestFormParams(message="Where?", requested_schema=schema)
    answer = await elicitation.answer(params, origin)
    assert isinstance(answer, mcp_types.ErrorData)
    assert answer.code == mcp_types.INVALID_PARAMS
    assert answer.message.startswith(
        f"this client cannot show the form of MCP server 'bookings' to a person: {problem}"
    )
    assert outbox.sent == []  # nobody was asked
    [told] = origin.asked
    assert told.startswith("During this call MCP server 'bookings' asked the user for input")
    assert "it was refused, since this client cannot show the form" in told


async def test_a_request_outside_any_call_goes_to_the_main_session() -> None:
    outbox = Outbox()
    approvals = Approvals(outbox, timeout_seconds=0.2)
    elicitation = MCPElicitation("bookings", approvals)
    params = mcp_types.ElicitRequestFormParams(message="Which city?", requested_schema={})
    answer = await elicitation.answer(params, None)
    assert isinstance(answer, mcp_types.ElicitResult)
    assert answer.action == "decline"
    [asked] = outbox.sent
    assert asked["session"] == "main"
    assert asked["text"].startswith("Input requested [")
    assert "by MCP server 'bookings': \"Which city?\"" in asked["text"]  # no call named


@protocols
async def test_the_persons_time_does_not_count_against_the_calls_timeout(protocol: str) -> None:
    outbox = Outbox()
    approvals = Approvals(outbox)
    reader = Person(outbox)
    async with toolset(config(protocol, call_timeout_seconds=0.5), approvals) as mcp:

        async def answer_slowly() -> None:
            request_id, _ = await reader.question()
            await anyio.sleep(1.5)  # three times the call's timeout
            assert approvals.answer_input(request_id, "date=2026-12-24 guests=2").accepted

        result = await call_while(mcp, "book_table", {"restaurant": "Luigi's"}, answer_slowly)
    assert result.content.startswith("Booked Luigi's on 2026-12-24 for 2 (indoor).")
