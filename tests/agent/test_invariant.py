"""Property: whatever interleaving of events, tool durations, interrupts and model turns,
every tool call is paired with exactly one result before the next model request, no
half-streamed turn is ever recorded, and no event is lost."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

import anyio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import Field

from wakeful.events import Event, Source, user_input, user_interrupt
from wakeful.messages import AssistantMessage, Message, UserMessage, check_trajectory
from wakeful.models import FunctionModel, Turn, call, say
from wakeful.models.base import ToolDefinition
from wakeful.runtime import Runtime
from wakeful.tools.spec import ToolAnnotations, tool


@tool
async def work(seconds: Annotated[float, Field(ge=0, description="Duration, e.g. 0.01")]) -> str:
    """Work for a while."""
    await anyio.sleep(seconds)
    return f"worked {seconds}"


@tool(annotations=ToolAnnotations(read_only=True))
async def peek(seconds: Annotated[float, Field(ge=0, description="Duration, e.g. 0.01")]) -> str:
    """Look at something for a while (read-only: runs alongside other read-only calls)."""
    await anyio.sleep(seconds)
    return f"peeked {seconds}"


@tool(run_mode="background")
async def work_later(seconds: Annotated[float, Field(ge=0, description="e.g. 0.01")]) -> str:
    """Work in the background."""
    await anyio.sleep(seconds)
    return f"worked later {seconds}"


durations = st.sampled_from([0.0, 0.005, 0.02, 0.05])

turns = st.one_of(
    st.builds(
        lambda words, chunk: Turn(text=" ".join(f"w{i}" for i in range(words)), chunk_delay=chunk),
        st.integers(1, 12),
        st.sampled_from([0.0, 0.002, 0.005]),
    ),
    st.builds(
        lambda ds, names, chunk: Turn(
            text="calling",
            chunk_delay=chunk,
            tool_calls=[call(n, seconds=d) for d, n in zip(ds, names, strict=False)],
        ),
        st.lists(durations, min_size=1, max_size=4),
        st.lists(st.sampled_from(["work", "work_later", "peek"]), min_size=4, max_size=4),
        st.sampled_from([0.0, 0.003]),
    ),
)


def make_event(kind: str, i: int) -> Event:
    if kind == "input":
        return user_input(f"message {i}")
    if kind == "stop":
        return user_interrupt(f"stop {i}")
    if kind == "urgent":
        return Event(
            kind="system.alert",
            source=Source(type="system", id="mon"),
            content=f"alert {i}",
            urgency="urgent",
        )
    return Event(
        kind="webhook.received", source=Source(type="stranger", id="hook"), content=f"hook {i}"
    )


events = st.lists(
    st.tuples(
        st.sampled_from([0.0, 0.003, 0.01, 0.03]),
        st.sampled_from(["input", "stop", "urgent", "webhook"]),
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(script=st.lists(turns, min_size=1, max_size=8), schedule=events)
def test_trajectory_stays_well_formed(
    script: list[Turn], schedule: list[tuple[float, str]]
) -> None:
    plan = list(script)
    scripted_texts = {t.text for t in script} | {"done"}

    def next_turn(msgs: Sequence[Message], tools: Sequence[ToolDefinition]) -> Turn:
        # Invariant: at every model request, every tool call already has its one result.
        assert check_trajectory(list(msgs)) == []
        return plan.pop(0) if plan else say("done")

    model = FunctionModel(next_turn)
    submitted: list[str] = []

    async def scenario() -> None:
        async with Runtime(
            model=model, tools=[work, work_later, peek], with_core_tools=False, with_timers=False
        ) as rt:
            first = user_input("start")
            submitted.append(first.id)
            await rt.submit(first)
            for i, (gap, kind) in enumerate(schedule):
                await anyio.sleep(gap)
                event = make_event(kind, i)
                submitted.append(event.id)
                await rt.submit(event)
            await rt.wait_idle()
            msgs = rt.sessions["main"].trajectory.messages
            assert check_trajectory(msgs) == []
            for m in msgs:
                if isinstance(m, AssistantMessage):
                    # Rule 4: only whole turns are ever recorded.
                    assert m.content in scripted_texts
            carried = [i for m in msgs if isinstance(m, UserMessage) for i in m.event_ids]
            assert len(carried) == len(set(carried))  # no event appended twice
            assert set(submitted) <= set(carried)  # and none lost

    anyio.run(scenario)
