"""Bounded memory: idle sessions leave memory and come back from the store on their next event."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import anyio
import pytest
from anyio import wait_all_tasks_blocked
from pydantic import Field

from servers.postgres import RuntimeStoreUnderTest
from wakeful.agent.router import Decision, Router
from wakeful.clock import FakeClock
from wakeful.errors import UserError
from wakeful.events import Event, user_input
from wakeful.messages import Message, UserMessage
from wakeful.models import FunctionModel, ScriptedModel, Turn, call, say, use
from wakeful.models.base import Model, ToolDefinition
from wakeful.runtime import Runtime
from wakeful.safety.commands import CommandPolicy, PolicySettings
from wakeful.safety.gate import CallGate
from wakeful.safety.sidecar import RuleSidecar, SidecarSettings
from wakeful.tools.spec import tool

pytestmark = pytest.mark.anyio

EVICT_AFTER = 60.0


def echo_model() -> FunctionModel:
    """Answers each user message with "re: <its text>"."""

    def script(messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> Turn:
        last = messages[-1]
        return say(f"re: {last.content}" if isinstance(last, UserMessage) else "")

    return FunctionModel(script)


def runtime(
    model: Model, clock: FakeClock, store: Path | RuntimeStoreUnderTest | None, **kwargs: Any
) -> Runtime:
    options: dict[str, Any] = {"with_core_tools": False, "with_timers": False}
    if isinstance(store, RuntimeStoreUnderTest):
        options.update(store.options)
    else:
        options["store_path"] = store
    return Runtime(
        model=model,
        clock=clock,
        evict_idle_after_seconds=EVICT_AFTER,
        **{**options, **kwargs},
    )


async def run_out(clock: FakeClock, seconds: float = EVICT_AFTER + 1) -> None:
    """Move the clock on and let the runtime act on it."""
    clock.advance(seconds)
    await wait_all_tasks_blocked()


def event_ids_seen(messages: Sequence[Message]) -> list[str]:
    return [i for m in messages if isinstance(m, UserMessage) for i in m.event_ids]


async def test_an_idle_session_is_evicted_then_reloaded_with_its_whole_trajectory(
    runtime_store: RuntimeStoreUnderTest,
) -> None:
    clock = FakeClock()
    model = echo_model()
    async with runtime(model, clock, runtime_store) as rt:
        await rt.submit(user_input("my name is Ada"))
        await rt.wait_idle()
        first = rt.sessions["main"]

        await run_out(clock, EVICT_AFTER - 1)
        assert rt.sessions.get("main") is first  # not idle long enough yet
        await run_out(clock, 2)
        assert "main" not in rt.sessions
        with pytest.raises(UserError, match="not in memory"):
            rt.transcript("main")

        await rt.submit(user_input("what is my name?"))
        await rt.wait_idle()
        assert rt.sessions["main"] is not first
    contents = [m.content for m in model.requests[-1].messages]
    assert contents[1:] == ["my name is Ada", "re: my name is Ada", "what is my name?"]


async def test_without_a_store_nothing_is_evicted(tmp_path: Path) -> None:
    clock = FakeClock()
    async with runtime(echo_model(), clock, None) as rt:
        await rt.submit(user_input("hello"))
        await rt.wait_idle()
        session = rt.sessions["main"]
        await run_out(clock, 10 * EVICT_AFTER)
        assert rt.sessions.get("main") is session


async def test_a_session_with_a_running_background_task_stays_until_it_is_handled(
    tmp_path: Path,
) -> None:
    release = anyio.Event()

    @tool(run_mode="background")
    async def build(target: Annotated[str, Field(description="e.g. 'docs'")]) -> str:
        """Build a target."""
        await release.wait()
        return "built"

    model = ScriptedModel([use(call("build", target="docs")), say(""), say("it is built")])
    clock = FakeClock()
    async with runtime(model, clock, tmp_path / "w.db", tools=[build]) as rt:
        await rt.submit(user_input("build the docs"))
        await rt.wait_idle(include_tasks=False)
        session = rt.sessions["main"]
        assert session.idle
        await run_out(clock)
        assert rt.sessions.get("main") is session

        release.set()
        await rt.wait_idle()
        assert session.trajectory.messages[-1].content == "it is built"
        await run_out(clock)
        assert "main" not in rt.sessions


@pytest.mark.timeout(20)
async def test_a_session_waiting_for_an_approval_is_not_evicted(tmp_path: Path) -> None:
    ran: list[str] = []

    @tool
    async def pretend_shell(command: Annotated[str, Field(description="e.g. 'ls'")]) -> str:
        """Records the command instead of running it."""
        ran.append(command)
        return f"ran {command}"

    settings = SidecarSettings(shell_tools={"pretend_shell": "command"})
    gate = CallGate(
        sidecar=RuleSidecar(settings, CommandPolicy(PolicySettings(workspace=tmp_path)))
    )
    model = ScriptedModel(
        [use(call("pretend_shell", command="rm -rf src")), say(""), say("removed")]
    )
    clock = FakeClock()
    async with runtime(
        model, clock, tmp_path / "w.db", tools=[pretend_shell], gate=gate, workdir=tmp_path
    ) as rt:
        await rt.submit(user_input("remove src"))
        with anyio.fail_after(5):
            while not rt.outbox.sent:  # noqa: ASYNC110 - waiting for the question
                await anyio.sleep(0.01)
        # Something else comes up: the call goes on in the background, still waiting.
        interrupt = user_input("meanwhile, hi")
        interrupt.context["route"] = "cancel"
        await rt.submit(interrupt)
        await rt.wait_idle(include_tasks=False)
        session = rt.sessions["main"]
        approvals = rt.approvals
        assert session.idle and approvals is not None and approvals.pending("main")
        await run_out(clock)
        assert rt.sessions.get("main") is session

        found = re.search(r"Approval needed \[([0-9a-f]+)\]", rt.outbox.sent[0]["text"])
        assert found is not None
        await rt.submit(user_input(f"/approve {found.group(1)}"))
        await rt.wait_idle()
        assert ran == ["rm -rf src"]
        await run_out(clock)
        assert "main" not in rt.sessions


async def test_events_arriving_while_a_session_is_evicted_are_handled_once(
    runtime_store: RuntimeStoreUnderTest,
) -> None:
    clock = FakeClock()
    model = echo_model()
    async with runtime(model, clock, runtime_store) as rt:
        await rt.submit(user_input("first"))
        await rt.wait_idle()
        first = rt.sessions["main"]

        # The countdown runs out while two events are on their way: the eviction lands
        # between their steps (store write, session lookup, load from the store, hand-over).
        clock.advance(EVICT_AFTER + 1)
        later = [user_input("second"), user_input("third")]
        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                for event in later:
                    tg.start_soon(rt.submit, event)
            await rt.wait_idle()

        session = rt.sessions["main"]
        assert session is not first
        seen = event_ids_seen(session.trajectory.messages)
        assert all(seen.count(e.id) == 1 for e in later)
        assert rt.store is not None and await rt.store.pending_events() == []
    asked = [m.content for r in model.requests for m in r.messages[-1:]]
    assert sum("second" in text for text in asked) == 1
    assert sum("third" in text for text in asked) == 1


class DeliberateRouter(Router):
    """A router that takes its time over each decision (as one that asks a service would)."""

    def __init__(self) -> None:
        super().__init__()
        self.deciding = anyio.Event()
        self.go_on = anyio.Event()

    async def decide(self, event: Event, *, busy: bool, task_summary: str = "") -> Decision:
        if event.text == "slow":
            self.deciding.set()
            await self.go_on.wait()
        return await super().decide(event, busy=busy, task_summary=task_summary)


async def test_a_session_is_not_evicted_while_an_event_is_being_handed_to_it(
    tmp_path: Path,
) -> None:
    clock = FakeClock()
    router = DeliberateRouter()
    async with runtime(echo_model(), clock, tmp_path / "w.db", router=router) as rt:
        await rt.submit(user_input("first"))
        await rt.wait_idle()
        session = rt.sessions["main"]
        async with anyio.create_task_group() as tg:
            tg.start_soon(rt.submit, user_input("slow"))
            await router.deciding.wait()
            await run_out(clock)
            assert rt.sessions.get("main") is session
            router.go_on.set()
        with anyio.fail_after(5):
            await rt.wait_idle()
        assert session.trajectory.messages[-1].content == "re: slow"


async def test_few_asyncio_tasks_stay_alive_after_1000_short_sessions(tmp_path: Path) -> None:
    clock = FakeClock()
    async with runtime(echo_model(), clock, tmp_path / "w.db") as rt:
        before = len(asyncio.all_tasks())
        for batch in range(10):
            async with anyio.create_task_group() as tg:
                for i in range(100):
                    tg.start_soon(rt.submit, user_input("hi", session=f"s{batch}-{i}"))
            await rt.wait_idle()
        await run_out(clock)
        assert rt.sessions == {}
        assert len(asyncio.all_tasks()) <= before + 2
