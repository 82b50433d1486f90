"""The parameters the mail tools share, and how they find their settings and sender."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import Field

from ...errors import ToolError
from ...services import settings_of
from ...tools.spec import ToolContext
from ..execution.settings import EmailSettings
from .settings import MailSettings

__all__ = ["Mailbox", "Uid", "Uidvalidity", "attachment_folder", "mail_settings", "sender"]

Uid = Annotated[
    int,
    Field(
        ge=1,
        le=4_294_967_295,
        description="The message's uid in the mailbox, as search_mail shows it, e.g. 42.",
    ),
]

Uidvalidity = Annotated[
    int | None,
    Field(
        ge=1,
        le=4_294_967_295,
        description="The mailbox's uidvalidity that came with the uid (search_mail shows it); "
        "when given and the mailbox was renumbered since, the call is refused instead of acting "
        "on another message, e.g. 1796158365.",
    ),
]


Mailbox = Annotated[
    str,
    Field(
        min_length=1,
        max_length=500,
        description="The mailbox (folder) the message is in, e.g. 'INBOX' or 'Archive/2026'; "
        "names may be in any script.",
    ),
]


def mail_settings(ctx: ToolContext) -> MailSettings:
    return settings_of(ctx.services, MailSettings)


def sender(ctx: ToolContext, settings: MailSettings) -> str:
    """Who drafts are from: [tools.mail] from_address, else [tools.email] from_address."""
    address = settings.from_address or settings_of(ctx.services, EmailSettings).from_address
    if address is None:
        raise ToolError(
            f"{ctx.tool_name} has no sender address: from_address is set neither in "
            "[tools.mail] nor in [tools.email]. Set it (e.g. from_address = 'Agent "
            "<agent@example.com>') and restart."
        )
    return address


def attachment_folder(mailbox: str, uidvalidity: int, uid: int) -> str:
    """Where read_mail saves one message's attachments, relative to the workspace."""
    safe = re.sub(r"[^\w.-]+", "_", mailbox).strip("._") or "mailbox"
    return f".wakeful/attachments/{safe}-{uidvalidity}-{uid}"
