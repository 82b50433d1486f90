"""How a monitor of the system channel hands over what it found: to the channel's Inbox,
through the channel (which notes when it last delivered)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from ...core.channel import Delivery
from ...events import Event

__all__ = ["Deliver"]

Deliver = Callable[[Event], Awaitable[Delivery]]
