"""The console's chat in a real browser (Debian's headless Chromium, playwright): paging back
through stored messages, attachments as links and thumbnails, a message read on another channel
clearing its unread marks live, each message's deliveries. A real runtime, store and server on
127.0.0.1; only the model is scripted. Screenshots are left in the test's tmp directory."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from test_console_attachments import png
from web_harness import TOKEN, new_runtime

from wakeful.core.records import MessageAttachment, OutboundMessage
from wakeful.models import ScriptedModel
from wakeful.runtime import Runtime
from wakeful.web import ConsoleAuth, WebConsole, serve_console

CHROMIUM = "/usr/bin/chromium"
playwright_api = pytest.importorskip("playwright.async_api")
expect = playwright_api.expect

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which(CHROMIUM) is None,
        reason="Debian's chromium is missing: sudo apt-get install -y chromium",
    ),
]

# A page in a background tab: it shows messages but must not mark them read.
BACKGROUND_TAB = """
Object.defineProperty(document, "visibilityState", { get: () => "hidden" });
Object.defineProperty(document, "hidden", { get: () => true });
"""


@asynccontextmanager
async def browser_on_console(tmp_path: Path) -> AsyncIterator[tuple[Runtime, str, Any]]:
    """A runtime with its console on a free port, and headless Chromium.

    The server's task group is cancelled only after the browser and playwright are closed: an
    await in a cancelled scope raises a cancellation that would replace a failing assertion,
    and the scope would then swallow it, so the test would pass."""
    async with new_runtime(ScriptedModel([]), tmp_path) as rt, anyio.create_task_group() as tg:
        web = WebConsole(rt, ConsoleAuth.for_address(TOKEN, "127.0.0.1", 0))
        port = await tg.start(serve_console, web, "127.0.0.1", 0)
        try:
            async with playwright_api.async_playwright() as pw:
                browser = await pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
                try:
                    yield rt, f"http://127.0.0.1:{port}/?token={TOKEN}", browser
                finally:
                    await browser.close()
        finally:
            tg.cancel_scope.cancel()


async def test_load_earlier_messages_pages_back_to_the_first(tmp_path: Path) -> None:
    async with browser_on_console(tmp_path) as (rt, login, browser):
        for i in range(450):
            await rt.outbox.send("main", f"stored {i}")
        page = await browser.new_page()
        await page.goto(login)
        chat = page.locator("#chat li.agent")
        await page.locator("#chat li.agent", has_text="stored 449").wait_for()
        assert await chat.count() == 200
        assert await chat.first.locator(".text").inner_text() == "stored 250"
        # The page told the runtime the user is here.
        with anyio.fail_after(10):
            while rt.activity.last_channel != "console":  # noqa: ASYNC110 - the page's POST
                await anyio.sleep(0.02)
        earlier = page.get_by_role("button", name="Load earlier messages")
        await earlier.click()
        await expect(chat).to_have_count(400)
        assert await chat.first.locator(".text").inner_text() == "stored 50"
        await page.screenshot(path=tmp_path / "paging-400.png")
        await earlier.click()
        await expect(chat).to_have_count(450)
        texts = await chat.locator(".text").all_inner_texts()
        assert texts == [f"stored {i}" for i in range(450)]
        assert await earlier.is_hidden()  # nothing earlier is left
        # What the page showed in front of the person is read, the old pages included.
        assert await rt.outbox.messages.unread_count("main") == 0
        await page.screenshot(path=tmp_path / "paging-450.png")


async def test_attachments_are_links_and_images_thumbnails(tmp_path: Path) -> None:
    (tmp_path / "chart.png").write_bytes(png(40, 30))
    (tmp_path / "report.txt").write_text("all green\n", encoding="utf-8")
    async with browser_on_console(tmp_path) as (rt, login, browser):
        files = [
            MessageAttachment(str(tmp_path / "chart.png"), "chart.png", 100, "image/png"),
            MessageAttachment(str(tmp_path / "report.txt"), "report.txt", 10, "text/plain"),
        ]
        message = await rt.outbox.send("main", "This week's numbers.", attachments=files)
        page = await browser.new_page()
        await page.goto(login)
        item = page.locator(f"#chat li[data-id='{message.id}']")
        thumbnail = item.locator("img.thumbnail")
        await thumbnail.wait_for()
        # Loaded and decoded: the image's own width (the console's CSP forbids a page-side
        # wait_for_function, which evaluates a string).
        with anyio.fail_after(10):
            while await thumbnail.evaluate("img => img.naturalWidth") != 40:  # noqa: ASYNC110
                await anyio.sleep(0.02)
        assert await thumbnail.get_attribute("alt") == "chart.png"
        link = item.locator("a.attachment", has_text="report.txt")
        assert await link.get_attribute("href") == f"/api/attachments/{message.id}/1"
        assert await link.get_attribute("download") == "report.txt"
        async with page.expect_download() as downloading:
            await link.click()
        download = await downloading.value
        assert download.suggested_filename == "report.txt"
        saved = anyio.Path(await download.path())
        assert await saved.read_text(encoding="utf-8") == "all green\n"
        # Shown in front of the person: read, its mark gone, its console delivery "read".
        await item.locator(".unread-mark").wait_for(state="detached")
        await item.locator(".delivery", has_text="console: read").wait_for()
        await page.screenshot(path=tmp_path / "attachments.png", full_page=True)


async def test_a_message_read_on_another_channel_clears_its_marks_live(tmp_path: Path) -> None:
    async with browser_on_console(tmp_path) as (rt, login, browser):
        copies: list[str] = []

        async def to_phone(message: OutboundMessage) -> str | None:
            copies.append(f"chat42:{len(copies) + 1}")
            return copies[-1]

        async def broken(message: OutboundMessage) -> str | None:
            raise ConnectionError("the mail server refused the login")

        rt.outbox.deliveries |= {"telegram:me": to_phone, "email:work": broken}
        rt.outbox.route = lambda message, channel: ["console", "telegram:me", "email:work"]
        page = await browser.new_page()
        await page.add_init_script(BACKGROUND_TAB)
        await page.goto(login)
        await page.wait_for_selector("#live:text('live')")

        message = await rt.outbox.send("main", "The deploy finished.")
        item = page.locator(f"#chat li[data-id='{message.id}']")
        await item.locator(".unread-mark").wait_for()
        await page.locator("#unread", has_text="1 unread").wait_for()
        # Its deliveries, with the failure's error on hover.
        phone = item.locator(".delivery[data-channel='telegram:me']")
        await phone.filter(has_text="telegram:me: sent").wait_for()
        failed = item.locator(".delivery[data-channel='email:work']")
        assert await failed.inner_text() == "email:work: failed"
        assert await failed.get_attribute("title") == (
            "ConnectionError: the mail server refused the login"
        )
        assert await item.locator(".delivery[data-channel='console']").inner_text() == (
            "console: sent"
        )
        await page.screenshot(path=tmp_path / "unread-with-deliveries.png", full_page=True)
        stored = await rt.outbox.messages.get(message.id)
        assert stored is not None and not stored.read  # a background tab does not read

        # The user replies to the copy on the phone: read there, and cleared here, live.
        assert await rt.outbox.copy_read("telegram:me", copies[0]) == [message.id]
        await item.locator(".unread-mark").wait_for(state="detached")
        await page.locator("#unread").wait_for(state="hidden")
        await phone.filter(has_text="telegram:me: read").wait_for()
        assert "unread" not in (await item.get_attribute("class") or "")
        await page.screenshot(path=tmp_path / "read-elsewhere.png", full_page=True)


async def test_a_failing_check_inside_the_browser_harness_fails_the_test(tmp_path: Path) -> None:
    # The harness once swallowed failures: the server's scope was cancelled before playwright
    # closed, and the cancellation replaced the error. A check that fails must fail the test.
    failed: list[str] = []
    try:
        async with browser_on_console(tmp_path) as (_rt, login, browser):
            page = await browser.new_page()
            await page.goto(login)
            raise AssertionError("a failing check")
    except* AssertionError as group:
        failed = [str(e) for e in _leaves(group)]
    assert failed == ["a failing check"]


def _leaves(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in _leaves(inner)]
    return [error]
