"""The console in a real browser: Debian's headless Chromium driven by playwright, against a
real runtime and server on 127.0.0.1; only the model is scripted. Screenshots of each step are
left in the test's tmp directory for a person to look at."""

from __future__ import annotations

import json
import shutil
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any

import anyio
import pytest
from pydantic import Field
from web_harness import TOKEN, new_runtime

from wakeful.messages import Message, ToolMessage, UserMessage
from wakeful.models import FunctionModel, call, say, use
from wakeful.models.scripted import Turn
from wakeful.runtime import Runtime
from wakeful.tools.spec import ToolDefinition, tool
from wakeful.web import ConsoleAuth, WebConsole, serve_console

CHROMIUM = "/usr/bin/chromium"
playwright_api = pytest.importorskip("playwright.async_api")

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which(CHROMIUM) is None,
        reason="Debian's chromium is missing: sudo apt-get install -y chromium",
    ),
]

SCRIPT_IN_CARD = (
    "<p id='body'>a generated page</p>"
    "<script>document.body.textContent = 'SCRIPT RAN ' + document.cookie;"
    "parent.document.title = 'pwned';</script>"
    "<img src='http://127.0.0.1:9/leak.png'>"
)


def agent(messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> Turn:
    """Replies to what the user said last; after a tool result, says nothing more."""
    last = messages[-1]
    if isinstance(last, ToolMessage):
        return say("")
    text = last.content if isinstance(last, UserMessage) else ""
    if "clean" in text:
        return use(call("run_shell", command="rm -rf src"))
    if "deploy" in text:
        return use(call("reply_to_user", text="You pressed deploy."))
    return use(call("reply_to_user", text="Hi from the agent <b>not bold</b>"))


@asynccontextmanager
async def served(tmp_path: Path) -> AsyncIterator[tuple[Runtime, str]]:
    from wakeful.toolkits.execution.run_shell import run_shell

    runtime = new_runtime(FunctionModel(agent), tmp_path, run_shell)
    async with runtime as rt, anyio.create_task_group() as tg:
        web = WebConsole(rt, ConsoleAuth.for_address(TOKEN, "127.0.0.1", 0))
        port = await tg.start(serve_console, web, "127.0.0.1", 0)
        yield rt, f"http://127.0.0.1:{port}"
        tg.cancel_scope.cancel()


async def stored_kinds(rt: Runtime) -> list[str]:
    assert rt.store is not None
    return [s.event.kind for s in await rt.store.recent_events(limit=100)]


async def wait_until(predicate: Callable[[], Any]) -> None:
    with anyio.fail_after(10):
        while not await predicate():  # noqa: ASYNC110 - polling what the runtime shows
            await anyio.sleep(0.02)


async def test_chat_card_stop_and_approval_in_chromium(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    shots = tmp_path / "screenshots"
    async with served(tmp_path) as (rt, base), playwright_api.async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = await browser.new_page()
            errors: list[str] = []
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            failed: list[str] = []
            page.on("response", lambda r: failed.append(r.url) if r.status >= 400 else None)
            await page.goto(f"{base}/?token={TOKEN}")
            assert page.url == base + "/"  # the token left the address bar
            await page.wait_for_selector("#live:text('live')")

            # Chat: a line typed and sent with Enter; the agent's reply arrives by SSE.
            await page.fill("#text", "hello")
            await page.press("#text", "Enter")
            reply = page.locator("#chat li.agent", has_text="Hi from the agent")
            await reply.wait_for()
            assert await reply.locator(".text").inner_text() == "Hi from the agent <b>not bold</b>"
            assert await page.locator("#chat li.user .text").inner_text() == "hello"
            await page.screenshot(path=shots / "1-chat.png", full_page=True)

            # A card with buttons and a generated page whose script must not run.
            card = {
                "title": "Release 1.2",
                "fields": [{"label": "Tests", "value": "green"}],
                "actions": [{"id": "deploy", "label": "Deploy"}],
                "html": SCRIPT_IN_CARD,
            }
            message = await rt.outbox.send("main", "Ready to deploy?", kind="card", card=card)
            await page.locator(".card h3", has_text="Release 1.2").wait_for()
            frame = page.frame_locator(".card iframe")
            assert await frame.locator("body").inner_text() == "a generated page"
            assert await page.title() == "wakeful console"
            assert await page.locator(".card iframe").get_attribute("sandbox") == ""
            await page.screenshot(path=shots / "2-card.png", full_page=True)
            await page.get_by_role("button", name="Deploy").click()
            await page.locator("#chat li.agent", has_text="You pressed deploy.").wait_for()
            assert rt.store is not None
            actions = [
                s.event.content
                for s in await rt.store.recent_events(limit=100)
                if s.event.kind == "user.action"
            ]
            assert actions == [
                {"card_id": message.id, "action_id": "deploy", "message_id": message.id}
            ]
            # What the page showed is read, on every channel.
            stored = await rt.outbox.messages.get(message.id)
            assert stored is not None and stored.read and stored.read_on == "console"

            # Stop sends the interrupt.
            await page.click("#stop")
            await wait_until(lambda: _has(rt, "user.interrupt"))

            # A call waiting for approval is listed and approved from the page.
            await page.fill("#text", "clean the build")
            await page.press("#text", "Enter")
            approval = page.locator("#approvals li.approval", has_text="rm -rf src")
            await approval.wait_for()
            await page.screenshot(path=shots / "3-approval.png", full_page=True)
            await approval.get_by_role("button", name="Approve").click()
            await wait_until(lambda: _gone(tmp_path / "src"))
            await page.locator("#approvals li", has_text="Nothing waits for you").wait_for()

            # The trajectory, read-only, with tool calls and their status.
            await page.click("#show-trajectory")
            await page.locator("#trajectory li", has_text="tool run_shell [ok]").wait_for()
            await page.screenshot(path=shots / "4-trajectory.png", full_page=True)
            # The browser itself says why the card's page did nothing: no script in a sandboxed
            # frame, no image from elsewhere under the console's CSP.
            assert any("sandboxed" in e and "allow-scripts" in e for e in errors), errors
            assert any("leak.png" in e and "Content Security Policy" in e for e in errors)
            others = [e for e in errors if "sandboxed" not in e and "leak.png" not in e]
            assert others == [], json.dumps(errors)
            assert failed == []
        finally:
            await browser.close()
    assert sorted(p.name for p in shots.iterdir()) == [
        "1-chat.png",
        "2-card.png",
        "3-approval.png",
        "4-trajectory.png",
    ]


async def _has(rt: Runtime, kind: str) -> bool:
    return kind in await stored_kinds(rt)


async def _gone(path: Path) -> bool:
    return not await anyio.Path(path).exists()


@tool
async def wait_seconds(
    seconds: Annotated[float, Field(ge=0, description="How long to wait, e.g. 0.5")],
) -> str:
    """Wait, then say how long it waited."""
    await anyio.sleep(seconds)
    return f"waited {seconds}s"


def busy_agent(messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> Turn:
    """Works a while on the first request; answers anything else by quoting it."""
    last = messages[-1]
    if isinstance(last, ToolMessage):
        return say("")
    text = last.content if isinstance(last, UserMessage) else ""
    if "first" in text:
        return use(call("wait_seconds", seconds=1.0))
    return use(call("reply_to_user", text=f"got: {text}"))


async def test_typing_while_a_tool_runs_and_the_unread_badge(tmp_path: Path) -> None:
    rt = new_runtime(FunctionModel(busy_agent), tmp_path, wait_seconds)
    async with rt, anyio.create_task_group() as tg:
        web = WebConsole(rt, ConsoleAuth.for_address(TOKEN, "127.0.0.1", 0))
        port = await tg.start(serve_console, web, "127.0.0.1", 0)
        try:
            # The server is cancelled only after playwright is closed: an await in a cancelled
            # scope would replace a failing assertion by a cancellation that the scope then
            # swallows, and the test would pass (once, 30 s late: a reply's wait timed out).
            async with playwright_api.async_playwright() as pw:
                await _type_while_a_tool_runs(rt, port, pw, tmp_path)
        finally:
            tg.cancel_scope.cancel()


async def _type_while_a_tool_runs(rt: Runtime, port: int, pw: Any, tmp_path: Path) -> None:
    # Two messages wait unread before the page is opened.
    early = [await rt.outbox.send("main", f"while you were away {i}") for i in (1, 2)]
    assert await rt.outbox.messages.unread_count("main") == 2
    browser = await pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
    try:
        page = await browser.new_page()
        await page.goto(f"http://127.0.0.1:{port}/?token={TOKEN}")
        await page.locator("#chat li.agent", has_text="while you were away 2").wait_for()
        # Shown in a page in front of the person: read, and the badge stays away.
        await wait_until(lambda: _unread(rt, 0))
        # The page hides its badge once the server answered its read report.
        await page.locator("#unread").wait_for(state="hidden", timeout=10_000)
        for message in early:
            stored = await rt.outbox.messages.get(message.id)
            assert stored is not None and stored.read_on == "console"

        await page.fill("#text", "first, take your time")
        await page.press("#text", "Enter")
        await wait_until(lambda: _running(rt))
        await page.fill("#text", "second, meanwhile")  # typed while the tool runs
        await page.press("#text", "Enter")
        await page.locator("#chat li.agent", has_text="got: second, meanwhile").wait_for()
        with anyio.fail_after(10):
            await rt.wait_idle()
        trajectory = rt.sessions["main"].trajectory.messages
        waited = [m for m in trajectory if isinstance(m, ToolMessage) and m.name == "wait_seconds"]
        assert [m.status for m in waited] == ["ok"]  # the typing did not cut the tool off
        await page.screenshot(path=tmp_path / "typing-while-working.png", full_page=True)
    finally:
        await browser.close()


async def _unread(rt: Runtime, count: int) -> bool:
    return await rt.outbox.messages.unread_count("main") == count


async def _running(rt: Runtime) -> bool:
    return any(not t.done for t in rt.tasks.list("main", background_only=False))
