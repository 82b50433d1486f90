"""The requests to a person in the store, on each backend (the `open_store` fixture): what
survives a restart, the first ending wins, a late answer is appended only to an ended request,
delivery is marked once, and what a restart takes up again (`unsettled`)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from store_records import human_request as request

from wakeful.errors import UserError

pytestmark = pytest.mark.anyio


async def test_a_request_is_read_back_whole_after_a_restart(open_store: Any) -> None:
    async with open_store() as store:
        await store.human_requests.add(request("A3F9"))
        await store.human_requests.add(request("b71c", kind="input", deadline=None, session="ops"))
    async with open_store() as store:
        stored = await store.human_requests.get("a3f9")
        # Stored lower-case, found in any case.
        assert stored == request("a3f9")
        assert await store.human_requests.get("A3F9") == stored
        assert stored.status == "open" and stored.late == "[]" and not stored.delivered
        other = await store.human_requests.get("b71c")
        assert other is not None and other.deadline is None and other.kind == "input"
        assert await store.human_requests.get("ffff") is None


async def test_a_stored_id_is_refused_and_the_first_request_kept(open_store: Any) -> None:
    async with open_store() as store:
        await store.human_requests.add(request("a3f9"))
        with pytest.raises(UserError, match="a3f9 is stored already"):
            await store.human_requests.add(request("A3F9", question="something else"))
        assert await store.human_requests.get("a3f9") == request("a3f9")


async def test_the_first_ending_wins(open_store: Any) -> None:
    decision = json.dumps({"status": "answered", "choice": "approve"})
    async with open_store() as store:
        await store.human_requests.add(request("a3f9"))
        assert await store.human_requests.close("a3f9", "answered", decision)
        later = json.dumps({"status": "timed_out"})
        assert not await store.human_requests.close("A3F9", "timed_out", later)
        assert not await store.human_requests.close("ffff", "ended", later)
    async with open_store() as store:
        stored = await store.human_requests.get("a3f9")
        assert stored is not None
        assert (stored.status, stored.decision, stored.delivered) == ("answered", decision, False)
        assert stored.closed_at is not None and stored.closed_at.startswith("20")


async def test_closing_as_delivered_settles_the_request_at_once(open_store: Any) -> None:
    async with open_store() as store:
        await store.human_requests.add(request("a3f9"))
        await store.human_requests.add(request("b71c"))
        assert await store.human_requests.close("a3f9", "ended", "{}", delivered=True)
        assert [r.id for r in await store.human_requests.unsettled()] == ["b71c"]
        assert not await store.human_requests.mark_delivered("a3f9")


async def test_delivery_is_marked_once(open_store: Any) -> None:
    async with open_store() as store:
        await store.human_requests.add(request("a3f9"))
        await store.human_requests.close("a3f9", "timed_out", "{}")
        assert await store.human_requests.mark_delivered("A3F9")
        assert not await store.human_requests.mark_delivered("a3f9")
        assert not await store.human_requests.mark_delivered("ffff")
        stored = await store.human_requests.get("a3f9")
        assert stored is not None and stored.delivered


async def test_late_answers_are_appended_to_an_ended_request_only(open_store: Any) -> None:
    first = json.dumps({"answer": "approve", "why_not_applied": "it had timed out"})
    second = json.dumps({"answer": "deny: 不要", "why_not_applied": "it had timed out"})
    async with open_store() as store:
        await store.human_requests.add(request("a3f9"))
        assert not await store.human_requests.add_late("a3f9", first)  # still open
        assert not await store.human_requests.add_late("ffff", first)
        await store.human_requests.close("a3f9", "timed_out", "{}")
        assert await store.human_requests.add_late("a3f9", first)
        assert await store.human_requests.add_late("A3F9", second)
    async with open_store() as store:
        stored = await store.human_requests.get("a3f9")
        assert stored is not None
        assert json.loads(stored.late) == [json.loads(first), json.loads(second)]


async def test_unsettled_is_what_a_restart_takes_up_oldest_first(open_store: Any) -> None:
    async with open_store() as store:
        for request_id in ("0001", "0002", "0003", "0004"):
            await store.human_requests.add(request(request_id))
        await store.human_requests.close("0001", "answered", "{}")  # not yet delivered
        await store.human_requests.close("0002", "answered", "{}")
        await store.human_requests.mark_delivered("0002")
        await store.human_requests.close("0004", "ended", "{}", delivered=True)
    async with open_store() as store:
        assert [r.id for r in await store.human_requests.unsettled()] == ["0001", "0003"]


async def test_recent_is_newest_first_and_by_session(open_store: Any) -> None:
    async with open_store() as store:
        await store.human_requests.add(request("0001"))
        await store.human_requests.add(request("0002", session="ops"))
        await store.human_requests.add(request("0003"))
        await store.human_requests.close("0001", "answered", "{}", delivered=True)
        assert [r.id for r in await store.human_requests.recent()] == ["0003", "0002", "0001"]
        assert [r.id for r in await store.human_requests.recent(2)] == ["0003", "0002"]
        mine = await store.human_requests.recent(session="main")
        assert [r.id for r in mine] == ["0003", "0001"]
        assert await store.human_requests.recent(session="nobody") == []


async def test_bad_endings_are_refused_and_change_nothing(open_store: Any) -> None:
    async with open_store() as store:
        await store.human_requests.add(request("a3f9"))
        with pytest.raises(UserError, match="cannot be closed with the status 'open'"):
            await store.human_requests.close("a3f9", "open", "{}")
        await store.human_requests.close("a3f9", "timed_out", "{}")
        with pytest.raises(UserError, match="not JSON text"):
            await store.human_requests.add_late("a3f9", "approve")
        stored = await store.human_requests.get("a3f9")
        assert stored is not None and (stored.status, stored.late) == ("timed_out", "[]")
