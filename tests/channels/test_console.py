"""The console channel driven in-process: typed lines in, the agent's messages out.

Lines come from an `io.StringIO` where their timing does not matter, and from a real OS pipe
where the test has to type while the agent works (a `/stop` while a tool runs). The runtime is
real, with a real SQLite store whose events show what the channel submitted; only the model is
scripted.
"""

from __future__ import annotations

import io
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated

import anyio
import pytest
from pydantic import Field
from rich.console import Console
from rich.text import Text

from wakeful.channels.console import HELP, UNSENT_LABEL, ConsoleChannel, ConsoleObserver
from wakeful.messages import ToolMessage
from wakeful.models import FunctionModel, ScriptedModel, call, say, use
from wakeful.models.base import Model
from wakeful.runtime import Runtime
from wakeful.toolkits.comms.reply import reply_to_user
from wakeful.tools.spec import Tool, ToolContext, tool

pytestmark = pytest.mark.anyio


@tool
async def wait_seconds(
    seconds: Annotated[float, Field(ge=0, description="How long to wait, e.g. 0.5")],
) -> str:
    """Wait, then say how long it waited."""
    await anyio.sleep(seconds)
    return f"waited {seconds}s"


def build_tool(may_finish: anyio.Event) -> Tool:
    @tool(run_mode="background")
    async def build(
        ctx: ToolContext, target: Annotated[str, Field(description="What to build, e.g. 'docs'")]
    ) -> str:
        """Build a target in the background; it reports 40%, then waits for the test."""
        await ctx.progress(40, "halfway")
        await may_finish.wait()
        return f"{target} built"

    return build


def runtime(
    model: Model, tmp_path: Path, *tools: Tool, observer: ConsoleObserver | None = None
) -> Runtime:
    return Runtime(
        model=model,
        tools=[reply_to_user, wait_seconds, *tools],
        with_core_tools=False,
        with_timers=False,
        store_path=tmp_path / "wakeful.db",
        observer=observer,
    )


def screen() -> Console:
    return Console(file=io.StringIO(), width=200, highlight=False)


def printed(console: Console) -> str:
    assert isinstance(console.file, io.StringIO)
    return console.file.getvalue()


async def stored_events(rt: Runtime) -> list[tuple[str, str, str]]:
    """(kind, content, status) of every stored event, in arrival order."""
    assert rt.store is not None
    return [(s.event.kind, s.event.text, s.status) for s in await rt.store.recent_events(limit=100)]


async def wait_until(predicate: Callable[[], object]) -> None:
    """Wait for a state the runtime shows but does not signal (output printed, a phase)."""
    with anyio.fail_after(5):
        while not predicate():  # noqa: ASYNC110 - polling an observable state in a test
            await anyio.sleep(0.005)


@asynccontextmanager
async def typing_into(
    channel_of: Callable[[io.TextIOWrapper], ConsoleChannel],
) -> AsyncIterator[Callable[[str], None]]:
    """Run a console channel on a real pipe; yield a function that types one line into it.

    Leaving the block closes the pipe (end of input), and waits for the channel to finish.
    """
    read_fd, write_fd = os.pipe()
    with (
        os.fdopen(read_fd, "r", encoding="utf-8") as reader,
        os.fdopen(write_fd, "w", encoding="utf-8") as writer,
    ):

        def type_line(line: str) -> None:
            writer.write(line + "\n")
            writer.flush()

        channel = channel_of(reader)
        async with anyio.create_task_group() as tg:
            tg.start_soon(channel.run)
            try:
                yield type_line
            finally:
                writer.close()


async def test_a_typed_line_becomes_user_input_and_the_reply_is_printed(tmp_path: Path) -> None:
    console = screen()
    model = ScriptedModel([use(call("reply_to_user", text="Hi there [friend]")), say("")])
    async with runtime(model, tmp_path) as rt:
        with anyio.fail_after(5):
            await ConsoleChannel(rt, stream=io.StringIO("hello\n"), console=console).run()
        # End of piped input waits for the agent, so the answer is already there.
        assert "wakeful> Hi there [friend]" in printed(console)
        assert await stored_events(rt) == [("user.input", "hello", "consumed")]
        assert rt.store is not None
        [stored] = await rt.store.recent_events()
        assert stored.event.channel == "console" and stored.event.source.type == "user"


