"""The runtime with its core tools: timers and shell monitors wake the agent with events."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import anyio
import anyio.lowlevel
import pytest
from pydantic import Field

from wakeful.events import user_input
from wakeful.messages import Message, ToolMessage, UserMessage, check_trajectory
from wakeful.models import FunctionModel, ScriptedModel, Turn, call, say, use
from wakeful.models.base import ToolDefinition
from wakeful.runtime import Runtime
from wakeful.toolkits.comms.reply import reply_to_user
from wakeful.tools.spec import tool

pytestmark = pytest.mark.anyio


def user_texts(rt: Runtime) -> list[str]:
    msgs = rt.sessions["main"].trajectory.messages
    return [m.content for m in msgs if isinstance(m, UserMessage)]


async def test_core_tools_are_offered_to_the_model(tmp_path: Path) -> None:
    model = FunctionModel(lambda m, t: say(""))
    async with Runtime(model=model, workdir=tmp_path) as rt:
        await rt.submit(user_input("hi"))
        await rt.wait_idle()
    names = [t.name for t in model.requests[0].tools]
    assert names == [
        "reply_to_user",
        "send_card_to_user",
        "send_user_notification",
        "list_user_messages",
        "task_status",
        "cancel_task",
        "list_tasks",
        "run_shell",
        "monitor_shell",
        "set_timer",
        "cancel_timer",
        "list_timers",
    ]


async def test_a_timer_the_agent_sets_wakes_it_with_its_note(tmp_path: Path) -> None:
    def script(msgs: Sequence[Message], tools: Sequence[ToolDefinition]) -> Turn:
        last = msgs[-1]
        if isinstance(last, UserMessage) and last.content == "remind me":
            return use(call("set_timer", note="call the DMV", delay_seconds=0.2))
        if isinstance(last, UserMessage) and last.content.startswith("[TIMER "):
            return use(call("reply_to_user", text="Time to call the DMV."))
        return say("")

    async with Runtime(model=FunctionModel(script), store_path=tmp_path / "w.db") as rt:
        await rt.submit(user_input("remind me"))
        with anyio.fail_after(5):
            while not rt.outbox.sent:  # noqa: ASYNC110 - waiting for the timer to fire
                await anyio.sleep(0.01)
        texts = user_texts(rt)
        assert texts[-1].startswith("[TIMER tmr_") and texts[-1].endswith("call the DMV")
        assert rt.outbox.sent[-1]["text"] == "Time to call the DMV."


async def test_monitor_shell_delivers_matching_lines_as_events(tmp_path: Path) -> None:
    command = "for i in 1 2 3; do echo \"ok $i\"; sleep 0.05; done; echo 'ERROR disk full'; sleep 1"

    def script(msgs: Sequence[Message], tools: Sequence[ToolDefinition]) -> Turn:
        last = msgs[-1]
        if isinstance(last, UserMessage) and last.content == "watch the job":
            return use(call("run_shell", command=command, background=True))
        if isinstance(last, ToolMessage) and last.name == "run_shell":
            task_id = json.loads(last.content)["task_id"]
            return use(call("monitor_shell", task_id=task_id, pattern="ERROR"))
        return say("")

    async with Runtime(model=FunctionModel(script), workdir=tmp_path) as rt:
        await rt.submit(user_input("watch the job"))
        await rt.wait_idle()
        texts = user_texts(rt)
        shell = [t for t in texts if "[SHELL_OUTPUT task_" in t]
        assert len(shell) == 1 and shell[0].split("] ", 1)[1].startswith("ERROR disk full")
        assert not any("ok 2" in t for t in shell)
        assert check_trajectory(rt.sessions["main"].trajectory.messages) == []


async def test_wait_idle_waits_for_a_background_result_to_be_handled(tmp_path: Path) -> None:
    release = anyio.Event()

    @tool(run_mode="background")
    async def build(target: Annotated[str, Field(description="e.g. 'docs'")]) -> str:
        """Build a target."""
        await release.wait()
        return "built"

    model = ScriptedModel(
        [
            use(call("build", target="docs")),
            say(""),
            use(call("reply_to_user", text="done")),
            say(""),
        ]
    )
    async with Runtime(
        model=model,
        tools=[reply_to_user, build],
        with_core_tools=False,
        with_timers=False,
        store_path=tmp_path / "w.db",
    ) as rt:
        await rt.submit(user_input("go"))
        await rt.wait_idle(include_tasks=False)
        release.set()
        await anyio.lowlevel.checkpoint()  # the task ends; its result event is being stored
        assert not rt.is_idle()
        await rt.wait_idle()
        assert [m["text"] for m in rt.outbox.sent] == ["done"]


async def test_submit_many_stores_a_burst_in_one_write_and_routes_it_in_order(
    tmp_path: Path,
) -> None:
    model = ScriptedModel([say("read them all")])
    burst = [user_input(f"mail {i}") for i in range(3)]
    async with Runtime(
        model=model, with_core_tools=False, with_timers=False, store_path=tmp_path / "w.db"
    ) as rt:
        decisions = await rt.submit_many(burst)
        assert [d.strategy for d in decisions] == ["queue"] * 3
        await rt.wait_idle()
        assert user_texts(rt)[0].splitlines()[:3] == [
            "[Unprocessed event 1/3] mail 0",
            "[Unprocessed event 2/3] mail 1",
            "[Unprocessed event 3/3] mail 2",
        ]
        assert rt.store is not None and await rt.store.pending_events() == []


async def test_a_runtime_with_shell_tools_and_no_sandbox_says_so_loudly_at_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    import logging

    import wakeful.safety.sandbox.sandbox as sandbox_module
    from wakeful.safety.sandbox import SandboxSettings

    monkeypatch.setattr(sandbox_module, "_warned_none", False)
    with caplog.at_level(logging.WARNING):
        async with Runtime(
            model=ScriptedModel([]), workdir=tmp_path, settings=[SandboxSettings(backend="none")]
        ):
            pass
    assert any("NOT A SANDBOX" in r.getMessage() for r in caplog.records)


def test_a_misspelt_keyword_names_runtime_and_the_known_ones() -> None:
    with pytest.raises(TypeError, match=r"Runtime\(\) got unknown keyword argument\(s\) store_pth"):
        Runtime(model=ScriptedModel([]), store_pth="agent.db")  # type: ignore[call-arg]


def test_settings_round_trip_through_from_settings(tmp_path: Path) -> None:
    runtime = Runtime(model=ScriptedModel([]), store_path=str(tmp_path / "a.db"), tools=iter([]))
    assert runtime.settings.store_path == tmp_path / "a.db"
    assert runtime.settings.tools == ()
    again = Runtime.from_settings(runtime.settings)
    assert again.settings == runtime.settings
