"""`load_skill`: a skill's instructions, and the files they point to, read when a task needs them.

The index in the system prompt names each skill; this tool reads the rest on demand, a window of
lines at a time, confined to the skill's folder. The runtime's skills are discovered once and kept
in `Services.state` (:func:`skills_of`), so the prompt's index and the tool agree; the roots come
from :class:`SkillsSettings`.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from difflib import get_close_matches
from pathlib import Path
from typing import Annotated, Any

import anyio
from pydantic import BaseModel, ConfigDict, Field

from ..errors import ToolError
from ..safety.beneath import Opened, Root
from ..services import Services, settings_of, state_of
from ..tools.spec import Tool, ToolAnnotations, ToolContext, ToolResult, tool
from .skills import (
    MAX_NAME_CHARS,
    SKILL_FILE,
    Skill,
    SkillSet,
    default_roots,
    discover_skills,
    split_front_matter,
)

__all__ = [
    "SKILL_TOOLS",
    "DiscoveredSkills",
    "SkillsSettings",
    "load_skill",
    "skill_roots",
    "skills_of",
]

MAX_READ_BYTES = 8 * 1024 * 1024
# Characters of file text in one result; the header and notes fit in the rest.
BODY_LIMIT = 12_000
DEFAULT_LIMIT = 500
MAX_LIMIT = 2_000
_LISTED_FILES = 40


class SkillsSettings(BaseModel):
    """Where the runtime looks for skills."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    roots: tuple[tuple[str, Path], ...] | None = None
    """(source, folder) pairs, highest precedence first; None means :func:`default_roots` of
    the services' working directory."""


@dataclass
class DiscoveredSkills:
    """The skills of one runtime, discovered once and kept in `Services.state`."""

    roots: tuple[tuple[str, Path], ...] = ()
    skill_set: SkillSet | None = None


def skill_roots(services: Services) -> tuple[tuple[str, Path], ...]:
    """The roots the settings name, or the default roots of the working directory."""
    configured = settings_of(services, SkillsSettings).roots
    return configured if configured is not None else tuple(default_roots(services.workdir))


async def skills_of(services: Services, *, refresh: bool = False) -> SkillSet:
    """The runtime's skills: discovered on first use (in a thread), then kept.

    The prompt's index and `load_skill` both use this, so they agree on which skills exist.
    `refresh=True` discovers again; `load_skill` does so when asked for a name it does not
    know (a skill added during the session). Build the system prompt's index once per session,
    so that a refresh never changes the prompt prefix.
    """
    cache = state_of(services, DiscoveredSkills)
    roots = skill_roots(services)
    if refresh or cache.skill_set is None or cache.roots != roots:
        cache.skill_set = await anyio.to_thread.run_sync(discover_skills, roots)
        cache.roots = roots
    return cache.skill_set


@tool(
    annotations=ToolAnnotations(read_only=True, idempotent=True),
    examples=(
        {"name": "writing-wakeful-tools"},
        {"name": "writing-wakeful-tools", "path": "references/description-standard.md"},
        {"name": "pdf-processing", "path": "references/forms.md", "offset": 500, "limit": 200},
    ),
)
async def load_skill(
    ctx: ToolContext,
    name: Annotated[
        str,
        Field(
            min_length=1,
            max_length=MAX_NAME_CHARS,
            description="The skill's name as the skills index lists it, "
            "e.g. 'writing-wakeful-tools'.",
        ),
    ],
    path: Annotated[
        str | None,
        Field(
            min_length=1,
            max_length=4096,
            description="A file of the skill, relative to its folder, as its instructions name "
            "it; leave it out for the instructions themselves, e.g. 'references/guide.md'.",
        ),
    ] = None,
    offset: Annotated[
        int,
        Field(ge=0, le=1_000_000_000, description="Lines to skip from the start, e.g. 500."),
    ] = 0,
    limit: Annotated[
        int,
        Field(
            ge=1,
            le=MAX_LIMIT,
            description=f"Most lines to show (1-{MAX_LIMIT}); fewer come back when they would "
            f"pass {BODY_LIMIT:,} characters, e.g. 200.",
        ),
    ] = DEFAULT_LIMIT,
) -> ToolResult:
    """Read a skill's instructions, or a file in the skill's folder, a window of lines at a time.

    Use it when the task matches a skill in the skills index of the system prompt: first
    load_skill(name) for its instructions (SKILL.md without its front matter), then each file
    the instructions point to, by its path relative to the skill folder
    (path="references/guide.md"). Use offset to page through a long file.

    It cannot read outside the skill's folder ('..', absolute paths elsewhere and symlinks that
    lead out are refused), does not run scripts (run them from the folder the result names,
    with a shell tool), and does not read binary files, files that are not UTF-8, or files over
    8 MiB. It knows only the skills in the index (project, user and built-in ones).

    Result: a header such as "Skill 'pdf-processing' (project), SKILL.md instructions: lines
    1–120 of 120 shown", a line naming the skill's folder, a blank line, then the file's lines
    exactly as stored (no line numbers, nothing changed), then notes: the offset that continues
    ("More: pass offset=500 for the next lines.") and, with the instructions, the skill's other
    files. structuredContent holds skill, source, folder, path, first_line, last_line,
    total_lines and next_offset.

    Cost: a few milliseconds; at most 12,000 characters of file text per call.
    """
    skill_set = await skills_of(ctx.services)
    skill = skill_set.get(name)
    if skill is None:
        skill_set = await skills_of(ctx.services, refresh=True)
        skill = skill_set.get(name)
    if skill is None:
        raise ToolError(_unknown_skill(name, skill_set))
    return await anyio.to_thread.run_sync(_load, skill, path, offset, limit)


