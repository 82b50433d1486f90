"""Fixtures of the collaboration tests."""

from __future__ import annotations

import pytest
from delegation_views import travel_view

from wakeful.collab import ParentView


@pytest.fixture
def view() -> ParentView:
    """The travel conversation of :mod:`delegation_views`, delegating "Book the flight…"."""
    return travel_view()