async def test_blank_lines_are_ignored_and_quit_leaves_without_reading_further(
    tmp_path: Path,
) -> None:
    console = screen()
    stream = io.StringIO("\n   \n\t\nhello\r\n/quit\nafter quit\n")
    async with runtime(ScriptedModel([say("")]), tmp_path) as rt:
        with anyio.fail_after(5):
            await ConsoleChannel(rt, stream=stream, console=console).run()
            await rt.wait_idle()
        assert await stored_events(rt) == [("user.input", "hello", "consumed")]
        assert stream.readline() == "after quit\n"  # /quit stopped the reading there
        assert printed(console) == ""  # not a terminal: no help banner, nothing to say


async def test_stop_while_a_tool_runs_sends_an_interrupt_that_cancels_the_tool(
    tmp_path: Path,
) -> None:
    console = screen()
    model = ScriptedModel(
        [
            use(call("wait_seconds", seconds=30)),
            use(call("reply_to_user", text="Stopped.")),
            say(""),
        ]
    )
    async with runtime(model, tmp_path) as rt:
        with anyio.fail_after(5):
            async with typing_into(
                lambda stream: ConsoleChannel(rt, stream=stream, console=console)
            ) as type_line:
                type_line("wait for a long time")
                await wait_until(
                    lambda: "main" in rt.sessions and rt.sessions["main"].phase == "tools"
                )
                type_line("/stop   enough waiting")
        messages = rt.sessions["main"].trajectory.messages
        [result] = [m for m in messages if isinstance(m, ToolMessage) and m.name == "wait_seconds"]
        assert result.status == "cancelled"
        assert await stored_events(rt) == [
            ("user.input", "wait for a long time", "consumed"),
            ("user.interrupt", "enough waiting", "consumed"),
        ]
        assert "wakeful> Stopped." in printed(console)


async def test_tasks_lists_the_running_background_task_with_its_progress(tmp_path: Path) -> None:
    console = screen()
    model = ScriptedModel(
        [
            use(call("build", target="docs")),
            say(""),
            use(call("reply_to_user", text="The docs are built.")),
            say(""),
        ]
    )
    may_finish = anyio.Event()
    async with runtime(model, tmp_path, build_tool(may_finish)) as rt:
        with anyio.fail_after(5):
            async with typing_into(
                lambda stream: ConsoleChannel(rt, stream=stream, console=console)
            ) as type_line:
                type_line("/tasks")
                await wait_until(lambda: "No tasks." in printed(console))
                type_line("build the docs")
                await wait_until(lambda: any(t.percent == 40 for t in rt.tasks.list("main")))
                type_line("/tasks")
                await wait_until(lambda: "40%" in printed(console))
                may_finish.set()
                # Wait for the report before ending the input: Runtime.is_idle() is briefly true
                # between a background task's end and the arrival of its tool.result event.
                await wait_until(lambda: "The docs are built." in printed(console))
        [task] = rt.tasks.list("main")
        lines = printed(console).splitlines()
        assert lines[0] == "No tasks."
        assert lines[1].startswith(f"{task.id} running 40% build ")
        assert "target" in lines[1] and "docs" in lines[1]
        assert lines[2] == "wakeful> The docs are built."
        assert task.state == "completed"


async def test_an_unknown_command_is_refused_with_a_hint_and_never_sent(tmp_path: Path) -> None:
    console = screen()
    stream = io.StringIO("/x\n/stopnow\n/HELP\n/etc/hosts is empty?\n//quit is a word\n")
    async with runtime(FunctionModel(lambda messages, tools: say("")), tmp_path) as rt:
        with anyio.fail_after(5):
            await ConsoleChannel(rt, stream=stream, console=console).run()
        output = printed(console)
        assert (
            "Unknown command /x; /help lists the commands (/help, /quit, /stop, /tasks, /approvals"
            in output
        )
        assert "start the line with //" in output
        assert "Unknown command /stopnow;" in output  # not a stop with the reason "now"
        assert HELP.split(".")[0] in output  # /HELP: commands ignore case
        # A path is text, and // sends a line that starts with a slash as text.
        kinds_and_texts = [(kind, text) for kind, text, _ in await stored_events(rt)]
        assert kinds_and_texts == [
            ("user.input", "/etc/hosts is empty?"),
            ("user.input", "/quit is a word"),
        ]


