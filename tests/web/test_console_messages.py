"""The chat's messages in the console: pages back through many stored messages, one message with
its deliveries, read state shared with the other channels (read elsewhere, the open pages hear
of it), and the page telling the runtime the user is here. A real runtime and SQLite store."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from web_harness import ORIGIN, TOKEN, web_console

from wakeful.models import ScriptedModel, call, say, use
from wakeful.web.auth import COOKIE

pytestmark = pytest.mark.anyio


@pytest.mark.slow
async def test_ten_thousand_messages_are_paged_back_to_the_first(tmp_path: Path) -> None:
    async with web_console(ScriptedModel([]), tmp_path) as console:
        console.client.cookies.set(COOKIE, TOKEN)
        outbox = console.runtime.outbox
        sent = [(await outbox.send("main", f"message {i}")).id for i in range(10_000)]
        await outbox.send("other", "another session's")

        first = (await console.client.get("/api/messages")).json()
        assert [m["text"] for m in first["messages"]] == [
            f"message {i}" for i in range(9_800, 10_000)
        ]
        assert first["earlier"] == sent[9_800]  # the oldest shown: page back from it

        pages, earlier = [first["messages"]], first["earlier"]
        while earlier is not None:
            page = (
                await console.client.get("/api/messages", params={"before": earlier, "limit": 1000})
            ).json()
            pages.insert(0, page["messages"])
            earlier = page["earlier"]
        assert [m["id"] for page in pages for m in page] == sent
        assert len(pages) == 1 + 10  # 200 first, then 9,800 in pages of 1,000 (the last 800)
        assert len(pages[0]) == 800


async def test_the_users_lines_are_paged_with_the_agents_messages(tmp_path: Path) -> None:
    turns = [(use(call("reply_to_user", text=f"answer {i}")), say("")) for i in range(3)]
    model = ScriptedModel([turn for pair in turns for turn in pair])
    async with web_console(model, tmp_path) as console:
        console.client.cookies.set(COOKIE, TOKEN)
        for i in range(3):
            await console.client.post("/api/send", json={"text": f"q {i}"}, headers=console.csrf)
            await console.runtime.wait_idle()
        # Each page runs from its oldest message of the agent's to where the next page starts;
        # the user's lines go where they fall in time, so the pages join into the whole chat.
        latest = (await console.client.get("/api/messages", params={"limit": 1})).json()
        assert [m["text"] for m in latest["messages"]] == ["answer 2"]
        older = (
            await console.client.get(
                "/api/messages", params={"limit": 1, "before": latest["earlier"]}
            )
        ).json()
        assert [m["text"] for m in older["messages"]] == ["answer 1", "q 2"]
        oldest = (
            await console.client.get("/api/messages", params={"before": older["earlier"]})
        ).json()
        assert [m["text"] for m in oldest["messages"]] == ["q 0", "answer 0", "q 1"]
        assert oldest["earlier"] is None
        whole = (await console.client.get("/api/messages")).json()["messages"]
        joined = oldest["messages"] + older["messages"] + latest["messages"]
        assert [m["text"] for m in whole] == [m["text"] for m in joined]


async def test_bad_paging_is_refused_with_the_fix(tmp_path: Path) -> None:
    async with web_console(ScriptedModel([]), tmp_path) as console:
        console.client.cookies.set(COOKIE, TOKEN)
        elsewhere = await console.runtime.outbox.send("other", "not in main")
        for limit in ("0", "1001", "-5", "ten", ""):
            bad = await console.client.get("/api/messages", params={"limit": limit})
            assert bad.status_code == 400, limit
            assert (
                f"limit={limit!r} is not a number of messages from 1 to 1000"
                in (bad.json()["error"])
            )
        for before in ("msg_nope", elsewhere.id):
            missing = await console.client.get("/api/messages", params={"before": before})
            assert missing.status_code == 404
            assert f"No message {before!r} of session 'main'" in missing.json()["error"]
            assert "`earlier`" in missing.json()["error"]


async def test_one_message_shows_its_deliveries_and_read_state(tmp_path: Path) -> None:
    async with web_console(ScriptedModel([]), tmp_path) as console:
        console.client.cookies.set(COOKIE, TOKEN)
        outbox = console.runtime.outbox

        async def refuse(message: object) -> str | None:
            raise ConnectionError("the IM server is down")

        async def deliver(message: object) -> str | None:
            return "chat42:7"

        outbox.deliveries |= {"im:broken": refuse, "im:phone": deliver}
        outbox.route = lambda message, channel: ["console", "im:phone", "im:broken"]
        message = await outbox.send("main", "the build is green")
        shown = (await console.client.get(f"/api/messages/{message.id}")).json()
        assert (shown["text"], shown["read"], shown["read_on"]) == (
            "the build is green",
            False,
            None,
        )
        states = {d["channel"]: (d["state"], d["error"]) for d in shown["deliveries"]}
        assert states == {
            "console": ("sent", None),
            "im:phone": ("sent", None),
            "im:broken": ("failed", "ConnectionError: the IM server is down"),
        }
        # The user answers on the phone: read there, and so here.
        await outbox.copy_read("im:phone", "chat42:7")
        again = (await console.client.get(f"/api/messages/{message.id}")).json()
        assert (again["read"], again["read_on"]) == (True, "im:phone")
        assert {d["channel"]: d["state"] for d in again["deliveries"]}["im:phone"] == "read"
        missing = await console.client.get("/api/messages/msg_nope")
        assert missing.status_code == 404 and "msg_nope" in missing.json()["error"]
        # The page's list carries the same.
        [listed] = (await console.client.get("/api/messages")).json()["messages"]
        assert listed["deliveries"] == again["deliveries"]


async def test_a_message_read_elsewhere_reaches_the_open_page(tmp_path: Path) -> None:
    async with web_console(ScriptedModel([]), tmp_path) as console:
        outbox = console.runtime.outbox
        message = await outbox.send("main", "meeting moved to 3pm")
        # The read listener is the console's, and `close` removes it (and the message one).
        assert console.web.feed.on_read in outbox.read_listeners
        seen: list[dict[str, object]] = []
        page = console.web.feed.subscribe("main")  # an open page
        async with anyio.create_task_group() as tg:

            async def listen() -> None:
                async for chunk in page.chunks():
                    if chunk.startswith(b"event: read"):
                        data = chunk.decode().split("data: ", 1)[1]
                        seen.append(json.loads(data))
                        tg.cancel_scope.cancel()

            tg.start_soon(listen)
            await outbox.mark_read([message.id], channel="telegram:me")
        page.close()
        assert seen == [{"type": "read", "ids": [message.id], "channel": "telegram:me"}]
        console.web.close()
        assert console.web.feed.on_read not in outbox.read_listeners
        assert console.web.feed.on_outbox_message not in outbox.listeners


async def test_reading_in_the_console_tells_the_outboxs_read_listeners(tmp_path: Path) -> None:
    async with web_console(ScriptedModel([]), tmp_path) as console:
        console.client.cookies.set(COOKIE, TOKEN)
        outbox = console.runtime.outbox
        told: list[tuple[list[str], str]] = []

        async def listener(ids: list[str], channel: str) -> None:
            told.append((ids, channel))

        outbox.read_listeners.append(listener)
        first = await outbox.send("main", "one")
        second = await outbox.send("main", "two")
        read = await console.client.post(
            "/api/read", json={"through": second.id}, headers=console.csrf
        )
        assert read.json() == {"read": [first.id, second.id], "unread": 0}
        assert told == [([first.id, second.id], "console")]
        again = await console.client.post(
            "/api/read", json={"through": second.id}, headers=console.csrf
        )
        assert again.json() == {"read": [], "unread": 0}
        assert len(told) == 1  # nothing newly read, nobody disturbed


async def test_the_page_tells_the_runtime_the_user_is_here(tmp_path: Path) -> None:
    async with web_console(ScriptedModel([]), tmp_path) as console:
        activity = console.runtime.activity
        assert activity.last_seen is None
        refused = await console.client.post("/api/presence", headers=console.csrf)
        assert refused.status_code == 401 and activity.last_seen is None
        console.client.cookies.set(COOKIE, TOKEN)
        for headers in (
            {"x-csrf-token": console.web.auth.csrf_token},  # no Origin
            {"origin": "https://evil.example", "x-csrf-token": console.web.auth.csrf_token},
            {"origin": ORIGIN},  # no CSRF token
        ):
            response = await console.client.post("/api/presence", headers=headers)
            assert response.status_code == 403
        assert activity.last_seen is None
        here = await console.client.post("/api/presence", json={}, headers=console.csrf)
        assert here.json() == {"present": True}
        assert activity.last_seen is not None and activity.last_channel == "console"
