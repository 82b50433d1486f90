"""The settings of a system channel: `[[channels.system]]` in wakeful.toml.

Every option has a default that suits one machine, so an empty table turns on all three
monitors::

    [[channels.system]]
    session = "main"                 # the session told about inactivity and the host
    monitors = ["user_inactive", "process_timeout", "resources"]
    check_interval_seconds = 30
    user_inactive_minutes = 30
    task_deadline_minutes = 30       # a background task without its own deadline (run_shell
                                     # stops one at 60 by default: this leaves time to decide)
    disk_percent = 90                # the workspace's and the store's file systems, and disk_paths
    memory_percent = 90
    cpu_percent = 95                 # averaged over one check interval
    margin_percent = 5               # back under threshold - margin before a second alert
    min_alert_interval_minutes = 10
    task_cpu_seconds = 600           # one background task's process tree
    task_memory_mb = 2048

A threshold of 0 turns its check off.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["Monitor", "SystemChannelSettings"]

Monitor = Literal["user_inactive", "process_timeout", "resources"]
ALL_MONITORS: tuple[Monitor, ...] = ("user_inactive", "process_timeout", "resources")


class SystemChannelSettings(BaseModel):
    """What a system channel watches, how often, and its thresholds (see the module docs)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field("system", min_length=1, description="The channel's name, unique.")
    session: str = Field(
        "main",
        min_length=1,
        description="The session told about user inactivity and the host's resources; a "
        "background task's timeout and runaway alerts go to the session that started it.",
    )
    monitors: tuple[Monitor, ...] = Field(
        ALL_MONITORS, description="Which checks run: any of " + ", ".join(ALL_MONITORS) + "."
    )
    check_interval_seconds: float = Field(30.0, gt=0, le=3600)
    user_inactive_minutes: float = Field(30.0, gt=0)
    task_deadline_minutes: float = Field(30.0, gt=0)
    disk_percent: float = Field(90.0, ge=0, le=100)
    memory_percent: float = Field(90.0, ge=0, le=100)
    cpu_percent: float = Field(95.0, ge=0, le=100)
    margin_percent: float = Field(5.0, ge=0, le=50)
    min_alert_interval_minutes: float = Field(10.0, ge=0)
    disk_paths: tuple[Path, ...] = Field(
        (),
        description="More paths whose file systems are checked, besides the workspace's "
        "and the store's.",
    )
    task_cpu_seconds: float = Field(600.0, ge=0)
    task_memory_mb: float = Field(2048.0, ge=0)
    top_consumers: int = Field(5, ge=1, le=50)

    @field_validator("monitors")
    @classmethod
    def _some_monitors(cls, value: tuple[Monitor, ...]) -> tuple[Monitor, ...]:
        if not value:
            raise ValueError(
                "monitors is empty, so the channel would watch nothing. Name at least one of "
                + ", ".join(ALL_MONITORS)
                + ", or remove the [[channels.system]] table."
            )
        return tuple(dict.fromkeys(value))

    @field_validator("disk_paths")
    @classmethod
    def _absolute_paths(cls, value: tuple[Path, ...]) -> tuple[Path, ...]:
        relative = [str(path) for path in value if not path.is_absolute()]
        if relative:
            raise ValueError(
                f"disk_paths must be absolute, got {', '.join(relative)}: a relative path "
                "would depend on where the runtime was started. Write the full path, e.g. "
                '"/var/lib/wakeful".'
            )
        return value

    def watches(self, monitor: Monitor) -> bool:
        return monitor in self.monitors
