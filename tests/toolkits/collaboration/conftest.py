"""The collaboration tools' tests use the real servers of tests/servers, and the XMPP channel's
test harness (tests/channels/xmpp/xmpp_harness.py: accounts, the channel running, peers)."""

from __future__ import annotations

import sys
from pathlib import Path

from servers.fixtures import prosody  # noqa: F401

# The harness lives beside the XMPP channel's tests, a directory pytest puts on the path only
# when it collects those tests.
_XMPP_TESTS = str(Path(__file__).resolve().parents[2] / "channels" / "xmpp")
if _XMPP_TESTS not in sys.path:
    sys.path.append(_XMPP_TESTS)
