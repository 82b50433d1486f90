"""The denial breaker's one setting is checked where it is given."""

from __future__ import annotations

import pytest

from wakeful.errors import UserError
from wakeful.safety.breaker import DenialBreaker


@pytest.mark.parametrize("threshold", [0, -1])
def test_a_threshold_below_one_is_a_user_error_that_names_the_fix(threshold: int) -> None:
    with pytest.raises(UserError, match=rf"at least 1, got {threshold}; give the number"):
        DenialBreaker(threshold)
