"""System events: the user's inactivity, background tasks past their deadline, the host's
disk, memory and CPU, and runaway tasks, each as a typed `system.*` event (see
:mod:`.channel`). `KIND` is what the channel registry loads for `[[channels.system]]`."""

from __future__ import annotations

from .channel import SystemChannel, SystemChannelKind, SystemWatch
from .settings import SystemChannelSettings

__all__ = ["KIND", "SystemChannel", "SystemChannelKind", "SystemChannelSettings", "SystemWatch"]

KIND = SystemChannelKind()
"""The "system" channel kind (a :class:`wakeful.core.channel.ChannelKind`)."""
