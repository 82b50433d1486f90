"""MCP logging: the server's own log records sent to the client as `notifications/message`.

A client that sends `logging/setLevel` gets, from then on, every record of the `wakeful`
loggers at or above that level, with the logger's name, the level mapped to the syslog levels
MCP uses (Python has no notice, alert or emergency: CRITICAL is "critical"), and the formatted
message as data. Before any setLevel nothing is sent: the specification leaves the default to the
server, and a client that never asked is not flooded. So that records below the process's own
level exist at all, setLevel lowers the `wakeful` logger's level when it is higher (and the
connection restores it when it closes); the CLI's stderr handler keeps its own level, so the
terminal is not flooded either.

Records may come from any thread (tools run blocking work in worker threads): the handler hands
each one to the connection's event loop, onto a bounded queue a task of the connection drains.
A client too slow to keep up loses records rather than slowing the server. Only handshake-era
connections (`logging/setLevel`) are served this way: on 2026-07-28 connections the client asks
for log messages per request in its `_meta`, and the SDK does not dispatch setLevel.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Final

import anyio
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server.session import ServerSession

LOGGER_NAME: Final = "wakeful"
"""The logger whose records (and its children's) go to the client."""

QUEUE_SIZE: Final = 256
"""Records waiting for a slow client at most; more are dropped."""

LEVEL_NUMBERS: Final[dict[str, int]] = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO + 5,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL + 5,
    "emergency": logging.CRITICAL + 10,
}
"""MCP's (syslog's) levels as Python level numbers."""

_Item = tuple[types.LoggingLevel, str, str]


def mcp_level(levelno: int) -> types.LoggingLevel:
    """The MCP level of a Python record's level number."""
    if levelno >= logging.CRITICAL:
        return "critical"
    if levelno >= logging.ERROR:
        return "error"
    if levelno >= logging.WARNING:
        return "warning"
    if levelno >= logging.INFO:
        return "info"
    return "debug"


class ClientLog(logging.Handler):
    """One connection's log forwarding: the level its client set, and where to send records."""

    def __init__(self) -> None:
        super().__init__(logging.NOTSET)
        self.minimum: int | None = None
        self.session: ServerSession | None = None
        self._loop = asyncio.get_running_loop()
        self._send: MemoryObjectSendStream[_Item]
        self._receive: MemoryObjectReceiveStream[_Item]
        self._send, self._receive = anyio.create_memory_object_stream[_Item](QUEUE_SIZE)
        self._lowered_from: int | None = None

    def set_level(self, session: ServerSession, level: str) -> None:
        """Send records at or above `level` to this session's client from now on."""
        self.session = session
        self.minimum = LEVEL_NUMBERS[level]
        logger = logging.getLogger(LOGGER_NAME)
        if logger.getEffectiveLevel() > self.minimum:
            if self._lowered_from is None:
                self._lowered_from = logger.level
            logger.setLevel(self.minimum)

    def emit(self, record: logging.LogRecord) -> None:
        if self.minimum is None or record.levelno < self.minimum:
            return
        item: _Item = (mcp_level(record.levelno), record.name, self.format(record))
        with contextlib.suppress(RuntimeError):  # the loop is closed: the connection is gone
            self._loop.call_soon_threadsafe(self._offer, item)

    def _offer(self, item: _Item) -> None:
        # A slow (or gone) client loses records rather than slowing the server.
        with contextlib.suppress(
            anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError
        ):
            self._send.send_nowait(item)

    async def forward(self) -> None:
        """Send queued records to the client until the connection closes."""
        async with self._receive:
            async for level, name, message in self._receive:
                if self.session is None:
                    continue
                try:
                    # Sent as a plain notification: send_log_message warns that logging is
                    # deprecated in the 2026-07-28 protocol; setLevel came on an older one.
                    params = types.LoggingMessageNotificationParams(
                        level=level, logger=name, data=message
                    )
                    await self.session.send_notification(
                        types.LoggingMessageNotification(params=params)
                    )
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    return

    def attach(self) -> None:
        logging.getLogger(LOGGER_NAME).addHandler(self)

    def detach(self) -> None:
        logger = logging.getLogger(LOGGER_NAME)
        logger.removeHandler(self)
        if self._lowered_from is not None:
            logger.setLevel(self._lowered_from)
        self._send.close()
