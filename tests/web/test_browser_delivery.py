"""The delivery policy seen in a real browser: an urgent message left unread in the console
escalates to Telegram (the loopback Bot API), the page shows it reaching there, and reading it
in the page marks the Telegram copy read (a 👀 reaction) and clears the unread badge.

Headless Chromium driven by playwright against a real runtime, web console and Telegram channel
on 127.0.0.1; only the model is scripted. The page's visibility is driven by the test (a person
looking away, then back), since read means seen. Screenshots stay in the test's tmp directory.
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from web_harness import TOKEN

from loopback_http import serving
from servers.telegram_api import FakeBotApi
from wakeful.channels.registry import ChannelSpec
from wakeful.channels.telegram import KIND
from wakeful.delivery.settings import DeliverySettings
from wakeful.models import ScriptedModel
from wakeful.runtime import Runtime
from wakeful.web import ConsoleAuth, WebConsole, serve_console

CHROMIUM = "/usr/bin/chromium"
TOKEN_ENV = "WAKEFUL_TEST_TELEGRAM_TOKEN"
USER_ID = 111
playwright_api = pytest.importorskip("playwright.async_api")

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which(CHROMIUM) is None,
        reason="Debian's chromium is missing: sudo apt-get install -y chromium",
    ),
]

# The page asks whether it is in front of the person; the test answers.
LOOK_AWAY = """
window.__hidden = false;
Object.defineProperty(document, "visibilityState", {
  configurable: true,
  get: () => (window.__hidden ? "hidden" : "visible"),
});
"""


@asynccontextmanager
async def served(tmp_path: Path, api_url: str) -> AsyncIterator[tuple[Runtime, str]]:
    telegram = ChannelSpec(
        "telegram",
        "me",
        {
            "token_env": TOKEN_ENV,
            "api_url": api_url,
            "user_ids": [USER_ID],
            "poll_timeout_seconds": 1,
        },
    )
    runtime = Runtime(
        model=ScriptedModel([]),
        with_timers=False,
        workdir=tmp_path,
        store_path=tmp_path / "wakeful.db",
        channels=[telegram],
        channel_kinds={"telegram": KIND},
        delivery=DeliverySettings(
            channels=("console", "telegram:me"), escalate_after_minutes=2 / 60
        ),
    )
    async with runtime as rt, anyio.create_task_group() as tg:
        web = WebConsole(rt, ConsoleAuth.for_address(TOKEN, "127.0.0.1", 0))
        port = await tg.start(serve_console, web, "127.0.0.1", 0)
        try:
            yield rt, f"http://127.0.0.1:{port}"
        finally:
            web.close()
            tg.cancel_scope.cancel()


async def until(check: Callable[[], Any], seconds: float = 15) -> None:
    with anyio.fail_after(seconds):
        while True:
            if await check():
                return
            await anyio.sleep(0.05)


async def test_an_urgent_message_unread_in_the_browser_escalates_then_is_read_everywhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOKEN_ENV, FakeBotApi.token)
    fake = FakeBotApi()
    async with serving(fake.app) as api_port:
        api_url = f"http://127.0.0.1:{api_port}"
        async with served(tmp_path, api_url) as (rt, url):
            await until(lambda: _running(rt))
            async with playwright_api.async_playwright() as pw:
                browser = await pw.chromium.launch(executable_path=CHROMIUM)
                try:
                    page = await browser.new_page()
                    await page.add_init_script(LOOK_AWAY)
                    await page.goto(f"{url}/?token={TOKEN}")
                    # The open page tells the runtime the person is at the console.
                    await until(lambda: _present(rt))
                    await page.evaluate("window.__hidden = true")  # they look away

                    sent = await rt.outbox.send("main", "The server is down.", urgency="urgent")
                    item = page.locator(f'#chat li[data-id="{sent.id}"]')
                    await item.wait_for()
                    assert await page.locator("#unread").inner_text() == "1 unread"
                    assert fake.sent == []  # the console first: the person is there
                    await page.screenshot(path=str(tmp_path / "1-urgent-in-console.png"))

                    # Unread after the escalation time: it reaches Telegram, and the page
                    # shows it went there.
                    await until(lambda: _sent_to_telegram(fake), seconds=20)
                    chip = item.locator('.delivery[data-channel="telegram:me"]')
                    await chip.wait_for()
                    await _text_becomes(chip, "telegram:me: sent")
                    await page.screenshot(path=str(tmp_path / "2-escalated-to-telegram.png"))

                    # The person looks back: read in the page, read everywhere.
                    await page.evaluate(
                        "window.__hidden = false;"
                        "document.dispatchEvent(new Event('visibilitychange'))"
                    )
                    await page.locator("#unread").wait_for(state="hidden")
                    await until(lambda: _reacted(fake))
                    await _text_becomes(chip, "telegram:me: read")
                    stored = await rt.outbox.messages.get(sent.id)
                    assert stored is not None and stored.read_on == "console"
                    states = {d.channel: d.state for d in stored.deliveries}
                    assert states == {"console": "read", "telegram:me": "read"}
                    await page.screenshot(path=str(tmp_path / "3-read-everywhere.png"))
                finally:
                    await browser.close()
    [reaction] = fake.reactions
    assert (reaction["chat_id"], reaction["emoji"]) == (USER_ID, ["👀"])


async def _running(rt: Runtime) -> bool:
    health = rt.channels.get("telegram:me")
    return health is not None and health.state == "running"


async def _present(rt: Runtime) -> bool:
    return rt.activity.last_channel == "console"


async def _sent_to_telegram(fake: FakeBotApi) -> bool:
    return [m.get("text") for m in fake.sent] == ["The server is down."]


async def _reacted(fake: FakeBotApi) -> bool:
    return len(fake.reactions) == 1


async def _text_becomes(locator: Any, text: str) -> None:
    with anyio.fail_after(10):
        while (await locator.inner_text()) != text:  # noqa: ASYNC110 - the page updates itself
            await anyio.sleep(0.05)
