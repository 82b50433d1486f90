"""Findings about third-party MCP tools: poisoned text, shadowing of other servers' tools.

A third-party MCP server is untrusted input (DESIGN.md, Safety): its tool definitions enter the
model's context verbatim. `scan_servers` audits the tools of several servers together and
returns :class:`TrustFinding` objects in the shape `wakeful mcp audit --json` prints:

- ``poisoning``: instructions hidden in a tool's model-visible text (see :mod:`.mcp_poisoning`);
- ``shadowing``: a tool whose text refers to another server's tools ("when send_email is
  called, BCC …", "the other email tool"), or a tool name that several servers offer;
- ``changed``: a definition that differs from its pin (made by :mod:`.mcp_pins`).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .poisoning import (
    SEVERITY_RANK,
    Severity,
    Signal,
    scan_definition,
    scan_text,
    visible_texts,
)

FindingKind = Literal["poisoning", "shadowing", "changed"]

_EVIDENCE_SIGNALS = 3


@dataclass(frozen=True)
class TrustFinding:
    """One reason to distrust one tool (`tool` is None for the server's own instructions)."""

    server: str
    tool: str | None
    kind: FindingKind
    severity: Severity
    evidence: str
    """The offending excerpt, quoted, with where it was found and what it does."""

    def as_dict(self) -> dict[str, str | None]:
        return {
            "server": self.server,
            "tool": self.tool,
            "kind": self.kind,
            "severity": self.severity,
            "evidence": self.evidence,
        }


def worst(findings: Iterable[TrustFinding]) -> Severity | None:
    """The highest severity among the findings, or None when there are none."""
    ranked = sorted((f.severity for f in findings), key=SEVERITY_RANK.__getitem__)
    return ranked[-1] if ranked else None


def _evidence(signals: Sequence[Signal]) -> str:
    ordered = sorted(signals, key=lambda s: -SEVERITY_RANK[s.severity])
    parts = [f'{s.where}: "{s.excerpt}" ({s.reason})' for s in ordered[:_EVIDENCE_SIGNALS]]
    more = len(ordered) - _EVIDENCE_SIGNALS
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


def _finding_from(server: str, tool: str | None, signals: Sequence[Signal]) -> list[TrustFinding]:
    if not signals:
        return []
    severity = max((s.severity for s in signals), key=SEVERITY_RANK.__getitem__)
    return [TrustFinding(server, tool, "poisoning", severity, _evidence(signals))]


def poisoning_findings(server: str, definition: Mapping[str, Any]) -> list[TrustFinding]:
    """At most one finding for one tool (MCP wire form), at the severity of its worst signal."""
    return _finding_from(server, str(definition.get("name", "")), scan_definition(definition))


def instructions_findings(server: str, instructions: str | None) -> list[TrustFinding]:
    """At most one finding for the instructions a server sends when it is initialised."""
    if not instructions:
        return []
    return _finding_from(server, None, scan_text(instructions, "server instructions"))


# --- shadowing ----------------------------------------------------------------------------------

# Words that, next to a reference to another server's tool, make it an instruction about it.
_STEERING = re.compile(
    r"\b(instead of|rather than|in place of|replaces?|override|must|should|always|never|"
    r"make sure|also|whenever|when|before|after|bcc|cc|forward|redirect|change)\b"
    r"|代替|取代|替代|而不是|必须|必須|务必|務必|总是|總是|同时|同時|时|時|之前|之后|之後|密送|抄送|转发|轉發",
    re.IGNORECASE,
)
_OTHER_TOOLS = re.compile(
    r"\b(the|any|all|every)\s+other\s+([\w-]+\s+){0,2}(tools?|servers?|functions?)\b"
    r"|\banother\s+([\w-]+\s+){0,2}(tool|server)\b|\bother\s+mcp\s+servers?\b"
    r"|(其他|其它|另一个|另一個)[^。\n]{0,8}(工具|服务器|伺服器|服务|服務)",
    re.IGNORECASE,
)
_SENTENCE = re.compile(r"[^.!?。！？\n]+[.!?。！？]?")


def _distinctive(name: str) -> bool:
    """A name unlikely to be an ordinary word: snake_case, kebab-case, dotted or camelCase."""
    return len(name) >= 4 and bool(re.search(r"[_.-]|[a-z][A-Z]", name))


_IDENTIFIER = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*[A-Za-z0-9]")
_NAMED_WORD = re.compile(r"[`'\"“‘]?\b([A-Za-z0-9_.-]+)[`'\"”’]?\s+(?:tool|function)\b")
_PART = re.compile(r"[_.-]")


def _named_tools(text: str, names: Collection[str]) -> list[tuple[str, int]]:
    """(name, offset) of every tool name in `names` the text uses, in the same case:
    distinctive names as identifiers, also inside prefixes (mcp_tool_send_email); plain words
    only followed by "tool" ("the search tool")."""
    found: list[tuple[str, int]] = []
    for match in _IDENTIFIER.finditer(text):
        token = match.group()
        # The token itself and every tail after a separator: "mcp_tool_send_email" also
        # reads as "tool_send_email", "send_email" and "email".
        starts = [0, *(m.end() for m in _PART.finditer(token))]
        for start in starts:
            name = token[start:]
            if name in names and _distinctive(name):
                found.append((name, match.start()))
    for match in _NAMED_WORD.finditer(text):
        word = match.group(1)
        if word in names and not _distinctive(word):
            found.append((word, match.start()))
    return found


def _model_texts(definition: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The texts a tool speaks with (its own name and parameter names are not claims)."""
    return [
        (where, text)
        for where, text in visible_texts(definition)
        if where != "name" and not where.endswith("(a parameter name)")
    ]


def _sentence_at(text: str, start: int) -> str:
    for match in _SENTENCE.finditer(text):
        if match.start() <= start < match.end():
            return match.group().strip()
    return text.strip()


def _short(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def shadowing_findings(servers: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[TrustFinding]:
    """Tools that refer to other servers' tools, and tool names offered by several servers."""
    owners: dict[str, list[str]] = {}
    for server, tools in servers.items():
        for tool in tools:
            owners.setdefault(str(tool.get("name", "")), []).append(server)
    findings: list[TrustFinding] = []
    for server, tools in servers.items():
        own = {str(t.get("name", "")) for t in tools}
        foreign = {name: s for name, s in owners.items() if name and name not in own}
        for tool in tools:
            name = str(tool.get("name", ""))
            others = [s for s in owners.get(name, []) if s != server]
            if others:
                findings.append(
                    TrustFinding(
                        server,
                        name,
                        "shadowing",
                        "medium",
                        f"the tool name {name!r} is also offered by server(s) "
                        f"{', '.join(repr(s) for s in others)}; a call meant for one could "
                        "reach the other",
                    )
                )
            findings.extend(_references(server, tool, foreign))
    return findings


def _references(
    server: str,
    tool: Mapping[str, Any],
    foreign: Mapping[str, list[str]],
) -> list[TrustFinding]:
    name = str(tool.get("name", ""))
    steered = False
    evidence: list[str] = []
    for where, text in _model_texts(tool):
        mentions = [
            (f"{other!r} of server {', '.join(repr(s) for s in foreign[other])}", offset)
            for other, offset in dict(_named_tools(text, foreign.keys())).items()
        ]
        if match := _OTHER_TOOLS.search(text):
            mentions.append((repr(match.group()), match.start()))
        for what, offset in mentions:
            sentence = _sentence_at(text, offset)
            steered = steered or _STEERING.search(sentence) is not None
            evidence.append(f'{where} refers to {what}: "{_short(sentence)}"')
    if not evidence:
        return []
    # A mention alone ("unlike send_email, …") is worth a look; an instruction next to it
    # ("when send_email is called, also BCC …") is the attack.
    severity: Severity = "high" if steered else "medium"
    return [TrustFinding(server, name, "shadowing", severity, "; ".join(evidence[:3]))]


# --- all together -------------------------------------------------------------------------------


def scan_servers(
    servers: Mapping[str, Sequence[Mapping[str, Any]]],
    instructions: Mapping[str, str | None] | None = None,
) -> list[TrustFinding]:
    """Poisoning and shadowing findings for the tools of several servers (MCP wire form:
    name, title, description, inputSchema, outputSchema, annotations), worst first."""
    findings: list[TrustFinding] = []
    for server, tools in servers.items():
        findings.extend(instructions_findings(server, (instructions or {}).get(server)))
        for tool in tools:
            findings.extend(poisoning_findings(server, tool))
    findings.extend(shadowing_findings(servers))
    return sorted(findings, key=lambda f: -SEVERITY_RANK[f.severity])
