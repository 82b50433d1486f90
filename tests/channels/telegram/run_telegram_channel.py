"""Runs one Telegram channel against a loopback Bot API into a store, until killed: the process
the kill -9 test kills between receipt and processing.

    python run_telegram_channel.py STATE_DB WORKSPACE API_URL   (token in the environment)
"""

from __future__ import annotations

import sys
from pathlib import Path

# The tests' own modules (loopback_http, servers) are imported by the harness.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import anyio
from telegram_harness import telegram_channel

from wakeful.store.sqlite import Store


async def main(state: str, workspace: str, api_url: str) -> None:
    async with await Store.open(state) as store:
        channel = telegram_channel(api_url, store, Path(workspace))
        await channel.run()


if __name__ == "__main__":
    state, workspace, api_url = sys.argv[1:4]
    anyio.run(main, state, workspace, api_url)