def _unknown_skill(name: str, skill_set: SkillSet) -> str:
    for problem in skill_set.problems:
        if name in (problem.path.name, problem.path.parent.name):
            return (
                f"The skill {name!r} exists but was skipped because it is malformed: "
                f"{problem.problem} Until it is fixed, do the task without it."
            )
    names = [skill.name for skill in skill_set.skills]
    if not names:
        return f"There is no skill {name!r}, and no skills are installed. Do the task without one."
    close = get_close_matches(name, names, n=3, cutoff=0.6)
    hint = f" Did you mean {', '.join(repr(n) for n in close)}?" if close else ""
    return (
        f"There is no skill {name!r}.{hint} The skills are: {', '.join(names)}. Pass one of "
        "these names exactly as the skills index lists it."
    )


def _load(skill: Skill, path: str | None, offset: int, limit: int) -> ToolResult:
    folder = _existing_folder(skill)
    try:
        root = Root(folder)
    except (FileNotFoundError, NotADirectoryError) as exc:  # gone since the check above
        raise _gone(skill) from exc
    # The file is opened beneath the skill's folder by descriptor and read from that descriptor,
    # so a symlink swapped in after a check cannot lead the read out of the folder.
    with root:
        if path is None:
            try:
                found = root.open(SKILL_FILE)
            except ToolError as exc:
                raise ToolError(
                    f"The skill {skill.name!r} no longer has a {SKILL_FILE} in {str(folder)!r}; "
                    "it was removed after the session started. Do the task without the skill."
                ) from exc
            shown = f"{SKILL_FILE} instructions"
        else:
            found = root.open(path)
            shown = found.shown
        with found:
            target = folder / found.relative
            if stat.S_ISDIR(os.fstat(found.fd).st_mode):
                if path is None:
                    raise ToolError(
                        f"The skill {skill.name!r} has a folder named {SKILL_FILE} in "
                        f"{str(folder)!r}, not instructions. Do the task without the skill."
                    )
                raise ToolError(
                    f"{path!r} is a folder of the skill {skill.name!r}; load_skill reads files. "
                    f"Files in it: {_file_list(target, folder)}. Pass one of them as path."
                )
            text = _read_text(skill, found, target, shown)
    body_line = 1
    if path is None:
        parts = split_front_matter(text)
        if parts is not None:
            body_line = parts[1]
            text = "\n".join(text.split("\n")[body_line - 1 :])
    lines = _lines(text)
    total = len(lines)
    header = f"Skill {skill.name!r} ({skill.source}), {shown}"
    where = f"Folder: {folder} (paths in the skill are relative to it)"
    data: dict[str, Any] = {
        "skill": skill.name,
        "source": skill.source,
        "folder": str(folder),
        "path": SKILL_FILE if path is None else shown,
        "total_lines": total,
    }
    if path is None:
        data["body_starts_at_file_line"] = body_line
    if total == 0:
        return ToolResult(f"{header}: empty, no lines to show.\n{where}", structured=data)
    if offset >= total:
        raise ToolError(
            f"{shown} of the skill {skill.name!r} has {total} line{'' if total == 1 else 's'}, "
            f"so offset={offset} is past its end. Pass an offset below {total}."
        )
    chosen, cut = _window(lines, offset, limit)
    first, last = offset + 1, offset + len(chosen)
    span = f"line {first}" if first == last else f"lines {first}–{last}"
    next_offset = last if last < total and not cut else None
    notes: list[str] = []
    if cut:
        notes.append(
            f"Line {last} is longer than one result and is cut after {BODY_LIMIT:,} characters; "
            f"load_skill cannot show the rest of it. Read {target} with a tool that reads by "
            "bytes."
        )
    elif next_offset is not None:
        notes.append(f"More: pass offset={next_offset} for the next lines.")
    if path is None and offset == 0:
        files = _file_list(folder, folder, leave_out=folder / SKILL_FILE)
        notes.append(f"Other files of this skill (pass one as path): {files}.")
    body = "".join(chosen)
    text = f"{header}: {span} of {total} shown\n{where}\n\n{body}"
    if notes:
        text += ("\n" if body.endswith("\n") else "\n\n") + "\n".join(notes)
    data.update(first_line=first, last_line=last, next_offset=next_offset, line_cut=cut)
    return ToolResult(text, structured=data)


