"""The console's routes do what the terminal console does: text to the agent, Stop as an
interrupt, answers to the approvals, cancellations to tasks and timers; a real runtime behind."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Annotated

import anyio
import httpx2
import pytest
from pydantic import Field
from web_harness import ORIGIN, TOKEN, new_runtime, web_console

from wakeful.events import Event
from wakeful.models import ScriptedModel, call, say, use
from wakeful.tools.spec import Tool, ToolContext, tool
from wakeful.web import ConsoleAuth, WebConsole, serve_console
from wakeful.web.auth import COOKIE

pytestmark = pytest.mark.anyio


async def wait_until(predicate: Callable[[], object]) -> None:
    """Wait for a state the runtime shows but does not signal."""
    with anyio.fail_after(5):
        while not predicate():  # noqa: ASYNC110 - polling an observable state in a test
            await anyio.sleep(0.005)


async def stored(console_runtime: object) -> list[Event]:
    store = console_runtime.store
    return [s.event for s in await store.recent_events(limit=100)]


async def test_a_message_goes_to_the_agent_and_its_reply_is_listed(tmp_path: Path) -> None:
    model = ScriptedModel([use(call("reply_to_user", text="Hello <b>you</b>")), say("")])
    async with web_console(model, tmp_path) as console:
        console.client.cookies.set(COOKIE, TOKEN)
        sent = await console.client.post("/api/send", json={"text": "hi"}, headers=console.csrf)
        assert sent.status_code == 200
        await console.runtime.wait_idle()
        page = (await console.client.get("/api/messages")).json()
        assert page["earlier"] is None
        assert [(m["role"], m["text"]) for m in page["messages"]] == [
            ("user", "hi"),
            ("agent", "Hello <b>you</b>"),  # text, shown with textContent by the page
        ]
        [event] = await stored(console.runtime)
        assert (event.kind, event.content, event.channel) == ("user.input", "hi", "web")
        trajectory = (await console.client.get("/api/trajectory")).json()
        roles = [m["role"] for m in trajectory]
        assert "user" in roles and "tool" in roles
        [reply_call] = next(m for m in trajectory if m.get("tool_calls"))["tool_calls"]
        assert reply_call["name"] == "reply_to_user"
        assert [m["status"] for m in trajectory if m["role"] == "tool"] == ["ok"]


async def test_bad_messages_are_refused_with_the_fix(tmp_path: Path) -> None:
    async with web_console(ScriptedModel([]), tmp_path) as console:
        console.client.cookies.set(COOKIE, TOKEN)
        for body in ({}, {"text": "  "}, {"text": 42}):
            response = await console.client.post("/api/send", json=body, headers=console.csrf)
            assert response.status_code == 400
            assert '"text"' in response.json()["error"]
        garbage = await console.client.post("/api/send", content=b"{", headers=console.csrf)
        assert garbage.status_code == 400
        huge = await console.client.post(
            "/api/send", json={"text": "x" * 100_001}, headers=console.csrf
        )
        assert huge.status_code == 400 and "limit is 100000" in huge.json()["error"]
        assert await stored(console.runtime) == []


def slow_build(may_finish: anyio.Event) -> Tool:
    @tool(run_mode="background")
    async def build(
        ctx: ToolContext, target: Annotated[str, Field(description="What to build, e.g. 'docs'")]
    ) -> str:
        """Build a target in the background; it reports 40%, then waits for the test."""
        await ctx.progress(40, "halfway")
        await may_finish.wait()
        return f"{target} built"

    return build


async def test_stop_interrupts_and_a_background_task_is_listed_and_cancelled(
    tmp_path: Path,
) -> None:
    may_finish = anyio.Event()
    model = ScriptedModel([use(call("build", target="docs")), say(""), say(""), say("")])
    async with web_console(model, tmp_path, slow_build(may_finish)) as console:
        console.client.cookies.set(COOKIE, TOKEN)
        await console.client.post("/api/send", json={"text": "build"}, headers=console.csrf)
        await wait_until(lambda: console.runtime.tasks.list("main"))
        await wait_until(lambda: console.runtime.tasks.list("main")[0].percent == 40)
        state = (await console.client.get("/api/state")).json()
        [task] = state["tasks"]
        assert (task["tool"], task["state"], task["percent"]) == ("build", "running", 40)
        cancelled = await console.client.post(
            f"/api/tasks/{task['id']}/cancel", headers=console.csrf
        )
        assert cancelled.status_code == 200
        await wait_until(lambda: console.runtime.tasks.list("main")[0].done)
        again = await console.client.post(f"/api/tasks/{task['id']}/cancel", headers=console.csrf)
        assert again.status_code == 404 and "No running task" in again.json()["error"]
        stop = await console.client.post("/api/stop", json={}, headers=console.csrf)
        assert stop.status_code == 200
        await console.runtime.wait_idle()
        kinds = [e.kind for e in await stored(console.runtime)]
        assert "user.interrupt" in kinds


async def test_a_call_waiting_for_approval_is_listed_and_approved(tmp_path: Path) -> None:
    from wakeful.toolkits.execution.run_shell import run_shell

    (tmp_path / "src").mkdir()
    model = ScriptedModel([use(call("run_shell", command="rm -rf src")), say("")])
    async with web_console(model, tmp_path, run_shell) as console:
        console.client.cookies.set(COOKIE, TOKEN)
        await console.client.post("/api/send", json={"text": "clean"}, headers=console.csrf)
        approvals = console.runtime.approvals
        assert approvals is not None
        await wait_until(lambda: approvals.pending("main"))
        [waiting] = (await console.client.get("/api/state")).json()["approvals"]
        assert waiting["tool"] == "run_shell" and "rm -rf src" in waiting["summary"]
        wrong = await console.client.post(
            "/api/approvals/nope", json={"approve": True}, headers=console.csrf
        )
        assert wrong.status_code == 404
        answer = await console.client.post(
            f"/api/approvals/{waiting['id']}",
            json={"approve": True, "reason": "fine"},
            headers=console.csrf,
        )
        assert answer.json() == {"answered": waiting["id"], "approved": True}
        await console.runtime.wait_idle()
    assert not (tmp_path / "src").exists()


async def test_a_denied_call_does_not_run(tmp_path: Path) -> None:
    from wakeful.toolkits.execution.run_shell import run_shell

    (tmp_path / "src").mkdir()
    model = ScriptedModel([use(call("run_shell", command="rm -rf src")), say("")])
    async with web_console(model, tmp_path, run_shell) as console:
        console.client.cookies.set(COOKIE, TOKEN)
        await console.client.post("/api/send", json={"text": "clean"}, headers=console.csrf)
        approvals = console.runtime.approvals
        assert approvals is not None
        await wait_until(lambda: approvals.pending("main"))
        [waiting] = approvals.pending("main")
        await console.client.post(
            f"/api/approvals/{waiting.id}",
            json={"approve": False, "reason": "keep it"},
            headers=console.csrf,
        )
        await console.runtime.wait_idle()
        session = console.runtime.sessions["main"]
        results = [m.content for m in session.trajectory.messages if m.role == "tool"]
    assert (tmp_path / "src").exists()
    assert any("keep it" in r for r in results)


async def test_a_card_button_press_becomes_a_user_action_event(tmp_path: Path) -> None:
    async with web_console(ScriptedModel([say(""), say("")]), tmp_path) as console:
        console.client.cookies.set(COOKIE, TOKEN)
        pressed = await console.client.post(
            "/api/action",
            json={"card_id": "c1", "action_id": "approve", "message_id": "m1"},
            headers=console.csrf,
        )
        assert pressed.status_code == 200
        missing = await console.client.post(
            "/api/action", json={"card_id": "c1"}, headers=console.csrf
        )
        assert missing.status_code == 400 and "action_id" in missing.json()["error"]
        await console.runtime.wait_idle()
        [event] = await stored(console.runtime)
        assert event.kind == "user.action"
        assert event.content == {"card_id": "c1", "action_id": "approve", "message_id": "m1"}


async def test_the_event_stream_pushes_the_agents_message_over_a_real_socket(
    tmp_path: Path,
) -> None:
    model = ScriptedModel([use(call("reply_to_user", text="pushed")), say("")])
    async with new_runtime(model, tmp_path) as rt, anyio.create_task_group() as tg:
        auth = ConsoleAuth.for_address(TOKEN, "127.0.0.1", 0)
        web = WebConsole(rt, auth)
        port = await tg.start(serve_console, web, "127.0.0.1", 0)
        origin = f"http://127.0.0.1:{port}"
        headers = {"authorization": f"Bearer {TOKEN}"}
        async with (
            httpx2.AsyncClient(base_url=origin, headers=headers) as client,
            client.stream("GET", "/events") as stream,
        ):
            assert stream.status_code == 200
            assert stream.headers["content-type"].startswith("text/event-stream")
            lines = stream.aiter_lines()
            assert await anext(lines) == ": connected"
            csrf = {"origin": origin, "x-csrf-token": web.auth.csrf_token}
            await client.post("/api/send", json={"text": "go"}, headers=csrf)
            with anyio.fail_after(5):
                received = [line async for line in _until_agent(lines)]
            assert web.feed.subscribers == 1
        # The page went away: its subscription ends with the response.
        await wait_until(lambda: web.feed.subscribers == 0)
        tg.cancel_scope.cancel()
    [data] = [json.loads(line[6:]) for line in received if line.startswith("data: ")][-1:]
    assert data["role"] == "agent" and data["text"] == "pushed"


async def _until_agent(lines: AsyncIterator[str]) -> AsyncIterator[str]:
    async for line in lines:
        yield line
        if line.startswith("data: ") and '"role": "agent"' in line:
            return


async def test_reading_the_chat_marks_messages_read_everywhere(tmp_path: Path) -> None:
    async with web_console(ScriptedModel([]), tmp_path) as console:
        console.client.cookies.set(COOKIE, TOKEN)
        outbox = console.runtime.outbox
        first = await outbox.send("main", "one")
        second = await outbox.send("main", "two")
        await outbox.send("other", "elsewhere")
        assert (await console.client.get("/api/state")).json()["unread"] == 2
        listed = (await console.client.get("/api/messages")).json()["messages"]
        assert [(m["id"], m["read"]) for m in listed] == [(first.id, False), (second.id, False)]
        read = await console.client.post(
            "/api/read", json={"through": first.id}, headers=console.csrf
        )
        assert read.json() == {"read": [first.id], "unread": 1}
        stored = await outbox.messages.get(first.id)
        assert stored is not None and stored.read_on == "console"
        await console.client.post("/api/read", json={"through": second.id}, headers=console.csrf)
        assert (await console.client.get("/api/state")).json()["unread"] == 0
        assert await outbox.messages.unread_count("other") == 1
        bad = await console.client.post("/api/read", json={}, headers=console.csrf)
        assert bad.status_code == 400 and "through" in bad.json()["error"]
        for through in ("msg_unknown", first.id):  # unknown, or of another session
            unknown = await console.client.post(
                "/api/read", json={"through": through, "session": "other"}, headers=console.csrf
            )
            assert unknown.status_code == 404
            assert f"No message {through!r} of session 'other'" in unknown.json()["error"]
        assert await outbox.messages.unread_count("other") == 1


async def test_an_input_request_is_answered_or_declined(tmp_path: Path) -> None:
    async with web_console(ScriptedModel([]), tmp_path) as console:
        console.client.cookies.set(COOKIE, TOKEN)
        approvals = console.runtime.approvals
        assert approvals is not None
        outcomes: list[object] = []

        async def ask(message: str) -> None:
            outcomes.append(
                await approvals.ask_input(
                    "main",
                    asker="MCP server 'booking'",
                    call="book",
                    message=message,
                    url="https://booking.example/confirm",
                )
            )

        async with anyio.create_task_group() as tg:
            tg.start_soon(ask, "open the page")
            await wait_until(lambda: approvals.pending_inputs("main"))
            [asked] = (await console.client.get("/api/state")).json()["inputs"]
            assert "MCP server 'booking'" in asked["question"]
            answer = await console.client.post(
                f"/api/inputs/{asked['id']}", json={"answer": ""}, headers=console.csrf
            )
            assert answer.json()["accepted"] is True
            await wait_until(lambda: outcomes)
            tg.start_soon(ask, "again")
            await wait_until(lambda: approvals.pending_inputs("main"))
            [again] = approvals.pending_inputs("main")
            declined = await console.client.post(
                f"/api/inputs/{again.id}",
                json={"decline": True, "reason": "not now"},
                headers=console.csrf,
            )
            assert declined.json() == {"declined": again.id}
            await wait_until(lambda: len(outcomes) == 2)
        assert [o.action for o in outcomes] == ["accept", "decline"]
        assert "not now" in outcomes[1].reason
        missing = await console.client.post(
            "/api/inputs/ffff", json={"decline": True}, headers=console.csrf
        )
        assert missing.status_code == 404


async def test_a_timer_is_listed_and_cancelled(tmp_path: Path) -> None:
    from wakeful.runtime import Runtime

    rt = Runtime(model=ScriptedModel([]), with_core_tools=False, store_path=tmp_path / "w.db")
    async with rt:
        assert rt.timers is not None
        timer = await rt.timers.set_timer(session="main", note="water", delay_seconds=3600)
        web = WebConsole(rt, ConsoleAuth.for_address(TOKEN, "127.0.0.1", 8787))
        transport = httpx2.ASGITransport(app=web.app)
        async with httpx2.AsyncClient(transport=transport, base_url=ORIGIN) as client:
            client.cookies.set(COOKIE, TOKEN)
            headers = {"origin": ORIGIN, "x-csrf-token": web.auth.csrf_token}
            [listed] = (await client.get("/api/state")).json()["timers"]
            assert (listed["id"], listed["note"]) == (timer.id, "water")
            done = await client.post(f"/api/timers/{timer.id}/cancel", headers=headers)
            assert done.json() == {"cancelled": timer.id}
            assert rt.timers.list_timers("main") == []
            again = await client.post(f"/api/timers/{timer.id}/cancel", headers=headers)
            assert again.status_code == 404 and "No active timer" in again.json()["error"]


def test_the_consoles_socket_names_tcp_so_responses_are_not_held_back() -> None:
    # asyncio sets TCP_NODELAY only on sockets whose protocol is IPPROTO_TCP (accepted ones
    # inherit it); with 0, Nagle's algorithm held each small response ~40 ms. The timing itself
    # is in bench/web_console.py ("paging back": /api/messages/<id>).
    from wakeful.web.app import _listen

    listener = _listen("127.0.0.1", 0)
    try:
        assert listener.proto == socket.IPPROTO_TCP
    finally:
        listener.close()
