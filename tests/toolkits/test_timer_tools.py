"""The timer tools over a real TimerService: the caller's session, tool errors, descriptions."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import anyio
import pytest

from running_timers import next_event, running
from wakeful.channels.timers import TimerService
from wakeful.clock import FakeClock
from wakeful.errors import ToolError
from wakeful.events import Event
from wakeful.services import Services
from wakeful.toolkits.triggers.timers import TIMER_TOOLS, cancel_timer, list_timers, set_timer
from wakeful.tools.spec import ToolContext
from wakeful.tools.tasks import TaskManager

pytestmark = pytest.mark.anyio

T0 = datetime(2025, 3, 20, 12, 0, tzinfo=UTC)  # a Thursday


def iso(when: datetime) -> str:
    return when.astimezone(UTC).isoformat()


async def _discard(event: Event) -> None:
    raise AssertionError(f"nothing should fire, got {event!r}")


@asynccontextmanager
async def tool_context(service: TimerService | None) -> AsyncIterator[ToolContext]:
    async with anyio.create_task_group() as tg:
        services = Services(tasks=TaskManager(tg, _discard), emit=_discard, timers=service)
        yield ToolContext(session="main", call_id="call_1", tool_name="t", services=services)


async def run_tool(tool_obj: Any, ctx: ToolContext, **arguments: Any) -> Any:
    result = await tool_obj.run(arguments, ctx)
    assert not result.is_error
    return json.loads(result.content)


async def test_the_tools_set_list_and_cancel_in_the_callers_session() -> None:
    clock = FakeClock(T0)
    async with running(None, clock) as (service, events), tool_context(service) as ctx:
        other = await service.set_timer(session="other", note="not yours", delay_seconds=10)
        made = await run_tool(
            set_timer, ctx, note="weekly report", cron="0 9 * * 5", timezone="Europe/Paris"
        )
        assert made["next_fire"] == iso(datetime(2025, 3, 21, 8, tzinfo=UTC))
        assert made["next_fire_local"] == "2025-03-21T09:00:00+01:00"
        listed = await run_tool(list_timers, ctx)
        assert listed["count"] == 1 and listed["timers"][0]["timer_id"] == made["timer_id"]
        with pytest.raises(ToolError, match=r"No active timer"):
            await cancel_timer.run({"timer_id": other.id}, ctx)
        cancelled = await run_tool(cancel_timer, ctx, timer_id=made["timer_id"])
        assert cancelled["cancelled"] == made["timer_id"]
        assert (await run_tool(list_timers, ctx))["count"] == 0
        clock.advance(10)
        assert (await next_event(events)).session == "other"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"note": "n", "at": "2025-13-01T09:00:00Z"}, "not an RFC 3339 time"),
        ({"note": "n", "at": "2025-03-21T09:00:00"}, "must include a timezone offset"),
        ({"note": "n", "cron": "every friday", "timezone": "UTC"}, "Invalid cron expression"),
        ({"note": "n", "cron": "0 9 * * 5", "timezone": "Paris"}, "Unknown timezone 'Paris'"),
        ({"note": "n", "delay_seconds": -1}, "delay_seconds.*greater than or equal to 0"),
        ({"note": "n", "at": "2025-03-21T09:00:00Z", "delay_seconds": 1}, "not both"),
        ({"note": "", "delay_seconds": 1}, "note"),
        ({"note": "n", "delay_seconds": 1, "repeat": True}, "not a parameter"),
    ],
)
async def test_set_timer_tool_turns_bad_input_into_tool_errors(
    arguments: dict[str, Any], message: str
) -> None:
    service = TimerService(None, _discard, clock=FakeClock(T0))
    async with tool_context(service) as ctx:
        with pytest.raises(ToolError, match=message):
            await set_timer.run(arguments, ctx)
    assert service.list_timers() == []


@pytest.mark.parametrize("at", ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00"])
async def test_set_timer_tool_refuses_a_time_beyond_the_years_python_holds(at: str) -> None:
    # Found by test_every_tool's edge values: converting such a time to UTC raised
    # OverflowError out of the tool.
    service = TimerService(None, _discard, clock=FakeClock(T0))
    async with tool_context(service) as ctx:
        with pytest.raises(ToolError, match="outside the years 1 to 9999"):
            await set_timer.run({"note": "n", "at": at}, ctx)
    assert service.list_timers() == []


async def test_cancel_timer_tool_rejects_an_unknown_id() -> None:
    service = TimerService(None, _discard, clock=FakeClock(T0))
    async with tool_context(service) as ctx:
        with pytest.raises(ToolError, match=r"No active timer 'tmr_nope'.*list_timers"):
            await cancel_timer.run({"timer_id": "tmr_nope"}, ctx)


async def test_the_tools_say_when_timers_are_not_enabled() -> None:
    async with tool_context(None) as ctx:
        for tool_obj, arguments in (
            (set_timer, {"note": "n", "delay_seconds": 1}),
            (cancel_timer, {"timer_id": "tmr_x"}),
            (list_timers, {}),
        ):
            with pytest.raises(ToolError, match="Timers are not enabled"):
                await tool_obj.run(arguments, ctx)


def test_the_tool_descriptions_follow_the_standard() -> None:
    assert [t.name for t in TIMER_TOOLS] == ["set_timer", "cancel_timer", "list_timers"]
    for t in TIMER_TOOLS:
        assert 1 <= len(t.spec.examples) <= 3
        assert "Returns" in t.spec.description and "Cost" in t.spec.description
        for name, schema in t.spec.input_schema["properties"].items():
            assert "e.g." in schema.get("description", ""), f"{t.name}.{name} has no example"
        for example in t.spec.examples:
            t.validate(example)
