"""A tiny real channel kind for tests: each JSON line appended to a file is one event.

A line ``{"from": …, "subject": …, "text": …}`` becomes an "email.received"-like event
("line.received") with a stable id from its line number, delivered to the channel's Inbox; the
channel's cursor (the byte offset read up to) is advanced only after the Inbox stored the
events, like a mailbox's UID. A line ``{"crash": "why"}`` makes `run` raise after the cursor
passed it (a source that breaks the channel once); ``{"end": true}`` ends the source.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import TaskStatus
from pydantic import BaseModel, ConfigDict

from wakeful.core.channel import ChannelContext, ChannelHealth, source_event_id
from wakeful.core.records import OutboundMessage
from wakeful.events import Event, Source, utc_now

POLL_SECONDS = 0.01


class LineSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: Path
    session: str = "main"


class LineChannel:
    def __init__(self, settings: LineSettings, context: ChannelContext) -> None:
        self._settings = settings
        self._context = context
        self._state: ChannelHealth = ChannelHealth("starting")
        self._last: datetime | None = None

    @property
    def name(self) -> str:
        return self._context.name

    def health(self) -> ChannelHealth:
        return ChannelHealth(self._state.state, self._state.detail, self._last)

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        cursors = self._context.cursors
        offset = int(await cursors.get(self.name, "offset") or 0)
        self._state = ChannelHealth("running")
        task_status.started()
        path = anyio.Path(self._settings.path)
        while True:
            data = await path.read_bytes() if await path.exists() else b""
            end = data.rfind(b"\n") + 1
            if end > offset:
                lines = data[offset:end].decode().splitlines()
                first_line = data[:offset].count(b"\n")
                events: list[tuple[Event, str | None]] = []
                stop: dict[str, Any] | None = None
                consumed = offset
                for number, line in enumerate(lines, start=first_line + 1):
                    consumed += len(line.encode()) + 1
                    fields = json.loads(line)
                    if await self.handle(fields):
                        continue
                    if "crash" in fields or "end" in fields:
                        stop = fields
                        break
                    events.append((self._event(number, fields), None))
                if events:
                    await self._context.inbox.deliver_many(events)
                    self._last = utc_now()
                offset = consumed
                await cursors.put(self.name, "offset", str(offset))
                if stop is not None:
                    if "end" in stop:
                        self._state = ChannelHealth("stopped", "the file ended")
                        return
                    raise RuntimeError(stop["crash"])
            await anyio.sleep(POLL_SECONDS)

    async def handle(self, fields: dict[str, Any]) -> bool:
        """Act on a control line; True when it was one (a plain line channel has none)."""
        return False

    def _event(self, number: int, fields: dict[str, Any]) -> Event:
        return Event(
            id=source_event_id(self.name, f"line-{number}"),
            kind="line.received",
            source=Source(
                type="user" if fields.get("user") else "contact", id=str(fields.get("from", ""))
            ),
            channel=self.name,
            content=fields,
            session=self._settings.session,
        )


@dataclass(frozen=True)
class LineKind:
    kind: str = "lines"

    @property
    def settings_model(self) -> type[BaseModel]:
        return LineSettings

    def build(self, settings: Any, context: ChannelContext) -> LineChannel:
        return LineChannel(settings, context)


KIND = LineKind()


def append(path: Path, *lines: dict[str, Any]) -> None:
    with path.open("a", encoding="utf-8") as file:
        for line in lines:
            file.write(json.dumps(line) + "\n")


async def until(condition: Callable[[], bool], seconds: float = 10) -> None:
    """Wait until `condition()` holds, polling (a channel's effects have no event to await)."""
    with anyio.fail_after(seconds):
        while True:
            if condition():
                return
            await anyio.sleep(POLL_SECONDS)


class PhoneSettings(LineSettings):
    """A line channel that also reaches the user: each message sent to them is a JSON line
    appended to `sent_path` ({"copy": id, "message": msg id, "text": …}); a line
    ``{"read": copy id}`` in the input file is the user reading that copy (a read receipt);
    ``{"refuse": "why"}`` makes sends fail from then on, ``{"refuse": null}`` lets them pass."""

    sent_path: Path


class PhoneChannel(LineChannel):
    """See :class:`PhoneSettings`: a stand-in for an IM account, driven by files."""

    def __init__(self, settings: PhoneSettings, context: ChannelContext) -> None:
        super().__init__(settings, context)
        self._phone = settings
        self.refusing: str | None = None
        self._copies = 0

    async def send_to_user(self, message: OutboundMessage) -> str | None:
        if self.refusing:
            raise ConnectionError(self.refusing)
        self._copies += 1
        copy = f"{self.name}#{message.id}#{self._copies}"
        append(
            self._phone.sent_path,
            {"copy": copy, "message": message.id, "text": message.text, "kind": message.kind},
        )
        return copy

    async def show_read(self, message: OutboundMessage, channel_message_id: str) -> bool:
        append(self._phone.sent_path, {"shown_read": channel_message_id})
        return True

    async def handle(self, fields: dict[str, Any]) -> bool:
        """Act on a control line; True when it was one (not an event)."""
        if "refuse" in fields:
            self.refusing = fields["refuse"]
            return True
        if "read" in fields:
            reads = self._context.reads
            if reads is not None:
                await reads.copy_read(self.name, str(fields["read"]), through=True)
            return True
        return False


@dataclass(frozen=True)
class PhoneKind:
    kind: str = "phone"

    @property
    def settings_model(self) -> type[BaseModel]:
        return PhoneSettings

    def build(self, settings: Any, context: ChannelContext) -> PhoneChannel:
        return PhoneChannel(settings, context)


PHONE_KIND = PhoneKind()


def lines(path: Path) -> list[dict[str, Any]]:
    """The JSON lines of `path` (none when it does not exist yet)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
