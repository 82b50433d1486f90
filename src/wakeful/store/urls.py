"""How a store is named by URL: the schemes of a PostgreSQL database.

A leaf of the store package (it imports nothing), so that the command line and the runtime's
settings read one spelling without importing a store backend or its driver.
"""

from __future__ import annotations

from typing import Final

__all__ = ["POSTGRES_SCHEMES"]

# The URL schemes libpq reads as PostgreSQL.
POSTGRES_SCHEMES: Final = ("postgresql", "postgres")
