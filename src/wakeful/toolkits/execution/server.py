"""The execution server assembled: every execution tool, served over MCP behind the gate.

Files (`FILE_EDIT_TOOLS`: write and edit, linted after every write), the shell and Python in the
sandbox (`SHELL_TOOLS`, `INTERPRETER_TOOLS`; `BACKGROUND_TOOLS` follow background commands over
MCP), spreadsheets, and the outside world (`EMAIL_TOOLS`,
`CALENDAR_WRITE_TOOLS`, `WEBHOOK_TOOLS`, `GITHUB_TOOLS`: idempotency keys or precheck→confirm;
`MAIL_TOOLS` from :mod:`wakeful.toolkits.mail`: search, read and file mail over IMAP).
Like the perception tools they are ordinary wakeful tools: a runtime can offer them directly,
and :func:`execution_server` serves them to any MCP client, with a store for idempotency keys,
confirmation tokens and the audit log, and the safety gate around every call.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ...errors import UserError
from ...mcp.bridge import BridgeServer, build_server
from ...safety.gate import CallGate
from ...tools.spec import Tool
from ..mail.tools import MAIL_TOOLS
from .background import BACKGROUND_TOOLS
from .calendar_events import CALENDAR_WRITE_TOOLS
from .email import EMAIL_TOOLS
from .files import FILE_EDIT_TOOLS
from .github import GITHUB_TOOLS
from .interpreter import INTERPRETER_TOOLS
from .shell_exec import SHELL_TOOLS
from .spreadsheets import SPREADSHEET_TOOLS
from .webhook import WEBHOOK_TOOLS

EXECUTION_TOOLS: tuple[Tool, ...] = (
    *FILE_EDIT_TOOLS,
    *SHELL_TOOLS,
    *BACKGROUND_TOOLS,
    *INTERPRETER_TOOLS,
    *SPREADSHEET_TOOLS,
    *EMAIL_TOOLS,
    *MAIL_TOOLS,
    *CALENDAR_WRITE_TOOLS,
    *WEBHOOK_TOOLS,
    *GITHUB_TOOLS,
)
"""Every tool of the execution server."""

STATE_DIR = ".wakeful"
"""Under the root: the server's store, saved long outputs and plots."""

INSTRUCTIONS = """\
Tools that change things, under one root directory (every path is relative to it). Files:
write_file and edit_file (exact text replacement; each write is checked by the file's linter and
the problems come back with the result). shell_exec runs a command in a sandbox (no network
unless allowed, only the root writable); with background=true it returns a task_id at once:
fetch the result with task_result (stored, so a later connection can fetch it too), follow it
with task_status, stop it with cancel_task. code_interpreter runs Python whose variables persist
across calls. Spreadsheets: spreadsheet_read, spreadsheet_write, spreadsheet_formula. Outside
world: send_email and call_webhook first return a preview and a confirmation token — call again
with the token to execute; create_calendar_event and github_create_pull_request do not create
duplicates. Mail over IMAP: search_mail and read_mail (nothing is marked read), draft_reply
(saved to Drafts, not sent), move_mail, archive_mail, flag_mail. Dangerous calls may be refused
or need a person's approval; long output is cut to its head and tail and saved to a file you
can read."""


def execution_server(
    root: Path,
    *,
    settings: Sequence[object] = (),
    store_path: Path | None = None,
    gate: CallGate | None = None,
) -> BridgeServer:
    """An MCP server named "wakeful-execution" offering EXECUTION_TOOLS under `root`.

    `store_path` defaults to `<root>/.wakeful/execution.db`; `gate` (see
    :func:`wakeful.config.build_gate`) puts the safety layers around every call — without one,
    only each tool's own checks apply (the command policy, path confinement, tokens)."""
    if not root.is_dir():
        raise UserError(
            f"The root {str(root)!r} is not an existing directory. Give the directory the "
            "execution tools may change, e.g. --root ."
        )
    resolved = root.resolve()
    return build_server(
        "wakeful-execution",
        EXECUTION_TOOLS,
        instructions=INSTRUCTIONS,
        workdir=resolved,
        settings=settings,
        store_path=store_path or resolved / STATE_DIR / "execution.db",
        gate=gate,
    )


__all__ = [
    "BACKGROUND_TOOLS",
    "CALENDAR_WRITE_TOOLS",
    "EMAIL_TOOLS",
    "EXECUTION_TOOLS",
    "FILE_EDIT_TOOLS",
    "GITHUB_TOOLS",
    "INSTRUCTIONS",
    "INTERPRETER_TOOLS",
    "MAIL_TOOLS",
    "SHELL_TOOLS",
    "SPREADSHEET_TOOLS",
    "WEBHOOK_TOOLS",
    "execution_server",
]
