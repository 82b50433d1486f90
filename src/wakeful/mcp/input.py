"""Input a server asks for in the middle of a tool call, which this client cannot collect.

Newer MCP servers can stop a call to ask for something only a person, or the client, can give:
an input-required result (2026-07-28) that embeds elicitation, sampling or roots requests, or the
URL-elicitation-required error -32042 (2025-11-25: "open this page to sign in"). The connection
answers roots, for servers allowed to, sampling (see :mod:`.sampling`), and for servers allowed
to elicit in a runtime that can ask a person, elicitation (see :mod:`.elicitation`). What is
left — elicitation of a server with `allow_elicitation = false` or with nobody to ask, and the
-32042 error, whose pages are not put to the person (yet) — ends the call with an error that
says what the server asked for and that calling again with other arguments will not help,
instead of the advice for a rejected call ("check the arguments and call again"), which invites
retries.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

import mcp_types
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from ..tools.spec import ToolResult

_QUOTE_LIMIT = 300

AskedKind = Literal["form", "url", "sampling", "roots"]


@dataclass(frozen=True)
class AskedInput:
    """One thing a server asked for: a form to fill in, a page to open, a model to run for it,
    or the directories it may work in. `message` is the server's own text (untrusted)."""

    kind: AskedKind
    message: str = ""
    url: str | None = None
    fields: tuple[str, ...] = ()

    def record(self) -> dict[str, Any]:
        """The request as data, for `ToolResult.structured`."""
        record: dict[str, Any] = {"kind": self.kind, "message": self.message}
        if self.url is not None:
            record["url"] = self.url
        if self.fields:
            record["fields"] = list(self.fields)
        return record


def asked_by_result(result: mcp_types.InputRequiredResult) -> list[AskedInput]:
    """What an input-required result asks for, one entry per embedded request."""
    asked: list[AskedInput] = []
    for request in (result.input_requests or {}).values():
        if isinstance(request, mcp_types.ElicitRequest):
            asked.append(_elicitation(request.params))
        elif isinstance(request, mcp_types.CreateMessageRequest):
            asked.append(AskedInput("sampling"))
        else:
            asked.append(AskedInput("roots"))
    return asked


def asked_by_error(error: MCPError) -> list[AskedInput] | None:
    """The pages a URL-elicitation-required error (-32042) asks a person to open, or None when
    `error` is another error. A -32042 whose data does not follow the protocol asks for one
    page the server did not name."""
    if error.code != mcp_types.URL_ELICITATION_REQUIRED:
        return None
    try:
        data = mcp_types.ElicitationRequiredErrorData.model_validate(error.data)
    except ValidationError:
        return [AskedInput("url", error.message)]
    return [_elicitation(params) for params in data.elicitations] or [
        AskedInput("url", error.message)
    ]


def needs_input_result(server: str, tool: str, asked: Iterable[AskedInput]) -> ToolResult:
    """The error for a call that stopped to ask for input: what was asked, and what to do."""
    asked = list(asked)
    structured = {"input_required": [a.record() for a in asked]}
    if not asked:
        return ToolResult(
            f"MCP server {server!r} kept answering the call to {tool} with 'input required' "
            "without saying what it needs. This client cannot finish such a call; try it later "
            "or use another tool.",
            is_error=True,
            structured=structured,
        )
    pages = [a for a in asked if a.kind == "url"]
    if pages and len(pages) == len(asked):
        return ToolResult(
            _open_pages_text(server, tool, pages), is_error=True, structured=structured
        )
    what = "; ".join(_describe(a) for a in asked)
    person = any(a.kind in ("form", "url") for a in asked)
    needs = "input from a person" if person else "something from this client"
    tell = (
        "Tell the user what the server asked for, or use another tool."
        if person
        else "Use another tool or approach."
    )
    return ToolResult(
        f"MCP server {server!r} needs {needs} before {tool} can finish, and this client cannot "
        f"collect it yet: {what}. Do not call {tool} again, with these or other arguments: the "
        f"server will only ask again. {tell}",
        is_error=True,
        structured=structured,
    )


def _elicitation(params: mcp_types.ElicitRequestParams) -> AskedInput:
    if isinstance(params, mcp_types.ElicitRequestURLParams):
        return AskedInput("url", params.message, url=params.url)
    properties = params.requested_schema.get("properties")
    fields = tuple(str(name) for name in properties) if isinstance(properties, dict) else ()
    return AskedInput("form", params.message, fields=fields)


def _describe(asked: AskedInput) -> str:
    if asked.kind == "form":
        fields = f" (fields: {', '.join(asked.fields)})" if asked.fields else ""
        return f"the server asked {_quote(asked.message)}{fields}"
    if asked.kind == "url":
        return f"the server asks a person to open {_page(asked)}"
    if asked.kind == "sampling":
        return "the server asks this client to run a language model for it (MCP sampling)"
    return "the server asks which directories it may work in (MCP roots)"


def _open_pages_text(server: str, tool: str, pages: list[AskedInput]) -> str:
    each = "; ".join(_page(p) for p in pages)
    return (
        f"MCP server {server!r} needs a person to open a web page before {tool} can work (to "
        f"sign in, authorize access or confirm something there), and this client cannot "
        f"collect that itself: {each}. Do not call {tool} again with other arguments. Tell the "
        "user what the server asked for and give them the address, naming its site, so that "
        f"they decide whether to open it; once they say they are done, {tool} may work. "
        "Otherwise use another tool."
    )


def _page(asked: AskedInput) -> str:
    if asked.url is None:
        return f"a page it did not name, saying {_quote(asked.message)}"
    site = urlsplit(asked.url).hostname or "an unknown site"
    return f"{asked.url} (on {site}), saying {_quote(asked.message)}"


def _quote(text: str) -> str:
    """Third-party text, quoted and cut short, so that it reads as the server's words."""
    line = " ".join(text.split())
    return repr(line if len(line) <= _QUOTE_LIMIT else line[: _QUOTE_LIMIT - 1] + "…")
