"""The system-prompt section on when to ask a person, checked by scripted scenarios in a real
runtime: the request to a person happens where the section says it should, and only there.

The model is a FunctionModel that follows the prompt it receives, literally: it reads the
section's list of the kinds of action that need a person (and their examples) and its "How to
ask" rules from the system prompt of the request, and asks before a call that matches one of
them. It knows nothing of the section by itself, so each scenario fails when the section is
missing from the prompt the model received (checked by running it without the section), or when
the section stops naming the kind of action the scenario is about.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import anyio
import pytest
from pydantic import Field

from wakeful.agent.hitl_prompt import HITL_SECTION, with_hitl_section
from wakeful.agent.session_config import SessionConfig
from wakeful.events import user_input
from wakeful.messages import AssistantMessage, Message, SystemMessage, ToolMessage, UserMessage
from wakeful.models import FunctionModel, Turn, call, say, use
from wakeful.models.base import ToolDefinition
from wakeful.runtime import Runtime
from wakeful.toolkits.collaboration.human import HUMAN_TOOLS
from wakeful.tools.spec import ToolContext, tool

pytestmark = pytest.mark.anyio

BASE = SessionConfig(system_prompt="You are the operations assistant of Acme.")
YES = {"yes", "yes, go ahead", "ok", "approved"}


# --- the world: a production database and two tools ------------------------------------------


def database(workdir: Path) -> Path:
    return workdir / "production.db"


@tool
async def delete_records(
    ctx: ToolContext,
    table: Annotated[str, Field(description="The table, e.g. 'customers'")],
) -> str:
    """Deletes every row of a table in the production database."""
    assert ctx.services.workdir is not None
    with sqlite3.connect(database(ctx.services.workdir)) as conn:
        deleted = conn.execute(f"DELETE FROM {table}").rowcount  # the test's own table name
    return f"deleted {deleted} rows from {table}"


@tool
async def count_records(
    ctx: ToolContext,
    table: Annotated[str, Field(description="The table, e.g. 'customers'")],
) -> str:
    """Counts the rows of a table in the production database."""
    assert ctx.services.workdir is not None
    with sqlite3.connect(database(ctx.services.workdir)) as conn:
        (count,) = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
    return f"{table} has {count} rows"


ORDERED: list[int] = []


@tool
async def order_machines(
    count: Annotated[int, Field(description="How many, e.g. 2")],
) -> str:
    """Orders new cloud machines, each billed monthly."""
    ORDERED.append(count)
    return f"ordered {count} machines"


def rows(workdir: Path) -> int:
    with sqlite3.connect(database(workdir)) as conn:
        return int(conn.execute("SELECT count(*) FROM customers").fetchone()[0])


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    with sqlite3.connect(database(tmp_path)) as conn:
        conn.execute("CREATE TABLE customers (name TEXT)")
        conn.executemany("INSERT INTO customers VALUES (?)", [("ann",), ("bob",), ("cy",)])
    return tmp_path


# --- a model that does what the system prompt says --------------------------------------------

# What the user's request asks for, and which tool does it (the model's "understanding").
PLANS: dict[str, tuple[str, dict[str, object]]] = {
    "delete": ("delete_records", {"table": "customers"}),
    "count": ("count_records", {"table": "customers"}),
    "machines": ("order_machines", {"count": 20}),
}


def stems(text: str) -> set[str]:
    """Crude word stems: 'deleting' and 'delete' share 'delet'."""
    return {word[:5] for word in re.findall(r"[a-z]{5,}", text.lower())}


def asking_rules(system: str) -> dict[str, set[str]]:
    """The kinds of action the prompt says need a person, with the stems of their examples."""
    found = re.search(r"Ask a person BEFORE you act when the action is:\n(.*?)\n\n", system, re.S)
    if found is None:
        return {}
    rules: dict[str, set[str]] = {}
    for line in found.group(1).splitlines():
        kind = re.match(r"- ([A-Z][\w ]+): (.*)", line)
        if kind:
            rules[kind.group(1)] = stems(kind.group(2))
    return rules


def routine(system: str) -> set[str]:
    """The stems of the steps the prompt says not to ask about."""
    found = re.search(r"Do not ask about [^(]*\((.*?)\)", system, re.S)
    return stems(found.group(1)) if found else set()


def how_to_ask(system: str, offered: set[str]) -> str | None:
    """The tool the prompt says to ask with, among those offered."""
    found = re.search(r"How to ask:\n(.*?)\n\n", system, re.S)
    if found is None:
        return None
    named = re.findall(r"\b(request_human_approval|reply_to_user)\b", found.group(1))
    return next((name for name in named if name in offered), None)


def users_words(messages: Sequence[Message]) -> list[str]:
    return [m.content for m in messages if isinstance(m, UserMessage)]


def follow_the_prompt(messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> Turn:
    system = messages[0]
    assert isinstance(system, SystemMessage)
    last = messages[-1]
    request, *answers = users_words(messages)
    verb = next(v for v in PLANS if v in request)
    name, arguments = PLANS[verb]
    if isinstance(last, ToolMessage):
        if last.name == "request_human_approval":  # the decision, asked for with wait=true
            decided = re.search(r"\): (\w+)\.", last.content)
            if decided is not None and decided.group(1) == "approve":
                return use(call(name, **arguments))
            return use(call("reply_to_user", text="Understood: I did not do it."))
        return say("")  # a question asked, or the work done: wait for what comes next
    if answers:
        if answers[-1].strip().lower() in YES:
            return use(call(name, **arguments))
        return use(call("reply_to_user", text="Understood: I did not do it."))
    description = next(t.description for t in tools if t.name == name)
    # Match the action itself: the tool's description and the user's request.
    action = stems(f"{description} {request}")
    kinds = [kind for kind, examples in asking_rules(system.content).items() if action & examples]
    if action & routine(system.content):
        kinds = []  # the prompt's exception: routine steps are not asked about
    ask_with = how_to_ask(system.content, {t.name for t in tools})
    if kinds and ask_with is not None:
        what = ", ".join(f"{key}={value}" for key, value in arguments.items())
        question = f"Before I run {name} ({what}): it is {', '.join(kinds).lower()}. Go ahead?"
        if ask_with == "request_human_approval":
            return use(call(ask_with, question=question, wait=True))
        return use(call(ask_with, text=question))
    return use(call(name, **arguments))


def calls_in_order(messages: Sequence[Message]) -> list[str]:
    return [c.name for m in messages if isinstance(m, AssistantMessage) for c in m.tool_calls]


async def settle(rt: Runtime) -> None:
    with anyio.fail_after(10):
        await rt.wait_idle()


def runtime(model: FunctionModel, workdir: Path, config: SessionConfig) -> Runtime:
    return Runtime(
        model=model,
        tools=[delete_records, count_records, order_machines],
        session_config=config,
        workdir=workdir,
        with_timers=False,
    )


# --- the scenarios ------------------------------------------------------------------------------


async def test_deleting_production_data_is_asked_about_first_and_done_after_a_yes(
    workdir: Path,
) -> None:
    model = FunctionModel(follow_the_prompt)
    async with runtime(model, workdir, with_hitl_section(BASE)) as rt:
        await rt.submit(user_input("delete the old customers from the production database"))
        await settle(rt)
        assert rows(workdir) == 3  # nothing deleted while the question is open
        [question] = rt.outbox.sent
        assert question["text"] == (
            "Before I run delete_records (table=customers): it is irreversible. Go ahead?"
        )
        await rt.submit(user_input("yes, go ahead"))
        await settle(rt)
        trajectory = (await rt.session("main")).trajectory.messages
    assert rows(workdir) == 0
    assert calls_in_order(trajectory) == ["reply_to_user", "delete_records"]
    # The question, then the person's yes, then the call: in that order in the trajectory.
    asked = next(i for i, m in enumerate(trajectory) if "Go ahead?" in str(m))
    yes = next(
        i
        for i, m in enumerate(trajectory)
        if isinstance(m, UserMessage) and "go ahead" in m.content
    )
    deleted = next(i for i, m in enumerate(trajectory) if "deleted 3 rows" in str(m))
    assert asked < yes < deleted
    # The section is what the model received, at the end of the deployment's own prompt.
    system = model.requests[0].messages[0].content
    assert system.startswith("You are the operations assistant of Acme.\n\n## When to ask")
    assert system.endswith(HITL_SECTION)


async def test_a_no_leaves_the_data_alone(workdir: Path) -> None:
    async with runtime(FunctionModel(follow_the_prompt), workdir, with_hitl_section(BASE)) as rt:
        await rt.submit(user_input("delete the old customers from the production database"))
        await settle(rt)
        await rt.submit(user_input("no, not today"))
        await settle(rt)
        trajectory = (await rt.session("main")).trajectory.messages
    assert rows(workdir) == 3
    assert "delete_records" not in calls_in_order(trajectory)
    assert rt.outbox.sent[-1]["text"] == "Understood: I did not do it."


async def test_without_the_section_the_same_model_deletes_at_once(workdir: Path) -> None:
    """The control: what the scenario above catches when the section is missing."""
    async with runtime(FunctionModel(follow_the_prompt), workdir, BASE) as rt:
        await rt.submit(user_input("delete the old customers from the production database"))
        await settle(rt)
        trajectory = (await rt.session("main")).trajectory.messages
    assert rows(workdir) == 0
    assert calls_in_order(trajectory) == ["delete_records"]
    assert rt.outbox.sent == []


async def test_an_expensive_order_is_asked_about_first(workdir: Path) -> None:
    ORDERED.clear()
    async with runtime(FunctionModel(follow_the_prompt), workdir, with_hitl_section(BASE)) as rt:
        await rt.submit(user_input("we need 20 more machines for the sale"))
        await settle(rt)
        assert ORDERED == []
        [question] = rt.outbox.sent
        assert question["text"] == (
            "Before I run order_machines (count=20): it is expensive. Go ahead?"
        )
        await rt.submit(user_input("approved"))
        await settle(rt)
    assert ORDERED == [20]


async def test_a_routine_read_is_not_asked_about(workdir: Path) -> None:
    async with runtime(FunctionModel(follow_the_prompt), workdir, with_hitl_section(BASE)) as rt:
        await rt.submit(user_input("count the customers"))
        await settle(rt)
        trajectory = (await rt.session("main")).trajectory.messages
    assert calls_in_order(trajectory) == ["count_records"]
    assert rt.outbox.sent == []


async def test_with_the_approval_tool_the_request_goes_through_it_before_the_call(
    workdir: Path,
) -> None:
    """Where request_human_approval is offered, the section makes it the way to ask: the
    approver's yes comes back as its result, and only then is the data deleted."""
    model = FunctionModel(follow_the_prompt)
    async with Runtime(
        model=model,
        tools=[*HUMAN_TOOLS, delete_records],
        session_config=with_hitl_section(BASE),
        workdir=workdir,
        with_timers=False,
    ) as rt:
        await rt.submit(user_input("delete the old customers from the production database"))
        with anyio.fail_after(10):
            while not rt.outbox.sent:  # noqa: ASYNC110
                await anyio.sleep(0.01)
        [question] = rt.outbox.sent
        assert (
            "Before I run delete_records (table=customers): it is irreversible."
            in (question["text"])
        )
        assert rows(workdir) == 3
        request_id = re.search(r"\[([0-9a-f]{4,12})\]", question["text"])
        assert request_id is not None
        await rt.submit(user_input(f"/approve {request_id.group(1)}"))
        await settle(rt)
        trajectory = (await rt.session("main")).trajectory.messages
    assert rows(workdir) == 0
    assert calls_in_order(trajectory) == ["request_human_approval", "delete_records"]
    [decision] = [
        m for m in trajectory if isinstance(m, ToolMessage) and m.name == "request_human_approval"
    ]
    assert "): approve." in decision.content


def test_the_section_is_added_once_and_the_config_given_is_not_changed() -> None:
    config = replace(BASE, max_events_per_batch=7)
    added = with_hitl_section(config)
    assert config.system_prompt == "You are the operations assistant of Acme."
    assert added.max_events_per_batch == 7
    assert with_hitl_section(added) is added
    assert added.system_prompt.count("## When to ask a person first") == 1
    # The four kinds the chapter names, and how to ask.
    for kind in ("Irreversible:", "Expensive:", "Ambiguous:", "Outside your authority:"):
        assert f"\n- {kind}" in HITL_SECTION
    assert "request_human_approval" in HITL_SECTION and "request_human_input" in HITL_SECTION
    assert "as decided in case 12" in HITL_SECTION
