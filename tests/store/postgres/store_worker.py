"""A wakeful worker process on a PostgreSQL store, driven line by line for the scale-out tests and
the cross-worker benchmark.

Run as ``python store_worker.py URL``. Each line on stdin is one JSON command; each answer is one
JSON line on stdout, in the order of the commands. A listener started with ``listen`` prints its
own lines meanwhile: ``{"woken": SESSION, "at": MONOTONIC}`` and ``{"missed": true}``. A write
refused by the fence answers ``{"lease_lost": MESSAGE, "owner": NEW_OWNER}``.

Commands (``op`` and its fields):
  register lease_seconds [name]   acquire session     renew     release session
  claim_all limit                 (claims `limit` at a time until a claim takes none)
  mark_lost_all                   (the fenced mark_running_lost of every held session)
  append session text             mark session ids    save_task session task_id
  add_event session               fire_timers limit   listen    stop
  keep_leases                     (renews the held leases in the background)
  claim_until count limit poll_s  (claims every poll_s until `count` sessions are taken)
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio

from wakeful.core.records import TaskRecord, TimerRecord
from wakeful.events import TIMER_TRIGGER, Event, Source, user_input
from wakeful.messages import UserMessage
from wakeful.store.postgres import PostgresStore
from wakeful.store.postgres.leases import Lease, LeaseLost, Worker


def say(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def fire(records: Sequence[TimerRecord], now: datetime) -> tuple[list[Event], list[TimerRecord]]:
    """Fire each due timer once and move it past `now` (one-shot timers end)."""
    events = []
    for record in records:
        events.append(
            Event(
                kind=TIMER_TRIGGER,
                source=Source(type="system", id=record.id),
                channel="timer",
                content=record.note,
                context={"timer_id": record.id},
                session=record.session,
            )
        )
        record.fire_count += 1
        record.last_fired_at = now
        if record.every_seconds is None:
            record.active, record.next_fire = False, None
        else:
            assert record.next_fire is not None
            while record.next_fire <= now:
                record.next_fire += timedelta(seconds=record.every_seconds)
    return events, list(records)


class Driver:
    def __init__(self, store: PostgresStore) -> None:
        self.store = store
        self.worker: Worker | None = None
        # Every lease this worker got, also once lost: a write made with a lost lease is what
        # the fence must refuse.
        self.leases: dict[str, Lease] = {}

    def lease(self, session: str) -> Lease:
        return self.leases[session]

    async def run(self, command: dict[str, Any], tg: anyio.abc.TaskGroup) -> None:
        op = command["op"]
        store = self.store
        if op == "register":
            self.worker = await store.register_worker(
                lease_seconds=command["lease_seconds"], name=command.get("name")
            )
            say(worker=self.worker.id)
        elif op == "acquire":
            assert self.worker is not None
            lease = await self.worker.acquire(command["session"])
            if lease is not None:
                self.leases[lease.session] = lease
            say(epoch=None if lease is None else lease.epoch)
        elif op == "renew":
            assert self.worker is not None
            renewal = await self.worker.renew()
            say(
                renewed=[lease.session for lease in renewal.renewed],
                lost=[[lost.lease.session, lost.owner] for lost in renewal.lost],
            )
        elif op == "release":
            assert self.worker is not None
            say(released=await self.worker.release(self.lease(command["session"])))
        elif op == "claim_all":
            assert self.worker is not None
            claimed: list[list[Any]] = []
            while batch := await self.worker.claim(command["limit"]):
                for lease in batch:
                    self.leases[lease.session] = lease
                claimed += [[lease.session, lease.epoch] for lease in batch]
            say(claimed=claimed)
        elif op == "mark_lost_all":
            assert self.worker is not None
            lost: list[str] = []
            for lease in list(self.worker.held.values()):
                lost += [r.id for r in await store.fenced(lease).task_records.mark_running_lost()]
            say(lost=lost)
        elif op in ("append", "mark", "save_task"):
            fenced = store.fenced(self.lease(command["session"]))
            try:
                if op == "append":
                    message = UserMessage(content=command["text"])
                    await fenced.trajectories.append(command["session"], [message])
                elif op == "mark":
                    await fenced.events.mark(command["ids"], "consumed")
                else:
                    record = TaskRecord(
                        id=command["task_id"],
                        session=command["session"],
                        tool="shell",
                        call_id="call-1",
                        description="a long build",
                        state="running",
                        background=True,
                        started_at=datetime.now(UTC),
                    )
                    await fenced.task_records.save(record)
            except LeaseLost as exc:
                say(lease_lost=str(exc), owner=exc.owner)
            else:
                say(ok=True)
        elif op == "add_event":
            event = user_input("hello", session=command["session"])
            called_at = time.monotonic()
            await store.events.add(event)
            say(added=event.id, called_at=called_at, at=time.monotonic())
        elif op == "fire_timers":
            fired: list[str] = []
            while events := await store.timer_records.claim_due(fire, limit=command["limit"]):
                fired += [event.context["timer_id"] for event in events]
            say(fired=fired)
        elif op == "listen":
            listener = store.wakeup_listener(
                lambda session, owner: say(woken=session, owner=owner, at=time.monotonic()),
                lambda: say(missed=True),
            )
            await tg.start(listener.run)
            say(listening=True)
        elif op == "keep_leases":
            assert self.worker is not None
            await tg.start(self.worker.keep_leases, lambda lost: None)
            say(keeping=True)
        elif op == "claim_until":
            assert self.worker is not None
            taken = 0
            while taken < command["count"]:
                taken += len(await self.worker.claim(command["limit"]))
                if taken < command["count"]:
                    await anyio.sleep(command["poll_s"])
            say(claimed=taken, at=time.monotonic())
        elif op == "stop":
            assert self.worker is not None
            await self.worker.stop()
            say(stopped=True)
        else:
            say(error=f"unknown op {op!r}")


async def main(url: str) -> None:
    async with await PostgresStore.open(url, pool_size=2) as store:
        driver = Driver(store)
        stdin = anyio.wrap_file(sys.stdin)
        async with anyio.create_task_group() as tg:
            say(ready=True)
            async for line in stdin:
                if not line.strip():
                    continue
                command = json.loads(line)
                if command["op"] == "exit":
                    break
                await driver.run(command, tg)
            tg.cancel_scope.cancel()


if __name__ == "__main__":
    anyio.run(main, sys.argv[1])
