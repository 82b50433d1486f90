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
LOOK_BACK = "window.__hidden = false; document.dispatchEvent(new Event('visibilitychange'))"
# How many single-message answers (GET /api/messages/<id>) the page has read: counted as its
# `await response.json()` resumes, so a test can tell the page has handled an answer.
COUNT_SNAPSHOTS = """
window.__snapshots = 0;
(() => {
  const parseJson = Response.prototype.json;
  Response.prototype.json = function () {
    const parsed = parseJson.call(this);
    if (this.url.includes("/api/messages/msg_")) parsed.then(() => { window.__snapshots += 1; });
    return parsed;
  };
})();
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
                    await page.evaluate(LOOK_BACK)
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


def _holding_reactions(app: Any, go: anyio.Event) -> Any:
    """`app` (the fake Bot API), answering setMessageReaction only once `go` is set."""

    async def held(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].endswith("/setMessageReaction"):
            await go.wait()
        await app(scope, receive, send)

    return held


async def test_a_snapshot_from_before_the_telegram_copy_was_read_does_not_undo_it_on_the_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reading a message, the page asks for its deliveries (twice: on the "read" event and on
    its own read report's answer) while the delivery policy is putting the 👀 on the Telegram
    copy. Those answers say "telegram:me: sent"; the live update that follows says "read". On a
    busy machine an answer can reach the page after that update: held here until the page
    shows "read", they must not turn the chip back to "sent"."""
    monkeypatch.setenv(TOKEN_ENV, FakeBotApi.token)
    fake = FakeBotApi()
    reaction_may_go = anyio.Event()
    held: list[tuple[Any, Any]] = []

    async def hold_stale(route: Any) -> None:
        response = await route.fetch()
        snapshot = await response.json()
        states = {d["channel"]: d["state"] for d in snapshot["deliveries"]}
        if snapshot["read"] and states.get("telegram:me") == "sent":
            held.append((route, response))  # answered below, after the live update
        else:
            await route.fulfill(response=response)

    api = _holding_reactions(fake.app, reaction_may_go)
    async with serving(api) as port, served(tmp_path, f"http://127.0.0.1:{port}") as (rt, url):
        await until(lambda: _running(rt))
        async with playwright_api.async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=CHROMIUM)
            try:
                page = await browser.new_page()
                await page.add_init_script(LOOK_AWAY + COUNT_SNAPSHOTS)
                await page.route("**/api/messages/msg_*", hold_stale)
                await page.goto(f"{url}/?token={TOKEN}")
                await until(lambda: _present(rt))
                await page.evaluate("window.__hidden = true")

                sent = await rt.outbox.send("main", "The server is down.", urgency="urgent")
                item = page.locator(f'#chat li[data-id="{sent.id}"]')
                chip = item.locator('.delivery[data-channel="telegram:me"]')
                await until(lambda: _sent_to_telegram(fake), seconds=20)
                await _text_becomes(chip, "telegram:me: sent")

                await page.evaluate(LOOK_BACK)

                async def both_refreshes_held() -> bool:
                    return len(held) == 2

                await until(both_refreshes_held)
                reaction_may_go.set()
                await until(lambda: _reacted(fake))
                await _text_becomes(chip, "telegram:me: read")  # the live update
                handled = await page.evaluate("window.__snapshots")
                for route, response in held:
                    await route.fulfill(response=response)

                async def page_handled_them() -> bool:
                    count = await page.evaluate("window.__snapshots")
                    return bool(count == handled + len(held))

                await until(page_handled_them)
                assert await chip.inner_text() == "telegram:me: read"
                assert await item.locator(".unread-mark").count() == 0
                stored = await rt.outbox.messages.get(sent.id)
                assert stored is not None
                states = {d.channel: d.state for d in stored.deliveries}
                assert states == {"console": "read", "telegram:me": "read"}
            finally:
                await browser.close()