async def test_only_this_sessions_messages_are_printed_and_urgent_ones_stand_out(
    tmp_path: Path,
) -> None:
    console = Console(file=io.StringIO(), width=200, force_terminal=True, color_system="standard")
    async with runtime(ScriptedModel([]), tmp_path) as rt:
        channel = ConsoleChannel(rt, session="work", stream=io.StringIO(""), console=console)
        await rt.outbox.send("main", "for another window")
        await rt.outbox.send("work", "the build failed", urgency="high")
        await rt.outbox.send("work", "side answer", parallel=True)
        await channel.run()
    output = printed(console)
    assert "for another window" not in output
    assert "\x1b[1;31mwakeful>\x1b[0m the build failed" in output  # bold red
    assert "wakeful (in parallel)> side answer" in Text.from_ansi(output).plain


async def test_a_call_waiting_for_approval_is_listed_and_answered_from_the_console(
    tmp_path: Path,
) -> None:
    from wakeful.toolkits.execution.run_shell import run_shell

    (tmp_path / "src").mkdir()
    console = screen()
    model = ScriptedModel([use(call("run_shell", command="rm -rf src")), say("")])
    rt = Runtime(
        model=model,
        tools=[run_shell],
        with_core_tools=False,
        with_timers=False,
        workdir=tmp_path,
        store_path=tmp_path / "wakeful.db",
    )
    async with rt:

        def channel(stream: io.TextIOWrapper) -> ConsoleChannel:
            return ConsoleChannel(rt, stream=stream, console=console)

        async with typing_into(channel) as type_line:
            type_line("clean the build directory")
            await wait_until(lambda: "Approval needed" in printed(console))
            type_line("/approvals")
            await wait_until(lambda: "rm -rf src" in printed(console).split("/approve")[-1])
            assert rt.approvals is not None
            (request,) = rt.approvals.pending("main")
            type_line("/approve nope")
            await wait_until(lambda: "No call is waiting with id nope" in printed(console))
            type_line(f"/approve {request.id}")
            await wait_until(lambda: f"Approved {request.id}" in printed(console))
        await rt.wait_idle()
        events = [kind for kind, _, _ in await stored_events(rt)]
    assert not (tmp_path / "src").exists()
    assert events == ["user.input"]  # the answers went to the approvals, not to the agent


@pytest.mark.parametrize("verbose", [True, False])
async def test_an_answer_in_plain_text_is_shown_marked_as_not_sent(
    tmp_path: Path, verbose: bool
) -> None:
    # A model that never calls reply_to_user, as small local models often do.
    console = screen()
    model = FunctionModel(lambda messages, tools: say("The answer is [42]."))
    observer = ConsoleObserver(console, verbose=verbose)
    async with runtime(model, tmp_path, observer=observer) as rt:
        with anyio.fail_after(5):
            await ConsoleChannel(rt, stream=io.StringIO("what is it?\n"), console=console).run()
        assert rt.outbox.sent == []  # nothing was sent: send_assistant_text is off
    assert printed(console) == f"{UNSENT_LABEL} The answer is [42].\n"


async def test_plain_text_the_runtime_sends_is_printed_once(tmp_path: Path) -> None:
    from wakeful.agent.session import SessionConfig

    console = screen()
    rt = Runtime(
        model=ScriptedModel([say("Sent as it is.")]),
        tools=[reply_to_user],
        with_core_tools=False,
        with_timers=False,
        store_path=tmp_path / "wakeful.db",
        session_config=SessionConfig(send_assistant_text=True),
        observer=ConsoleObserver(console, assistant_text_sent=True),
    )
    async with rt:
        with anyio.fail_after(5):
            await ConsoleChannel(rt, stream=io.StringIO("hello\n"), console=console).run()
    assert printed(console) == "wakeful> Sent as it is.\n"


async def test_text_beside_tool_calls_is_shown_dimmed_only_when_verbose(tmp_path: Path) -> None:
    console = screen()
    model = ScriptedModel(
        [
            use(call("wait_seconds", seconds=0), text="Let me wait a moment."),
            use(call("reply_to_user", text="Done.")),
            say(""),
        ]
    )
    async with runtime(model, tmp_path, observer=ConsoleObserver(console)) as rt:
        with anyio.fail_after(5):
            await ConsoleChannel(rt, stream=io.StringIO("wait\n"), console=console).run()
    lines = printed(console).splitlines()
    assert lines[0] == "  Let me wait a moment."
    assert lines[-1] == "wakeful> Done."
    assert UNSENT_LABEL not in printed(console)


