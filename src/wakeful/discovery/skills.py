"""Skills: folders with a `SKILL.md` that teach the agent one kind of task, read on demand.

A skill is a folder whose `SKILL.md` starts with YAML front matter holding a `name` and a
`description` (the AgentSkills format), followed by Markdown instructions that may point at other
files of the folder (`references/guide.md`, `scripts/run.py`). Skills come from several roots in
order of precedence (project, user, built-in); a name found in two roots is taken from the first
and the other is reported as shadowed. Only the index of names and descriptions goes into the
system prompt (:meth:`SkillSet.index_text`, byte-identical for the same skills so the prompt
prefix stays cache-stable); the `load_skill` tool (:mod:`.skill_tools`) reads the instructions
and the files they name when the task needs them. A malformed skill is reported with its file
and problem and skipped: one bad folder never stops a session.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

__all__ = [
    "BUILTIN_ROOT",
    "SKILL_FILE",
    "Skill",
    "SkillProblem",
    "SkillSet",
    "SkillSource",
    "default_roots",
    "discover_skills",
    "split_front_matter",
    "user_skills_root",
]

SKILL_FILE = "SKILL.md"
BUILTIN_ROOT = Path(__file__).resolve().parent.parent / "skills"
"""The skills that ship with wakeful (package data)."""

MAX_NAME_CHARS = 64
MAX_DESCRIPTION_CHARS = 1024
MAX_COMPATIBILITY_CHARS = 500
MAX_SKILL_FILE_BYTES = 1024 * 1024
_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")

SkillSource = Literal["project", "user", "builtin"]


@dataclass(frozen=True)
class Skill:
    """One usable skill: its front matter, where it lives, and which root it came from."""

    name: str
    description: str
    root: Path
    folder: Path
    source: SkillSource | str
    license: str | None = None
    compatibility: str | None = None
    allowed_tools: tuple[str, ...] = ()
    metadata: tuple[tuple[str, str], ...] = ()

    @property
    def skill_file(self) -> Path:
        return self.folder / SKILL_FILE


@dataclass(frozen=True)
class SkillProblem:
    """A skill folder (or root) that was skipped, and why, in a sentence that says how to fix it."""

    path: Path
    problem: str

    def __str__(self) -> str:
        return f"{self.path}: {self.problem}"


@dataclass(frozen=True)
class SkillSet:
    """The skills found in a list of roots, the folders skipped, and the names shadowed.

    `skills` is sorted by name; each `shadowed` pair is (the skill used, the one it hides).
    """

    skills: tuple[Skill, ...]
    problems: tuple[SkillProblem, ...] = ()
    shadowed: tuple[tuple[Skill, Skill], ...] = ()
    _by_name: dict[str, Skill] = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_name", {skill.name: skill for skill in self.skills})

    def get(self, name: str) -> Skill | None:
        return self._by_name.get(name)

    def index_text(self) -> str:
        """The system-prompt section listing each skill's name and description; "" if none.

        Only names and descriptions, sorted by name, with whitespace runs in a description
        shown as one space (YAML folded text spans lines), so the text is the same bytes for
        the same skills wherever they live.
        """
        if not self.skills:
            return ""
        lines = [
            "## Skills",
            "",
            "Skills are folders of instructions (with scripts and documents) for particular "
            "kinds of task. Only their names and descriptions are listed here. When a task "
            "matches a skill, read its instructions first: use load_skill(name). Files the "
            'instructions name are read the same way: load_skill(name, path="references/'
            'guide.md").',
            "",
        ]
        for skill in sorted(self.skills, key=lambda s: s.name):
            lines.append(f"- {skill.name}: {' '.join(skill.description.split())}")
        return "\n".join(lines) + "\n"

    def notes(self) -> list[str]:
        """Readable lines for an operator: each skipped folder and each shadowed name."""
        notes = [f"Skipped {problem}" for problem in self.problems]
        for used, hidden in self.shadowed:
            notes.append(
                f"Note: the skill {used.name!r} in {hidden.folder} ({hidden.source}) is "
                f"shadowed by the one in {used.folder} ({used.source}), which is used."
            )
        return notes


# --- roots -----------------------------------------------------------------------------------


def user_skills_root() -> Path:
    """`$XDG_CONFIG_HOME/wakeful/skills`, or `~/.config/wakeful/skills` when that is unset.

    A relative XDG_CONFIG_HOME is ignored, as the XDG specification asks.
    """
    configured = os.environ.get("XDG_CONFIG_HOME", "")
    base = Path(configured) if os.path.isabs(configured) else Path.home() / ".config"
    return base / "wakeful" / "skills"


def default_roots(project: Path | None = None) -> list[tuple[str, Path]]:
    """The skill roots as (source, folder), highest precedence first.

    The project's `.wakeful/skills` and `skills` (under `project`, or the current directory when
    it is None), then the user's, then the built-in skills. Roots that do not exist are listed
    too; discovery passes over them.
    """
    base = project if project is not None else Path.cwd()
    return [
        ("project", base / ".wakeful" / "skills"),
        ("project", base / "skills"),
        ("user", user_skills_root()),
        ("builtin", BUILTIN_ROOT),
    ]


# --- discovery -------------------------------------------------------------------------------


def discover_skills(roots: Sequence[tuple[str, Path]]) -> SkillSet:
    """Find the skills in `roots` (highest precedence first); never raises for a bad skill.

    Each folder directly under a root that holds a `SKILL.md` is a skill; hidden folders are
    passed over. Blocking file I/O: call it from a thread in async code.
    """
    chosen: dict[str, Skill] = {}
    problems: list[SkillProblem] = []
    shadowed: list[tuple[Skill, Skill]] = []
    seen_roots: set[Path] = set()
    for source, root in roots:
        real_root = Path(os.path.realpath(root))
        if real_root in seen_roots:
            continue
        seen_roots.add(real_root)
        for found in _skills_in(source, root):
            if isinstance(found, SkillProblem):
                problems.append(found)
            elif found.name in chosen:
                shadowed.append((chosen[found.name], found))
            else:
                chosen[found.name] = found
    skills = tuple(sorted(chosen.values(), key=lambda s: s.name))
    return SkillSet(skills, tuple(problems), tuple(shadowed))


def _skills_in(source: str, root: Path) -> Iterator[Skill | SkillProblem]:
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except FileNotFoundError:
        return
    except NotADirectoryError:
        yield SkillProblem(
            root,
            f"the {source} skills root is a file, not a folder. Make it a folder that holds one "
            "folder per skill, or remove it.",
        )
        return
    except OSError as exc:
        yield SkillProblem(
            root,
            f"the {source} skills root cannot be listed ({exc.strerror or exc}). Fix its "
            "permissions or remove it.",
        )
        return
    for entry in entries:
        if entry.name.startswith(".") or not entry.is_dir():
            continue
        folder = Path(entry.path)
        skill_file = folder / SKILL_FILE
        if not skill_file.exists() and not skill_file.is_symlink():
            misnamed = _misnamed_skill_file(folder)
            if misnamed is not None:
                yield SkillProblem(
                    folder / misnamed,
                    f"the file is named {misnamed!r}, but a skill's instructions must be in "
                    f"{SKILL_FILE!r} (upper case). Rename it.",
                )
            continue
        yield _read_skill(source, root, folder)


def _misnamed_skill_file(folder: Path) -> str | None:
    try:
        names = os.listdir(folder)
    except OSError:
        return None
    return next((n for n in sorted(names) if n.lower() == SKILL_FILE.lower()), None)


def _read_skill(source: str, root: Path, folder: Path) -> Skill | SkillProblem:
    skill_file = folder / SKILL_FILE

    def problem(text: str) -> SkillProblem:
        return SkillProblem(skill_file, text)

    try:
        info = skill_file.stat()
        if not stat.S_ISREG(info.st_mode):
            return problem("it is not a regular file. Make SKILL.md a Markdown file.")
        if info.st_size > MAX_SKILL_FILE_BYTES:
            return problem(
                f"it is {info.st_size:,} bytes, more than the {MAX_SKILL_FILE_BYTES:,} a "
                "SKILL.md may hold. Keep the instructions short and move detail into files "
                "under references/."
            )
        data = skill_file.read_bytes()
    except OSError as exc:
        return problem(f"it cannot be read ({exc.strerror or exc}). Fix its permissions.")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return problem(
            f"it is not UTF-8 text (byte {exc.start:,} is not valid UTF-8). Save it as UTF-8."
        )
    parts = split_front_matter(text)
    if parts is None:
        return problem(
            "it has no YAML front matter. Start the file with a line '---', then 'name: "
            f"{folder.name}' and 'description: …', then a closing line '---'."
        )
    header, _body_line = parts
    try:
        fields = yaml.safe_load(header)
    except yaml.YAMLError as exc:
        return problem(f"its front matter is not valid YAML ({_yaml_reason(exc)}). Fix it.")
    if not isinstance(fields, dict):
        return problem(
            "its front matter is not a mapping of fields. Write 'name: …' and "
            "'description: …' on their own lines between the '---' lines."
        )
    checked = _check_fields(fields, folder.name)
    if isinstance(checked, str):
        return problem(checked)
    return Skill(root=root, folder=folder, source=source, **checked)


def split_front_matter(text: str) -> tuple[str, int] | None:
    """The YAML between the opening and closing `---` lines, and the body's first line (1-based).

    None when the text does not start with a `---` line or the front matter is never closed.
    """
    lines = text.removeprefix("\ufeff").split("\n")
    if lines[0].rstrip() != "---":
        return None
    for index in range(1, len(lines)):
        if lines[index].rstrip() == "---":
            return "\n".join(lines[1:index]), index + 2
    return None


def _yaml_reason(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    reason = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    if mark is None:
        return str(reason)
    # +2: the mark counts from 0 within the front matter, which starts on the file's line 2.
    return f"{reason}, at line {mark.line + 2} of the file"


def _check_fields(fields: dict[Any, Any], folder_name: str) -> dict[str, Any] | str:
    """The Skill fields from valid front matter, or a sentence saying what is wrong."""
    name = fields.get("name")
    if name is None:
        return f"its front matter has no 'name'. Add 'name: {folder_name}'."
    if not isinstance(name, str) or not name:
        return f"its 'name' is {name!r}, not text. Write 'name: {folder_name}'."
    if len(name) > MAX_NAME_CHARS or not _NAME.fullmatch(name):
        return (
            f"its name {name!r} breaks the naming rule: 1-{MAX_NAME_CHARS} lower-case letters, "
            "digits and single hyphens, not starting or ending with a hyphen. Rename the skill "
            "and its folder, e.g. 'pdf-processing'."
        )
    if name != folder_name:
        return (
            f"its name {name!r} does not match its folder {folder_name!r}. Rename the folder "
            "or change the name so that they are the same."
        )
    description = fields.get("description")
    if description is None:
        return (
            "its front matter has no 'description'. Add one saying what the skill does and "
            "when to use it."
        )
    if not isinstance(description, str) or not description.strip():
        return (
            f"its 'description' is {description!r}, not text. Write what the skill does and "
            "when to use it."
        )
    if len(description) > MAX_DESCRIPTION_CHARS:
        return (
            f"its description is {len(description):,} characters, more than the "
            f"{MAX_DESCRIPTION_CHARS:,} allowed. Shorten it and move detail into the body."
        )
    checked: dict[str, Any] = {"name": name, "description": description}
    for key in ("license", "compatibility"):
        value = fields.get(key)
        if value is not None and not isinstance(value, str):
            return f"its {key!r} is {value!r}, not text. Write it as a string or remove it."
        checked[key] = value
    compatibility = checked["compatibility"]
    if compatibility is not None and len(compatibility) > MAX_COMPATIBILITY_CHARS:
        return (
            f"its compatibility is {len(compatibility):,} characters, more than the "
            f"{MAX_COMPATIBILITY_CHARS} allowed. Shorten it."
        )
    allowed = fields.get("allowed-tools")
    if isinstance(allowed, str):
        checked["allowed_tools"] = tuple(allowed.split())
    elif isinstance(allowed, list) and all(isinstance(t, str) for t in allowed):
        checked["allowed_tools"] = tuple(allowed)
    elif allowed is not None:
        return (
            f"its 'allowed-tools' is {allowed!r}; write the tool names as one space-separated "
            "string, e.g. 'read_file grep_file'."
        )
    metadata = fields.get("metadata")
    if metadata is not None:
        if not isinstance(metadata, dict) or not all(
            isinstance(v, str | int | float | bool) for v in metadata.values()
        ):
            return (
                f"its 'metadata' is {metadata!r}; it must map keys to single values, e.g. "
                "'metadata: {author: me, version: \"1.0\"}'."
            )
        checked["metadata"] = tuple(sorted((str(k), str(v)) for k, v in metadata.items()))
    return checked
