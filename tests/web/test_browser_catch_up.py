"""The console page catching up after its live stream reconnects, in a real browser: what changed
while the stream was down (a message reaching Telegram, the user reading it there) shows on the
messages already on the page, not only on new ones.

Headless Chromium driven by playwright against a real runtime, web console and Telegram channel
on 127.0.0.1 (see test_browser_delivery.py). The page's EventSource is wrapped so that the test
can cut the stream and open it again, as a dropped connection and the browser's reconnection
would: events sent while it is down are lost.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from test_browser_delivery import (
    CHROMIUM,
    LOOK_AWAY,
    TOKEN_ENV,
    _present,
    _running,
    _text_becomes,
    playwright_api,
    served,
    until,
)
from web_harness import TOKEN

from loopback_http import serving
from servers.telegram_api import FakeBotApi

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which(CHROMIUM) is None,
        reason="Debian's chromium is missing: sudo apt-get install -y chromium",
    ),
]

# The page's EventSource, wrapped: `window.__stream.cut()` closes the connection (what the
# server sends meanwhile is lost) and `reopen()` connects again, firing "open" as a reconnection
# does.
RECONNECTABLE = """
(() => {
  const Real = window.EventSource;
  const TYPES = ["open", "error", "message", "read", "deliveries"];
  class Reconnectable extends EventTarget {
    constructor(url) {
      super();
      this.url = url;
      this.real = null;
      this.reopen();
      window.__stream = this;
    }
    reopen() {
      const real = new Real(this.url);
      this.real = real;
      for (const type of TYPES) {
        real.addEventListener(type, (e) => {
          if (this.real === real) this.dispatchEvent(new MessageEvent(type, { data: e.data }));
        });
      }
    }
    cut() {
      this.real.close();
      this.real = null;
      this.dispatchEvent(new Event("error"));
    }
  }
  window.EventSource = Reconnectable;
})();
"""


async def test_a_delivery_change_missed_while_the_stream_was_down_shows_after_it_reconnects(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOKEN_ENV, FakeBotApi.token)
    fake = FakeBotApi()
    async with serving(fake.app) as port, served(tmp_path, f"http://127.0.0.1:{port}") as (rt, url):
        await until(lambda: _running(rt))
        async with playwright_api.async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=CHROMIUM)
            try:
                page = await browser.new_page()
                await page.add_init_script(LOOK_AWAY + RECONNECTABLE)
                await page.goto(f"{url}/?token={TOKEN}")
                await until(lambda: _present(rt))
                await page.evaluate("window.__hidden = true")  # it stays unread on the page

                sent = await rt.outbox.send("main", "Disk is at 91%.")
                item = page.locator(f'#chat li[data-id="{sent.id}"]')
                await _text_becomes(item.locator(".deliveries"), "console: sent")
                assert await item.locator(".unread-mark").count() == 1
                await page.wait_for_timeout(1000)  # its own refresh, 300 ms after it came, done

                # The stream drops; meanwhile the message reaches Telegram and is read there.
                await page.evaluate("window.__stream.cut()")
                await page.locator("#live").get_by_text("reconnecting…").wait_for()
                assert await rt.outbox.deliver(sent, "telegram:me")
                stored = await rt.outbox.messages.get(sent.id)
                assert stored is not None
                (copy,) = [d.channel_message_id for d in stored.deliveries if d.channel_message_id]
                assert copy is not None
                assert await rt.outbox.copy_read("telegram:me", copy) == [sent.id]
                await page.wait_for_timeout(500)  # nothing reaches the page meanwhile
                assert await item.locator(".deliveries").inner_text() == "console: sent"

                await page.evaluate("window.__stream.reopen()")
                chip = item.locator('.delivery[data-channel="telegram:me"]')
                await _text_becomes(chip, "telegram:me: read")
                await item.locator(".unread-mark").wait_for(state="detached")
                assert await page.locator("#live").inner_text() == "live"
            finally:
                await browser.close()
