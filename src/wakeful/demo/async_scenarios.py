"""Four runnable scenarios of an asynchronous agent: scripted model, real subprocesses.

Each scenario drives a real :class:`~wakeful.runtime.Runtime` with a :class:`FunctionModel`
that plays the agent's part by reading the trajectory, the way a real model would, and feeds
user events at the moments a person would type them. `speed` scales every duration, so the
three-scripts scenario that takes a minute at speed 1 takes a few seconds in the tests.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio

from ..events import user_input, user_interrupt
from ..messages import AssistantMessage, Message, ToolMessage, UserMessage
from ..models import FunctionModel, Turn, call, say, use
from ..models.base import ToolDefinition
from ..runtime.runtime import Runtime
from ..services import Outbox

DEMO_SYSTEM_PROMPT = (
    "You are a demo agent. Talk to the user with reply_to_user; run commands with run_shell."
)


@dataclass
class ScenarioResult:
    name: str
    runtime: Runtime
    sent: list[dict[str, object]]

    @property
    def messages(self) -> list[Message]:
        return self.runtime.sessions["main"].trajectory.messages


Script = Callable[[Sequence[Message], Sequence[ToolDefinition]], Turn]
Driver = Callable[[Runtime], Awaitable[None]]


def _last(messages: Sequence[Message]) -> Message:
    return messages[-1]


def _said(message: Message) -> str:
    """What a user-role message says, without the status block the runtime appends."""
    if not isinstance(message, UserMessage):
        return ""
    return message.content.split("\n[Status]", 1)[0]


def _task_ids(messages: Sequence[Message]) -> list[str]:
    """Task ids of background starts, in the order the tools returned them."""
    ids = []
    for m in messages:
        if isinstance(m, ToolMessage) and m.content.startswith("{"):
            try:
                data = json.loads(m.content)
            except json.JSONDecodeError:
                continue
            if isinstance(data, dict) and isinstance(data.get("task_id"), str):
                ids.append(data["task_id"])
    return ids


def _replied(messages: Sequence[Message], fragment: str) -> bool:
    return any(
        isinstance(m, AssistantMessage)
        and any(c.name == "reply_to_user" and fragment in c.arguments for c in m.tool_calls)
        for m in messages
    )


async def _until(predicate: Callable[[], bool]) -> None:
    """Wait for a moment of the scenario, as a user watching the chat would."""
    while not predicate():  # noqa: ASYNC110 - the driver plays a user watching the screen
        await anyio.sleep(0.005)


# --- 1. a long command in the background; "what time is it?" is answered at once ---------------


def background_script(speed: float) -> Script:
    seconds = round(4 / speed, 3)

    def script(messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> Turn:
        last = _last(messages)
        said = _said(last)
        if said.startswith("[TOOL_RESULT"):
            found = re.search(r"analysis finished: [^\n\]]+", said)
            text = found.group(0) if found else said
            return use(call("reply_to_user", text=f"The analysis is done — {text}."))
        if "what time" in said:
            return use(call("run_shell", command="date +%H:%M:%S"))
        if "run the analysis" in said:
            command = f"sleep {seconds}; echo 'analysis finished: 1,204 rows, 3 anomalies'"
            return use(call("run_shell", command=command, background=True))
        if isinstance(last, ToolMessage) and last.name == "run_shell" and "task_id" in last.content:
            task = _task_ids(messages)[-1]
            return use(
                call(
                    "reply_to_user",
                    text=f"Started the analysis as {task}; I'll report when it finishes.",
                )
            )
        if isinstance(last, ToolMessage) and last.name == "run_shell":
            now = last.content.strip().splitlines()[-1] if last.content.strip() else "?"
            return use(call("reply_to_user", text=f"It is {now}. The analysis is still running."))
        if isinstance(last, UserMessage) and "TOOL_RESULT" in last.content:
            found = re.search(r"analysis finished: [^\n\]]+", last.content)
            text = found.group(0) if found else last.content
            return use(call("reply_to_user", text=f"The analysis is done — {text}."))
        return say("")

    return script


async def background_driver(rt: Runtime) -> None:
    await rt.submit(user_input("Please run the analysis of last month's logs."))
    await _until(lambda: _replied(rt.sessions["main"].trajectory.messages, "Started the analysis"))
    await rt.submit(user_input("By the way, what time is it?"))


# --- 2. two instructions during a long task are appended together --------------------------------


def batch_script(speed: float) -> Script:
    seconds = round(3 / speed, 3)

    def script(messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> Turn:
        last = _last(messages)
        if isinstance(last, UserMessage) and "sales report" in last.content:
            command = f"sleep {seconds}; echo 'total sales: 42,000 EUR; best month: March'"
            return use(call("run_shell", command=command))
        if isinstance(last, UserMessage) and "Unprocessed event" in last.content:
            japanese = "日本語" in last.content or "Japanese" in last.content
            web = "web page" in last.content
            if japanese and web:
                page = (
                    "<html><body><h1>売上報告</h1>"
                    "<p>総売上: 42,000 EUR、最高の月: 3月</p></body></html>"
                )
                command = f"cat > report.html <<'EOF'\n{page}\nEOF\necho written report.html"
                return use(call("run_shell", command=command))
        if isinstance(last, ToolMessage) and "written report.html" in last.content:
            return use(call("reply_to_user", text="レポートをウェブページにしました: report.html"))
        if isinstance(last, ToolMessage) and "total sales" in last.content:
            return use(call("reply_to_user", text="Total sales: 42,000 EUR; best month: March."))
        return say("")

    return script


async def batch_driver(rt: Runtime) -> None:
    session = rt.sessions.get("main") or await rt.session("main")
    await rt.submit(user_input("Write me the sales report for Q1."))
    await _until(lambda: session.phase == "tools")
    await rt.submit(user_input("Remember to reply in Japanese."))
    await rt.submit(user_input("And make it a web page."))


# --- 3. "stop" during a model stream and during a running command ---------------------------------


def stop_script(speed: float) -> Script:
    def script(messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> Turn:
        last = _last(messages)
        if isinstance(last, UserMessage) and "essay" in last.content:
            return Turn(text="Once upon a time " * 400, chunk_delay=0.01 / speed)
        said = _said(last)
        if said.startswith("stop"):
            return use(call("reply_to_user", text="Stopped, as you asked."))
        if "run the nightly backup" in said:
            return use(call("run_shell", command="sleep 60; echo backup done"))
        return say("")

    return script


async def stop_driver(rt: Runtime) -> None:
    session = await rt.session("main")
    await rt.submit(user_input("Write a long essay about clocks."))
    await _until(lambda: session.phase == "model" and len(session.trajectory) == 2)
    await anyio.sleep(0.05)
    await rt.submit(user_interrupt("stop"))
    await _until(lambda: _replied(session.trajectory.messages, "Stopped"))
    await rt.wait_idle()
    await rt.submit(user_input("Now run the nightly backup."))
    await _until(lambda: session.phase == "tools")
    await anyio.sleep(0.1)
    await rt.submit(user_interrupt("stop the backup"))


# --- 4. three scripts at 3 %, 2 % and 1 % per second ----------------------------------------------


def progress_command(name: str, rate: int, speed: float) -> str:
    tick = round(1 / speed, 4)
    steps = -(-100 // rate)
    return (
        f"for i in $(seq 1 {steps}); do sleep {tick}; p=$((i*{rate})); "
        f'[ $p -gt 100 ] && p=100; echo "{name} progress $p%"; done; '
        f'echo "{name} finished: {rate * 100} records processed"'
    )


def three_scripts_script(speed: float) -> Script:
    names = {"A": 3, "B": 2, "C": 1}

    def script(messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> Turn:
        last = _last(messages)
        tasks = _task_ids(messages)
        if isinstance(last, UserMessage) and "three scripts" in last.content:
            return use(
                *(
                    call("run_shell", command=progress_command(n, r, speed), background=True)
                    for n, r in names.items()
                )
            )
        if isinstance(last, ToolMessage) and last.name == "run_shell" and len(tasks) == 3:
            return use(call("reply_to_user", text="All three scripts are running."))
        if isinstance(last, UserMessage) and "TOOL_RESULT" in last.content:
            finished = re.findall(r"(\w) finished", last.content)
            checked = any(isinstance(m, ToolMessage) and m.name == "task_status" for m in messages)
            if not checked:
                done = {tasks[list(names).index(f)] for f in finished}
                others = [t for t in tasks if t not in done]
                return use(*(call("task_status", task_id=t) for t in others))
            results = [
                m.content
                for m in messages
                if isinstance(m, UserMessage) and "finished:" in m.content
            ]
            lines = [line for text in results for line in re.findall(r"\w finished: [^\n]+", text)]
            report = "Combined report: " + "; ".join(sorted(lines))
            return use(call("reply_to_user", text=report))
        if isinstance(last, ToolMessage) and last.name == "task_status":
            statuses = [
                json.loads(m.content)
                for m in messages
                if isinstance(m, ToolMessage) and m.name == "task_status"
            ]
            low = [
                s["task_id"]
                for s in statuses
                if s.get("state") == "running" and (s.get("percent") or 0) < 50
            ]
            if low and not any(
                isinstance(m, ToolMessage) and m.name == "cancel_task" for m in messages
            ):
                return use(
                    *(
                        call(
                            "cancel_task",
                            task_id=t,
                            reason="below 50% when the first script finished",
                        )
                        for t in low
                    )
                )
        if isinstance(last, ToolMessage) and last.name == "cancel_task":
            return use(
                call("reply_to_user", text="Cancelled the slow script; waiting for the other one.")
            )
        return say("")

    return script


async def three_scripts_driver(rt: Runtime) -> None:
    await rt.submit(
        user_input(
            "Run these three scripts at once. When one finishes, check the others' progress and "
            "cancel any that is not past 50%."
        )
    )


SCENARIOS: dict[str, tuple[Callable[[float], Script], Driver]] = {
    "background_command": (background_script, background_driver),
    "batched_instructions": (batch_script, batch_driver),
    "stop": (stop_script, stop_driver),
    "three_scripts": (three_scripts_script, three_scripts_driver),
}


async def run_scenario(
    name: str,
    *,
    speed: float = 1.0,
    workdir: Path | None = None,
    observer: object | None = None,
    time_limit: float = 120.0,
    store_path: Path | None = None,
) -> ScenarioResult:
    """Run one scenario to completion and return its runtime (stopped) and what was sent.

    With `store_path` the runtime keeps its events, trajectory, tasks and audit log there, for
    `wakeful events tail`, `tasks` and `audit stats` to read afterwards.
    """
    make_script, driver = SCENARIOS[name]
    outbox = Outbox()
    from ..agent.session import SessionConfig

    rt = Runtime(
        model=FunctionModel(make_script(speed), name=f"demo-{name}"),
        session_config=SessionConfig(system_prompt=DEMO_SYSTEM_PROMPT),
        observer=observer,  # type: ignore[arg-type]
        outbox=outbox,
        with_timers=False,
        workdir=workdir,
        store_path=store_path,
    )
    async with rt:
        with anyio.fail_after(time_limit):
            await driver(rt)
            await rt.wait_idle()
    return ScenarioResult(name=name, runtime=rt, sent=outbox.sent)
