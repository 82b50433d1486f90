"""Where the public tool catalogs are: $WAKEFUL_TOOLSETS, or shared/data/toolsets beside the
repository (as the benchmarks look for them)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

TOOLSETS = Path(
    os.environ.get("WAKEFUL_TOOLSETS")
    or Path(__file__).resolve().parents[2] / "shared" / "data" / "toolsets"
)

# For tests that read the catalogs: skipped, saying where they were looked for, where they are not.
needs_toolsets = pytest.mark.skipif(
    not TOOLSETS.is_dir(),
    reason=f"the public tool catalogs are not at {TOOLSETS}; set WAKEFUL_TOOLSETS to their folder",
)
