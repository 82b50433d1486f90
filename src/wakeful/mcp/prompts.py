"""The built-in skills offered as MCP prompts: a skill's name, description and instructions.

Skills are read as the runtime reads them (:func:`wakeful.discovery.skills.discover_skills`,
built-in root only: a server has no project or user of its own). A prompt's one message is the
skill's SKILL.md body (after the front matter), as a user message. Skills have no arguments,
so neither do the prompts. The skills are read once, when the server is built.
"""

from __future__ import annotations

from dataclasses import dataclass

import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from ..discovery.skills import BUILTIN_ROOT, discover_skills, split_front_matter


@dataclass(frozen=True, slots=True)
class SkillPrompt:
    name: str
    description: str
    body: str


@dataclass(frozen=True, slots=True)
class SkillPrompts:
    """The skills as prompts, by name."""

    prompts: tuple[SkillPrompt, ...]

    def listed(self) -> types.ListPromptsResult:
        return types.ListPromptsResult(
            prompts=[types.Prompt(name=p.name, description=p.description) for p in self.prompts]
        )

    def get(self, name: str, arguments: dict[str, str] | None) -> types.GetPromptResult:
        found = next((p for p in self.prompts if p.name == name), None)
        if found is None:
            names = ", ".join(p.name for p in self.prompts) or "(none)"
            raise MCPError(
                INVALID_PARAMS,
                f"Unknown prompt {name!r}. This server's prompts are: {names}; "
                "list them with prompts/list.",
            )
        if arguments:
            raise MCPError(
                INVALID_PARAMS,
                f"The prompt {name!r} takes no arguments, but got {', '.join(sorted(arguments))}.",
            )
        message = types.PromptMessage(
            role="user", content=types.TextContent(type="text", text=found.body)
        )
        return types.GetPromptResult(description=found.description, messages=[message])


def builtin_skill_prompts() -> SkillPrompts:
    """The built-in skills as prompts (a malformed one is skipped, as the runtime skips it)."""
    found = discover_skills([("builtin", BUILTIN_ROOT)])
    prompts = []
    for skill in found.skills:
        text = skill.skill_file.read_text(encoding="utf-8")
        split = split_front_matter(text)
        lines = text.removeprefix("\ufeff").split("\n")
        body = "\n".join(lines[split[1] - 1 :]) if split else text
        prompts.append(SkillPrompt(skill.name, skill.description, body.strip() + "\n"))
    return SkillPrompts(tuple(prompts))
