"""Safety policies that sit between a model's request and the machine: path confinement first."""

from __future__ import annotations

from .paths import confine, display_path

__all__ = ["confine", "display_path"]
