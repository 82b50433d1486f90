"""Runs one email channel against the test Dovecot into a store, until killed: the process the
kill -9 test kills between receipt and processing.

    python run_email_channel.py STATE_DB WORKSPACE HOST PORT USER   (password in the environment)
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import anyio
from email_harness import email_channel

from wakeful.store.sqlite import Store


async def main(state: str, workspace: str, host: str, port: str, user: str) -> None:
    server = SimpleNamespace(host=host, port=int(port), user=user)
    async with await Store.open(state) as store:
        channel = email_channel(server, store, Path(workspace), first_sync_limit=1_000)
        await channel.run()


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:6])
