"""The console's page; its script and style are `static/console.js` and `static/console.css`.

No framework and no download: about 200 lines of plain JavaScript that fetch JSON and build the
page with `textContent` (never `innerHTML`), so text from the agent, tools or web pages cannot
become markup. A card's HTML body is the one exception by design, and it goes into an iframe
with `sandbox=""` (no scripts, a unique origin: no cookie, no access to the console's API).
"""

from __future__ import annotations

import html
from importlib.resources import files
from typing import Final


def page_html(csrf_token: str, session: str) -> str:
    """The console page for one session; it carries the CSRF token, never the login token."""
    return _PAGE.format(csrf=html.escape(csrf_token), session=html.escape(session))


_PAGE: Final = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="csrf-token" content="{csrf}">
<meta name="session" content="{session}">
<title>wakeful console</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/static/console.css">
<script src="/static/console.js" defer></script>
</head>
<body>
<header><h1>wakeful</h1><span id="session-name">{session}</span>
<span id="unread" class="badge" hidden></span><span id="live" class="live">connecting…</span>
</header>
<main>
<section id="chat-panel">
<button type="button" id="load-earlier" hidden>Load earlier messages</button>
<ol id="chat" aria-live="polite"></ol>
<form id="send-form">
<textarea id="text" name="text" rows="2" placeholder="Message the agent (Enter sends)"></textarea>
<button type="submit" id="send">Send</button>
<button type="button" id="stop" class="danger">Stop</button>
</form>
</section>
<aside>
<section><h2>Waiting for you</h2><ul id="approvals"></ul><ul id="inputs"></ul></section>
<section><h2>Tasks</h2><ul id="tasks"></ul></section>
<section><h2>Timers</h2><ul id="timers"></ul></section>
<section><h2>Channels</h2><ul id="channels"></ul></section>
<section><h2>Tool statistics</h2><table id="audit"></table></section>
<section><h2>Trajectory</h2><button type="button" id="show-trajectory">Show</button>
<ol id="trajectory"></ol></section>
</aside>
</main>
</body>
</html>
"""


def static_file(name: str) -> bytes:
    """A file of the page (`console.js`, `console.css`), shipped in the package."""
    return (files(__package__) / "static" / name).read_bytes()
