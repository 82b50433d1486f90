"""How the user wants to be reached: the `[delivery]` table of wakeful.toml.

```toml
[delivery]
channels = ["console", "telegram:me", "email:work"]  # where the user can be reached, in order
escalate_after_minutes = 10     # urgent and unread: the next channel after this long
active_minutes = 10             # seen this recently on a channel: the user is there
digest_every_minutes = 120      # low urgency waits for a digest this often
timezone = "Europe/Paris"       # of the quiet hours and digest times
quiet_hours = { start = "22:00", end = "07:30", allow = ["urgent"] }

[delivery.min_urgency]          # the least urgent message each channel may carry
"email:work" = "urgent"
```
"""

from __future__ import annotations

from datetime import time, tzinfo
from typing import Final, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = [
    "CONSOLE",
    "URGENCIES",
    "DeliverySettings",
    "QuietHours",
    "Urgency",
    "urgency_rank",
]

Urgency = Literal["low", "normal", "high", "urgent"]
URGENCIES: Final[tuple[Urgency, ...]] = ("low", "normal", "high", "urgent")
# Where the terminal and web consoles show messages: always a place the user can read them.
CONSOLE: Final = "console"


def urgency_rank(urgency: str) -> int:
    """0 (low) to 3 (urgent); a word a sender made up counts as normal."""
    return URGENCIES.index(urgency) if urgency in URGENCIES else 1


class QuietHours(BaseModel):
    """Hours when only some urgencies may disturb (the rest wait until the hours end); `start`
    after `end` spans midnight."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    start: time
    end: time
    allow: tuple[Urgency, ...] = ("urgent",)

    def contains(self, moment: time) -> bool:
        if self.start == self.end:
            return False
        if self.start < self.end:
            return self.start <= moment < self.end
        return moment >= self.start or moment < self.end


class DeliverySettings(BaseModel):
    """See the module docs. With no `[delivery]` table: every channel that can reach the user,
    in the order they are configured, after the console; ten minutes for presence and
    escalation; hourly digests; no quiet hours."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    channels: tuple[str, ...] | None = None
    """Where the user can be reached, in the order escalation tries them ("console", or a
    channel's full name such as "telegram:me"); by default the console, then every configured
    channel that can carry messages to the user."""

    active_minutes: float = Field(default=10.0, gt=0, le=24 * 60)
    """The user counts as present on the channel they were last seen on for this long."""

    escalate_after_minutes: float = Field(default=10.0, gt=0, le=7 * 24 * 60)
    """An urgent message still unread this long after reaching one channel goes to the next."""

    digest_every_minutes: float = Field(default=60.0, gt=0, le=7 * 24 * 60)
    """Low-urgency messages wait and go out together this often (unless read meanwhile)."""

    timezone: str | None = None
    """The IANA timezone of `quiet_hours` (e.g. "Europe/Paris"); the machine's by default."""

    quiet_hours: QuietHours | None = None

    min_urgency: dict[str, Urgency] = Field(default_factory=dict)
    """Per channel, the least urgent message it may carry (e.g. email only for "urgent")."""

    max_age_hours: float = Field(default=24.0, gt=0, le=30 * 24)
    """Escalations and digests of messages older than this are dropped (after a long stop,
    day-old news is not pushed to the phone)."""

    @field_validator("channels")
    @classmethod
    def _distinct(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if value is None:
            return None
        if not value:
            raise ValueError(
                'channels is empty: name at least one, e.g. channels = ["console"], or leave '
                "it out to use every configured channel"
            )
        twice = sorted({name for name in value if value.count(name) > 1})
        if twice:
            raise ValueError(f"channels names {', '.join(twice)} more than once; name each once")
        return value

    @field_validator("timezone")
    @classmethod
    def _zone(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                ZoneInfo(value)
            except (ZoneInfoNotFoundError, ValueError) as exc:
                raise ValueError(
                    f"{value!r} is not a timezone name: use an IANA name such as "
                    '"Europe/Paris" or "UTC"'
                ) from exc
        return value

    @model_validator(mode="after")
    def _known_min_urgency(self) -> DeliverySettings:
        if self.channels is not None:
            unknown = sorted(set(self.min_urgency) - set(self.channels))
            if unknown:
                raise ValueError(
                    f"min_urgency names {', '.join(unknown)}, which channels does not list; add "
                    "it to channels or remove it from min_urgency"
                )
        return self

    def zone(self) -> tzinfo | None:
        """The quiet hours' timezone, or None for the machine's."""
        return ZoneInfo(self.timezone) if self.timezone else None