def _existing_folder(skill: Skill) -> Path:
    try:
        folder = skill.folder.resolve(strict=True)
    except (FileNotFoundError, RuntimeError) as exc:
        raise _gone(skill) from exc
    if not folder.is_dir():
        raise _gone(skill)
    return folder


def _gone(skill: Skill) -> ToolError:
    return ToolError(
        f"The folder {str(skill.folder)!r} of the skill {skill.name!r} no longer exists; it was "
        "removed or moved after the session started. Do the task without the skill, or ask the "
        "user to restore it."
    )


def _read_text(skill: Skill, found: Opened, target: Path, shown: str) -> str:
    try:
        found.regular_file(
            limit=MAX_READ_BYTES,
            not_regular=f"{shown!r} of the skill {skill.name!r} is not a regular file; load_skill "
            "reads text files only. Pass another path.",
            too_big=f"{shown!r} of the skill {skill.name!r} is {{size:,}} bytes, more than the "
            f"{{limit:,}} load_skill reads. Use it from {target} with a tool made for that kind "
            "of file.",
        )
        data = found.read_bytes()
    except FileNotFoundError as exc:
        raise ToolError(
            f"{shown!r} of the skill {skill.name!r} was removed while it was being read. Check "
            "that the skill is still installed."
        ) from exc
    except PermissionError as exc:
        raise ToolError(
            f"{shown!r} of the skill {skill.name!r} cannot be read: permission denied. Read "
            "another file."
        ) from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ToolError(
            f"{shown!r} of the skill {skill.name!r} is not UTF-8 text (byte {exc.start:,} is not "
            f"valid UTF-8), so load_skill cannot show it. If it is an asset or a program, use it "
            f"from {target} with a tool made for that kind of file."
        ) from exc


def _lines(text: str) -> list[str]:
    """The lines of `text`, each with its "\\n" (only "\\n" ends a line; "\\r" is kept)."""
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def _window(lines: list[str], offset: int, limit: int) -> tuple[list[str], bool]:
    """The lines from `offset` that fit in one result, and whether the first had to be cut."""
    chosen: list[str] = []
    chars = 0
    for line in lines[offset : offset + limit]:
        if chars + len(line) > BODY_LIMIT:
            if not chosen:
                return [line[:BODY_LIMIT]], True
            break
        chosen.append(line)
        chars += len(line)
    return chosen, False


def _file_list(directory: Path, folder: Path, leave_out: Path | None = None) -> str:
    """The files under `directory` relative to the skill folder, hidden ones left out."""
    found: list[str] = []
    for base, dirs, files in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__")
        for file_name in sorted(files):
            file_path = Path(base) / file_name
            if file_name.startswith(".") or file_path == leave_out:
                continue
            found.append(file_path.relative_to(folder).as_posix())
    if not found:
        return "none"
    shown = ", ".join(found[:_LISTED_FILES])
    more = len(found) - _LISTED_FILES
    return shown + (f" and {more} more" if more > 0 else "")


SKILL_TOOLS: tuple[Tool, ...] = (load_skill,)
