"""Random sequences of event operations give the same answers on PostgreSQL as on SQLite: the
SQLite store is the reference for what the events table means (ids unique, redeliveries
recognised, statuses, arrival order, tails)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import Any, get_args

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wakeful.core.records import EventStatus
from wakeful.core.repositories import EventRepository
from wakeful.errors import StoreError
from wakeful.events import Event, Source
from wakeful.store.sqlite import Store

pytest.importorskip("psycopg", reason="psycopg is missing: pip install -e '.[postgres]'")

from wakeful.store.postgres import PostgresStore

STATUSES: tuple[EventStatus, ...] = get_args(EventStatus)
ids = st.integers(0, 5)
statuses = st.sampled_from(STATUSES)
operations = st.one_of(
    st.tuples(st.just("add"), ids, statuses),
    st.tuples(st.just("add_new"), ids, statuses),
    st.tuples(st.just("add_many"), st.lists(ids, max_size=4), statuses),
    st.tuples(st.just("add_new_many"), st.lists(st.tuples(ids, statuses), max_size=4)),
    st.tuples(st.just("mark"), st.lists(ids, max_size=3), statuses),
    st.tuples(st.just("pending")),
    st.tuples(st.just("count")),
    st.tuples(st.just("recent"), st.integers(0, 8), st.none() | st.integers(0, 6), statuses),
)
examples = itertools.count()


def event(session: str, number: int) -> Event:
    return Event(
        id=f"ev_{session}_{number}",
        kind="webhook.received",
        source=Source(type="system", id="ci"),
        content={"number": number},
        session=session,
    )


async def play(
    events: EventRepository, session: str, script: Sequence[tuple[Any, ...]]
) -> list[object]:
    """What each operation of `script` answers, with rowids as positions among this store's
    own rowids (the numbers differ between stores; their order must not)."""
    answers: list[object] = []
    rowids: list[int] = []
    for name, *args in script:
        try:
            if name == "add":
                rowids.append(await events.add(event(session, args[0]), args[1]))
                answers.append("stored")
            elif name == "add_new":
                answers.append(await events.add_new(event(session, args[0]), args[1]))
            elif name == "add_many":
                batch = [event(session, n) for n in args[0]]
                rowids.extend(await events.add_many(batch, args[1]))
                answers.append("stored")
            elif name == "add_new_many":
                pairs = [(event(session, n), status) for n, status in args[0]]
                answers.append(await events.add_new_many(pairs))
            elif name == "mark":
                await events.mark([event(session, n).id for n in args[0]], args[1])
                answers.append("marked")
            elif name == "pending":
                answers.append([e.id for e in await events.pending(session)])
            elif name == "count":
                answers.append(await events.count(session))
            else:
                limit, after, status = args
                after_rowid = (
                    sorted(rowids)[after] if after is not None and after < len(rowids) else None
                )
                rows = await events.recent(limit, session, after_rowid, status=status)
                answers.append([(r.status, r.event.id) for r in rows])
                answers.append([r.rowid for r in rows] == sorted(r.rowid for r in rows))
        except StoreError:
            answers.append("refused")
    return answers


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(script=st.lists(operations, min_size=1, max_size=12))
def test_event_operations_answer_the_same_on_both_backends(
    script: list[tuple[Any, ...]], tmp_path: Path, postgres_url: str
) -> None:
    # Each example has a session of its own in the one file and the one database of this test.
    session = f"s{next(examples)}"

    async def on_both() -> tuple[list[object], list[object]]:
        async with await Store.open(tmp_path / "reference.db") as sqlite:
            expected = await play(sqlite.events, session, script)
        async with await PostgresStore.open(postgres_url) as postgres:
            answered = await play(postgres.events, session, script)
        return expected, answered

    expected, answered = anyio.run(on_both)
    assert answered == expected
