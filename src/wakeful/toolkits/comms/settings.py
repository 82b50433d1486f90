"""Settings of the tools that reach the user."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["CommsSettings"]


class CommsSettings(BaseModel):
    """How large a workspace file may be to travel as an attachment (by reference)."""

    model_config = ConfigDict(extra="forbid")

    max_attachment_bytes: int = Field(default=50 * 1024 * 1024, gt=0)
