"""Where the public tool catalogs are: $WAKEFUL_TOOLSETS, or shared/data/toolsets beside the
repository (as the benchmarks look for them)."""

from __future__ import annotations

import os
from pathlib import Path

TOOLSETS = Path(
    os.environ.get("WAKEFUL_TOOLSETS")
    or Path(__file__).resolve().parents[2] / "shared" / "data" / "toolsets"
)