class Terminal(io.StringIO):
    """Typed lines that look as if they came from a terminal, so the banner is shown."""

    def isatty(self) -> bool:
        return True


async def test_the_banner_and_help_show_bracketed_words_as_written(tmp_path: Path) -> None:
    console = Console(file=io.StringIO(), width=1000, highlight=False)
    async with runtime(ScriptedModel([]), tmp_path) as rt:
        with anyio.fail_after(5):
            await ConsoleChannel(rt, stream=Terminal("/help\n"), console=console).run()
    banner, again = printed(console).splitlines()
    assert banner == again == HELP
    assert "/stop [reason] interrupts" in banner


async def test_a_servers_request_for_input_is_shown_and_answered_from_the_console(
    tmp_path: Path,
) -> None:
    import sys

    from wakeful.mcp.config import MCPServerConfig

    script = Path(__file__).parent.parent / "mcp_servers" / "elicits.py"
    server = MCPServerConfig(name="bookings", command=[sys.executable, str(script)])
    console = screen()
    model = ScriptedModel([use(call("book_table", restaurant="Luigi's")), say("")])
    rt = Runtime(
        model=model,
        with_core_tools=False,
        with_timers=False,
        store_path=tmp_path / "wakeful.db",
        mcp_servers=[server],
    )
    async with rt:

        def channel(stream: io.TextIOWrapper) -> ConsoleChannel:
            return ConsoleChannel(rt, stream=stream, console=console)

        async with typing_into(channel) as type_line:
            type_line("book a table at Luigi's")
            await wait_until(lambda: "Input requested" in printed(console))
            assert rt.approvals is not None
            (request,) = rt.approvals.pending_inputs("main")
            question = printed(console)
            assert f"wakeful> Input requested [{request.id}] by MCP server 'bookings' for the" in (
                question
            )
            assert "MCP server 'bookings' asks this, not the agent." in question
            type_line("/approvals")
            await wait_until(lambda: printed(console).count("Input requested") == 2)
            type_line(f"/answer {request.id} date=2026-12-24 guests=many")
            await wait_until(lambda: "was not taken" in printed(console))
            assert "guests must be a whole number, not 'many'." in printed(console)
            type_line(f"/answer {request.id} date=2026-12-24 guests=4")
            await wait_until(lambda: f"Answered [{request.id}]" in printed(console))
        with anyio.fail_after(20):
            await rt.wait_idle()
        [result] = [
            m for m in rt.sessions["main"].trajectory.messages if isinstance(m, ToolMessage)
        ]
        events = [kind for kind, _, _ in await stored_events(rt)]
    assert result.content.startswith("Booked Luigi's on 2026-12-24 for 4 (indoor).")
    assert events == ["user.input"]  # the answers went to the request, not to the agent


async def test_a_servers_request_for_input_is_declined_from_the_console(tmp_path: Path) -> None:
    import sys

    from wakeful.mcp.config import MCPServerConfig

    script = Path(__file__).parent.parent / "mcp_servers" / "elicits.py"
    server = MCPServerConfig(name="bookings", command=[sys.executable, str(script)])
    console = screen()
    model = ScriptedModel([use(call("book_table", restaurant="Luigi's")), say("")])
    rt = Runtime(model=model, with_core_tools=False, with_timers=False, mcp_servers=[server])
    async with rt:

        def channel(stream: io.TextIOWrapper) -> ConsoleChannel:
            return ConsoleChannel(rt, stream=stream, console=console)

        async with typing_into(channel) as type_line:
            type_line("book a table at Luigi's")
            await wait_until(lambda: "Input requested" in printed(console))
            assert rt.approvals is not None
            (request,) = rt.approvals.pending_inputs("main")
            type_line("/decline nope")
            await wait_until(
                lambda: "No request for input is waiting with id nope" in printed(console)
            )
            type_line(f"/decline {request.id}")
            await wait_until(lambda: f"Declined {request.id}" in printed(console))
        with anyio.fail_after(20):
            await rt.wait_idle()
        [result] = [
            m for m in rt.sessions["main"].trajectory.messages if isinstance(m, ToolMessage)
        ]
    assert "Nothing was booked at Luigi's: the user's answer was decline." in result.content
