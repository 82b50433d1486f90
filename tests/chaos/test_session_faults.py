"""One session's fault stays in that session: a model that raises, writes lone surrogates, calls
a tool with arguments nested 5,000 deep or reuses a call id within a turn. The other session
answers normally, the operator is alerted, every trajectory stays well-formed, and the store
loads again after a restart. Also the caps: a hung stream, an oversized or malformed event, a
burst of events."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import anyio
import pytest
from pydantic import Field

from wakeful.agent.session import SessionConfig
from wakeful.events import USER_INPUT, Event, InvalidEvent, Source, user_input, user_interrupt
from wakeful.messages import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolMessage,
    UserMessage,
    check_trajectory,
)
from wakeful.models import FunctionModel, Turn, call, say, use
from wakeful.models.base import ToolDefinition
from wakeful.runtime import Runtime
from wakeful.toolkits.comms.reply import reply_to_user
from wakeful.tools.spec import ToolAnnotations, tool

pytestmark = pytest.mark.anyio

DEEP_ARGUMENTS = '{"city": ' + "[" * 5000 + "]" * 5000 + "}"


@tool(annotations=ToolAnnotations(read_only=True))
async def get_weather(city: Annotated[str, Field(description="City name, e.g. 'Paris'")]) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def fault_turn(kind: str) -> Turn | str:
    if kind == "raise":
        raise ValueError("the SDK choked on a field")
    if kind == "surrogate":
        return say("half an emoji: \ud83d and a whole one: \ud83d\ude00")
    if kind == "deep":
        return use(ToolCall(id="call_deep", name="get_weather", arguments=DEEP_ARGUMENTS))
    assert kind == "duplicate"
    return use(
        call("get_weather", call_id="call_same", city="Paris"),
        call("get_weather", call_id="call_same", city="Rome"),
    )


def script(messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> Turn | str:
    """The good session replies through reply_to_user; the bad one misbehaves once (or, for
    "raise", every time), then ends its turn."""
    first = next(m.content for m in messages if isinstance(m, UserMessage))
    answered = isinstance(messages[-1], ToolMessage)
    if first.startswith("fault:"):
        return say("done") if answered else fault_turn(first.removeprefix("fault:"))
    if answered:
        return say("")
    return use(call("reply_to_user", text=f"answer to {first}"))


def runtime(model: FunctionModel, store: Path, **config: Any) -> Runtime:
    defaults: dict[str, Any] = {"model_fault_retries": 1, "model_fault_backoff_seconds": 0.01}
    return Runtime(
        model=model,
        tools=[reply_to_user, get_weather],
        with_core_tools=False,
        with_timers=False,
        store_path=store,
        session_config=SessionConfig(**{**defaults, **config}),
    )


def operator_alerts(rt: Runtime) -> list[str]:
    return [m["text"] for m in rt.outbox.sent if m["channel"] == "operator"]


@pytest.mark.parametrize("kind", ["raise", "surrogate", "deep", "duplicate"])
async def test_one_sessions_fault_leaves_the_other_session_working(
    kind: str, tmp_path: Path
) -> None:
    store = tmp_path / "w.db"
    async with runtime(FunctionModel(script), store) as rt:
        with anyio.fail_after(10):
            await rt.submit(user_input(f"fault:{kind}", session="bad"))
            await rt.submit(user_input("hello", session="good"))
            await rt.wait_idle()
            replies = [m["text"] for m in rt.outbox.sent if m["session"] == "good"]
            assert replies == ["answer to hello"]
            alerts = operator_alerts(rt)
            assert alerts and all("'bad'" in text for text in alerts)
            for session in rt.sessions.values():
                assert check_trajectory(session.trajectory.messages) == []
            # The paused (or repaired) session goes on with its next event.
            await rt.submit(user_input("still there?", session="good"))
            await rt.wait_idle()
        bad = rt.sessions["bad"].trajectory.messages
    if kind == "raise":
        assert "ValueError: the SDK choked on a field" in alerts[0]
        assert [m.role for m in bad] == ["system", "user"]
    if kind == "surrogate":
        assert isinstance(bad[-1], AssistantMessage)
        assert bad[-1].content == "half an emoji: \ufffd and a whole one: \U0001f600"
    if kind == "deep":
        result = bad[3]
        assert isinstance(result, ToolMessage) and result.status == "error"
        assert "nested 5001 levels deep" in result.content
    if kind == "duplicate":
        turn = bad[2]
        assert isinstance(turn, AssistantMessage)
        ids = [c.id for c in turn.tool_calls]
        assert len(set(ids)) == 2 and ids[0] == "call_same"
        results = [m.content for m in bad if isinstance(m, ToolMessage)]
        assert results == ["sunny in Paris", "sunny in Rome"]

    # A restart from the same store loads each session well-formed (an idle one on first use).
    async with runtime(FunctionModel(lambda m, t: say("back")), store) as rt:
        with anyio.fail_after(10):
            await rt.wait_idle()
        for name in ("bad", "good"):
            session = await rt.session(name)
            assert check_trajectory(session.trajectory.messages) == []


class FailingObserver:
    """An embedder's observer with a bug: it raises on the bad session's first tool call."""

    def __init__(self) -> None:
        self.raised = False

    def on_message(self, session: str, message: Message) -> None:
        calls = isinstance(message, AssistantMessage) and message.tool_calls
        if session == "bad" and calls and not self.raised:
            self.raised = True
            raise KeyError("the console lost its row")

    def on_stream_part(self, session: str, part: object) -> None:
        pass

    def on_turn_discarded(self, session: str, reason: str) -> None:
        pass


async def test_a_fault_outside_the_model_pauses_the_session_with_its_calls_answered(
    tmp_path: Path,
) -> None:
    def weather(messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> Turn | str:
        if isinstance(messages[-1], UserMessage):
            return use(call("get_weather", city="Paris"))
        return say("done")

    async with Runtime(
        model=FunctionModel(weather),
        tools=[reply_to_user, get_weather],
        with_core_tools=False,
        with_timers=False,
        store_path=tmp_path / "w.db",
        observer=FailingObserver(),
    ) as rt:
        with anyio.fail_after(10):
            await rt.submit(user_input("weather?", session="bad"))
            await rt.submit(user_input("weather?", session="good"))
            await rt.wait_idle()
            [alert] = operator_alerts(rt)
            assert "Session 'bad' paused after an internal error (KeyError" in alert
            bad = rt.sessions["bad"].trajectory.messages
            assert [m.role for m in bad] == ["system", "user", "assistant", "tool"]
            assert isinstance(bad[-1], ToolMessage) and bad[-1].status == "lost"
            good = rt.sessions["good"].trajectory.messages
            assert [m.role for m in good][-2:] == ["tool", "assistant"]
            # The next event resumes the paused session.
            await rt.submit(user_input("and now?", session="bad"))
            await rt.wait_idle()
            assert rt.sessions["bad"].trajectory.messages[-1].content == "done"
        for session in rt.sessions.values():
            assert check_trajectory(session.trajectory.messages) == []


async def test_a_failing_model_is_retried_with_backoff_then_the_session_pauses(
    tmp_path: Path,
) -> None:
    model = FunctionModel(script)
    async with runtime(model, tmp_path / "w.db", model_fault_retries=2) as rt:
        with anyio.fail_after(10):
            await rt.submit(user_input("fault:raise", session="bad"))
            await rt.wait_idle()
        assert len(model.requests) == 3  # the request and two retries
        [alert] = operator_alerts(rt)
        assert "failed 3 time(s) in a row" in alert
        [told] = [m["text"] for m in rt.outbox.sent if m["channel"] != "operator"]
        assert "send a message to retry" in told
        assert rt.store is not None
        [stored] = [s for s in await rt.store.recent_events() if s.event.kind == "system.alert"]
        assert stored.status == "consumed"  # a record for the operator, no agent is woken
        assert stored.event.session == "bad" and stored.event.context["fault"] == "ValueError"


async def test_a_model_stream_that_hangs_is_timed_out(tmp_path: Path) -> None:
    # The model goes silent after its call, before the end of the turn.
    hangs = Turn(
        text="let me check", tool_calls=[call("get_weather", city="Oslo")], after_calls_delay=60
    )

    def hang_once(messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> Turn | str:
        last = messages[-1]
        if isinstance(last, UserMessage) and last.content == "again":
            return say("fine now")
        return hangs

    model = FunctionModel(hang_once)
    config = {"model_stream_idle_seconds": 0.2, "model_fault_retries": 0}
    async with runtime(model, tmp_path / "w.db", **config) as rt:
        with anyio.fail_after(5):
            await rt.submit(user_input("weather?"))
            await rt.wait_idle()
            [alert] = operator_alerts(rt)
            assert "no part of the model's stream arrived for 0.2 s" in alert
            await rt.submit(user_input("again"))
            await rt.wait_idle()
        msgs = rt.sessions["main"].trajectory.messages
        assert [m.role for m in msgs] == ["system", "user", "user", "assistant"]
        assert check_trajectory(msgs) == []


async def test_an_event_over_the_size_cap_is_refused_with_the_cap_in_the_message(
    tmp_path: Path,
) -> None:
    big = user_input("x" * (5 * 1024 * 1024))
    async with runtime(FunctionModel(script), tmp_path / "w.db") as rt:
        with pytest.raises(InvalidEvent) as info:
            await rt.submit(big)
        message = str(info.value)
        assert "4,194,304 bytes" in message and "max_event_bytes" in message
        with pytest.raises(InvalidEvent):
            await rt.submit_many([user_input("fine"), big])
        assert rt.store is not None
        assert await rt.store.pending_events() == []  # nothing stored


@tool(run_mode="background")
async def dump_log() -> str:
    """Return a very long log."""
    return "line\n" * 100_000


async def test_a_background_result_over_the_cap_is_cut_to_fit_not_lost(tmp_path: Path) -> None:
    def dump(messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> Turn | str:
        if len(messages) == 2:
            return use(call("dump_log"))
        return say("")

    rt = runtime(FunctionModel(dump), tmp_path / "w.db", max_event_bytes=64 * 1024)
    rt.registry.add(dump_log)
    async with rt:
        with anyio.fail_after(10):
            await rt.submit(user_input("dump the log"))
            await rt.wait_idle()
        [arrived] = [
            m
            for m in rt.sessions["main"].trajectory.messages
            if isinstance(m, UserMessage) and "[TOOL_RESULT" in m.content
        ]
    assert "[Cut to fit the event size cap: Event" in arrived.content
    assert "65,536 bytes" in arrived.content
    assert len(arrived.content.encode()) < 64 * 1024


async def test_bad_event_content_raises_invalid_event_naming_the_field(tmp_path: Path) -> None:
    source = Source(type="user", id="me")
    with pytest.raises(InvalidEvent, match="content"):
        Event(kind=USER_INPUT, source=source, content=42)  # type: ignore[arg-type]
    with pytest.raises(InvalidEvent, match="kind"):
        Event(kind="", source=source)
    unserializable = Event(kind="webhook.received", source=source, content={"when": object()})
    async with runtime(FunctionModel(script), tmp_path / "w.db") as rt:
        with pytest.raises(InvalidEvent, match=r"content\.when"):
            await rt.submit(unserializable)


async def test_a_burst_of_events_is_appended_in_batches_with_a_summary(tmp_path: Path) -> None:
    model = FunctionModel(lambda m, t: say("noted"))
    events = [user_input(f"message {i}") for i in range(200)]
    async with runtime(model, tmp_path / "w.db", max_events_per_batch=50) as rt:
        with anyio.fail_after(10):
            await rt.submit_many(events)
            await rt.wait_idle()
        msgs = rt.sessions["main"].trajectory.messages
    batches = [m for m in msgs if isinstance(m, UserMessage)]
    assert [len(b.event_ids) for b in batches] == [50, 50, 50, 50]
    assert [e for b in batches for e in b.event_ids] == [e.id for e in events]
    assert "[Unprocessed event 50/50] message 49" in batches[0].content
    assert "[150 more events wait: 150 user messages. They come in the next batch" in (
        batches[0].content
    )
    assert "[Unprocessed event 1/50] message 150" in batches[3].content
    assert "more events wait" not in batches[3].content
    roles = [m.role for m in msgs]
    assert "user, user" not in ", ".join(roles)  # never two batches in a row
    assert check_trajectory(msgs) == []


async def test_a_stop_behind_a_long_queue_goes_in_the_next_batch(tmp_path: Path) -> None:
    model = FunctionModel(lambda m, t: say("stopping"))
    events = [*(user_input(f"message {i}") for i in range(120)), user_interrupt("stop")]
    async with runtime(model, tmp_path / "w.db", max_events_per_batch=50) as rt:
        with anyio.fail_after(10):
            await rt.submit_many(events)
            await rt.wait_idle()
        msgs = rt.sessions["main"].trajectory.messages
    first = next(m for m in msgs if isinstance(m, UserMessage))
    assert first.event_ids == [*(e.id for e in events[:49]), events[-1].id]
    assert "[Unprocessed event 50/50] stop" in first.content
    assert "[71 more events wait: 71 user messages." in first.content
