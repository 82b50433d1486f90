"""Skills: discovery over several roots, the prompt index, and `load_skill` reading on demand."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tool_services import tool_services
from wakeful.discovery.skill_tools import (
    BODY_LIMIT,
    SKILL_TOOLS,
    SkillsSettings,
    load_skill,
    skill_roots,
    skills_of,
)
from wakeful.discovery.skills import (
    BUILTIN_ROOT,
    SKILL_FILE,
    SkillSet,
    default_roots,
    discover_skills,
    user_skills_root,
)
from wakeful.errors import ToolError
from wakeful.services import Services
from wakeful.tools.lint import lint_tool
from wakeful.tools.spec import ToolContext, ToolResult

FIXTURES = Path(__file__).parent / "skill_fixtures"


@pytest.fixture
def fixtures(tmp_path: Path) -> Path:
    """A private copy of the fixture roots, so a test may change them."""
    copy = tmp_path / "fixtures"
    shutil.copytree(FIXTURES, copy)
    return copy


def roots_of(base: Path) -> list[tuple[str, Path]]:
    return [("project", base / "project"), ("user", base / "user")]


def write_skill(root: Path, name: str, body: str = "Body.\n", **fields: str) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    header = {"name": name, "description": f"The {name} skill.", **fields}
    front = "".join(f"{key}: {value}\n" for key, value in header.items())
    (folder / SKILL_FILE).write_text(f"---\n{front}---\n{body}", encoding="utf-8")
    return folder


@pytest.fixture
async def services(fixtures: Path) -> AsyncIterator[Services]:
    async with tool_services(fixtures) as (services, _events):
        services.settings[SkillsSettings] = SkillsSettings(roots=tuple(roots_of(fixtures)))
        yield services


async def call(services: Services, **arguments: Any) -> ToolResult:
    ctx = ToolContext("main", "call_1", "load_skill", services)
    return await load_skill.run(arguments, ctx)


# --- discovery -----------------------------------------------------------------------------------


def test_the_fixture_roots_give_the_valid_skills_with_their_front_matter() -> None:
    found = discover_skills(roots_of(FIXTURES))
    assert [s.name for s in found.skills] == ["pdf-processing", "shared-name", "user-only"]
    pdf = found.get("pdf-processing")
    assert pdf is not None
    assert pdf.source == "project"
    assert pdf.folder == FIXTURES / "project" / "pdf-processing"
    assert pdf.root == FIXTURES / "project"
    assert pdf.description.startswith("Extract text and tables from PDF files")
    assert pdf.license == "Apache-2.0"
    assert pdf.allowed_tools == ("read_file", "run_shell")
    assert pdf.metadata == (("author", "example-org"), ("version", "1.0"))
    assert found.get("hidden-skill") is None
    assert found.get("nothing") is None


def test_a_name_in_two_roots_is_taken_from_the_first_and_the_shadowing_is_noted() -> None:
    found = discover_skills(roots_of(FIXTURES))
    used = found.get("shared-name")
    assert used is not None and used.source == "project"
    [(winner, hidden)] = found.shadowed
    assert winner == used
    assert hidden.source == "user" and hidden.folder == FIXTURES / "user" / "shared-name"
    [note] = [n for n in found.notes() if n.startswith("Note:")]
    assert str(hidden.folder) in note and str(used.folder) in note and "shadowed" in note
    # The user's skill wins when the order is reversed: precedence is the order of the roots.
    reversed_order = discover_skills(list(reversed(roots_of(FIXTURES))))
    flipped = reversed_order.get("shared-name")
    assert flipped is not None and flipped.source == "user"


@pytest.mark.parametrize(
    ("folder", "expected"),
    [
        ("no-front-matter", "has no YAML front matter"),
        ("unclosed-front-matter", "has no YAML front matter"),
        ("bad-yaml", "front matter is not valid YAML"),
        ("list-front-matter", "not a mapping of fields"),
        ("missing-description", "has no 'description'"),
        ("missing-name", "has no 'name'. Add 'name: missing-name'"),
        ("wrong-name", "'other-name' does not match its folder 'wrong-name'"),
        ("Bad_Name", "breaks the naming rule"),
        ("long-description", "1,025 characters, more than the 1,024 allowed"),
    ],
)
def test_each_malformed_skill_is_reported_with_its_file_and_skipped(
    folder: str, expected: str
) -> None:
    found = discover_skills(roots_of(FIXTURES))
    path = FIXTURES / "project" / folder / SKILL_FILE
    [problem] = [p for p in found.problems if p.path == path]
    assert expected in problem.problem
    assert problem.problem.endswith(".")
    assert all(skill.folder.name != folder for skill in found.skills)
    assert f"Skipped {path}: " in "\n".join(found.notes())


def test_the_yaml_problem_names_the_line_of_the_file() -> None:
    found = discover_skills(roots_of(FIXTURES))
    [problem] = [p for p in found.problems if p.path.parent.name == "bad-yaml"]
    assert re.search(r"at line [34] of the file", problem.problem)


def test_a_misnamed_skill_file_is_reported_and_a_folder_without_one_is_passed_over() -> None:
    found = discover_skills(roots_of(FIXTURES))
    [problem] = [p for p in found.problems if p.path.parent.name == "lowercase-file"]
    assert problem.path.name == "skill.md"
    assert "must be in 'SKILL.md'" in problem.problem
    assert not [p for p in found.problems if p.path.parent.name in ("notes", ".hidden-skill")]
    assert len(found.problems) == 10


def test_files_that_cannot_be_read_as_skills_are_reported(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    write_skill(root, "good")
    latin = root / "latin-one"
    latin.mkdir()
    (latin / SKILL_FILE).write_bytes(b"---\nname: latin-one\ndescription: caf\xe9\n---\n")
    huge = write_skill(root, "huge")
    with (huge / SKILL_FILE).open("a") as file:
        file.write("x" * (1024 * 1024))
    (root / "a-folder" / SKILL_FILE).mkdir(parents=True)
    bad_types = write_skill(root, "bad-types", license="[1, 2]")
    bad_meta = write_skill(root, "bad-meta", metadata="{nested: {a: 1}}")
    found = discover_skills([("project", root)])
    assert [s.name for s in found.skills] == ["good"]
    problems = {p.path.parent.name: p.problem for p in found.problems}
    assert "not UTF-8 text (byte 36 is not valid UTF-8)" in problems["latin-one"]
    assert "more than the 1,048,576 a SKILL.md may hold" in problems["huge"]
    assert "not a regular file" in problems["a-folder"]
    assert "'license' is [1, 2], not text" in problems[bad_types.name]
    assert "'metadata' is" in problems[bad_meta.name]


def test_a_missing_root_is_passed_over_and_a_root_that_is_a_file_is_reported(
    tmp_path: Path,
) -> None:
    (tmp_path / "file-root").write_text("not a folder")
    found = discover_skills([("project", tmp_path / "absent"), ("user", tmp_path / "file-root")])
    assert found.skills == ()
    [problem] = found.problems
    assert problem.path == tmp_path / "file-root"
    assert "the user skills root is a file" in problem.problem


def test_the_same_root_named_twice_is_read_once(tmp_path: Path) -> None:
    write_skill(tmp_path / "skills", "once")
    found = discover_skills([("project", tmp_path / "skills"), ("user", tmp_path / "skills")])
    assert [s.name for s in found.skills] == ["once"]
    assert found.shadowed == ()


def test_a_symlinked_skill_folder_is_a_skill(tmp_path: Path) -> None:
    real = write_skill(tmp_path / "elsewhere", "linked")
    root = tmp_path / "skills"
    root.mkdir()
    (root / "linked").symlink_to(real, target_is_directory=True)
    found = discover_skills([("project", root)])
    assert [s.name for s in found.skills] == ["linked"]


# --- roots ---------------------------------------------------------------------------------------


def test_default_roots_go_project_then_user_then_builtin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    assert default_roots(tmp_path / "repo") == [
        ("project", tmp_path / "repo" / ".wakeful" / "skills"),
        ("project", tmp_path / "repo" / "skills"),
        ("user", tmp_path / "config" / "wakeful" / "skills"),
        ("builtin", BUILTIN_ROOT),
    ]
    monkeypatch.chdir(tmp_path)
    assert default_roots()[0] == ("project", tmp_path / ".wakeful" / "skills")


def test_the_user_root_falls_back_to_dot_config_when_xdg_is_unset_or_relative(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    assert user_skills_root() == tmp_path / ".config" / "wakeful" / "skills"
    monkeypatch.setenv("XDG_CONFIG_HOME", "relative/config")
    assert user_skills_root() == tmp_path / ".config" / "wakeful" / "skills"


# --- the built-in skills -------------------------------------------------------------------------


def test_the_builtin_skills_are_valid_and_their_links_lead_to_files() -> None:
    found = discover_skills([("builtin", BUILTIN_ROOT)])
    assert found.problems == ()
    skill = found.get("writing-wakeful-tools")
    assert skill is not None and skill.source == "builtin"
    text = skill.skill_file.read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)#]+)\)", text)
    assert links, "the instructions should point at their reference document"
    for link in links:
        assert (skill.folder / link).is_file(), link


def test_the_worked_example_of_the_builtin_reference_meets_the_standard() -> None:
    reference = BUILTIN_ROOT / "writing-wakeful-tools" / "references" / "description-standard.md"
    [code] = re.findall(r"```python\n(.*?)```", reference.read_text(encoding="utf-8"), re.DOTALL)
    namespace: dict[str, Any] = {}
    exec(  # the reference's code, run as written, must be a tool the linter accepts
        "from typing import Annotated\nfrom pydantic import Field\n"
        "from wakeful.tools.spec import ToolAnnotations, ToolContext, ToolResult, tool\n" + code,
        namespace,
    )
    assert lint_tool(namespace["get_forecast"]) == []


# --- the index -----------------------------------------------------------------------------------


def test_the_index_lists_names_and_descriptions_only_sorted_and_byte_stable(
    fixtures: Path,
) -> None:
    first = discover_skills(roots_of(FIXTURES)).index_text()
    again = discover_skills(roots_of(FIXTURES)).index_text()
    # The same skills in another place give the same bytes: no paths in the index.
    elsewhere = discover_skills(roots_of(fixtures)).index_text()
    assert first == again == elsewhere
    assert first.startswith("## Skills\n")
    assert "load_skill(name)" in first
    entries = [line for line in first.splitlines() if line.startswith("- ")]
    assert entries == [
        "- pdf-processing: Extract text and tables from PDF files and fill PDF forms. Use when "
        "the user mentions PDFs, forms or document extraction.",
        "- shared-name: The project's version of a skill the user also has.",
        "- user-only: A skill only the user has.",
    ]
    assert "BODY-MARKER" not in first and "PROJECT-VERSION" not in first
    assert str(FIXTURES) not in first


def test_the_index_is_empty_without_skills(tmp_path: Path) -> None:
    assert discover_skills([("project", tmp_path)]).index_text() == ""
    assert SkillSet(()).index_text() == ""


# --- load_skill: the tool ------------------------------------------------------------------------


def test_load_skill_meets_the_description_standard() -> None:
    assert (load_skill,) == SKILL_TOOLS
    assert lint_tool(load_skill) == []
    assert load_skill.spec.annotations.read_only


@pytest.mark.anyio
async def test_load_skill_reads_the_instructions_without_the_front_matter(
    services: Services, fixtures: Path
) -> None:
    result = await call(services, name="pdf-processing")
    assert not result.is_error
    folder = fixtures / "project" / "pdf-processing"
    expected_body = (folder / SKILL_FILE).read_text().split("---\n", 2)[2]
    header, where, blank, rest = result.content.split("\n", 3)
    assert header == "Skill 'pdf-processing' (project), SKILL.md instructions: lines 1–5 of 5 shown"
    assert where.startswith(f"Folder: {folder.resolve()}")
    assert blank == ""
    assert rest.startswith(expected_body)
    assert "name: pdf-processing" not in result.content
    assert (
        "Other files of this skill (pass one as path): references/forms.md, "
        "scripts/fill_form.sh." in rest
    )
    data = result.structured
    assert data["first_line"] == 1 and data["last_line"] == 5 and data["total_lines"] == 5
    assert data["next_offset"] is None and data["body_starts_at_file_line"] == 12
    assert data["source"] == "project" and data["path"] == "SKILL.md"


@pytest.mark.anyio
async def test_load_skill_follows_a_reference_and_reads_the_whole_skill_file_by_path(
    services: Services, fixtures: Path
) -> None:
    result = await call(services, name="pdf-processing", path="references/forms.md")
    forms = (fixtures / "project" / "pdf-processing" / "references" / "forms.md").read_text()
    assert result.content.startswith(
        "Skill 'pdf-processing' (project), references/forms.md: lines 1–5 of 5 shown\n"
    )
    assert result.content.endswith("\n\n" + forms)
    assert result.structured["path"] == "references/forms.md"
    whole = await call(services, name="pdf-processing", path="SKILL.md")
    assert "name: pdf-processing" in whole.content
    assert "Other files" not in whole.content


@pytest.mark.anyio
async def test_the_project_skill_is_loaded_when_it_shadows_the_users(services: Services) -> None:
    result = await call(services, name="shared-name")
    assert "PROJECT-VERSION" in result.content and "USER-VERSION" not in result.content
    user = await call(services, name="user-only")
    assert "(user)" in user.content and "USER-ONLY-BODY" in user.content


@pytest.mark.anyio
async def test_load_skill_pages_through_a_long_file_with_visible_truncation(
    services: Services, fixtures: Path
) -> None:
    lines = [f"step {n}\n" for n in range(1, 1201)]
    write_skill(fixtures / "project", "long-skill", body="".join(lines))
    first = await call(services, name="long-skill")
    assert "lines 1–500 of 1200 shown" in first.content
    assert "More: pass offset=500 for the next lines." in first.content
    assert first.structured["next_offset"] == 500
    middle = await call(services, name="long-skill", offset=500, limit=100)
    assert "lines 501–600 of 1200 shown" in middle.content
    assert "step 501\n" in middle.content and "step 600\n" in middle.content
    assert "step 601\n" not in middle.content
    assert "Other files" not in middle.content
    last = await call(services, name="long-skill", offset=1199)
    assert "line 1200 of 1200 shown" in last.content and "More:" not in last.content
    with pytest.raises(ToolError, match=r"has 1200 lines, so offset=1200 is past its end"):
        await call(services, name="long-skill", offset=1200)


@pytest.mark.anyio
async def test_a_window_stops_at_the_character_limit_and_a_huge_line_is_cut_visibly(
    services: Services, fixtures: Path
) -> None:
    wide = "w" * 1000 + "\n"
    folder = write_skill(fixtures / "project", "wide-skill", body=wide * 30)
    result = await call(services, name="wide-skill")
    shown = BODY_LIMIT // len(wide)
    assert f"lines 1–{shown} of 30 shown" in result.content
    assert f"pass offset={shown}" in result.content
    assert len(result.content) < BODY_LIMIT + 1000
    (folder / "one-line.txt").write_text("z" * (BODY_LIMIT + 500))
    cut = await call(services, name="wide-skill", path="one-line.txt")
    assert "line 1 of 1 shown" in cut.content
    assert f"Line 1 is longer than one result and is cut after {BODY_LIMIT:,}" in cut.content
    assert "z" * BODY_LIMIT in cut.content and "z" * (BODY_LIMIT + 1) not in cut.content
    assert cut.structured["line_cut"] is True and cut.structured["next_offset"] is None


@pytest.mark.anyio
async def test_load_skill_keeps_the_bytes_of_the_file(services: Services, fixtures: Path) -> None:
    folder = write_skill(fixtures / "project", "exact-skill")
    (folder / "crlf.md").write_bytes("tab\there\r\ncurly “quote”\r\nno newline".encode())
    result = await call(services, name="exact-skill", path="crlf.md")
    assert result.content.endswith("\n\ntab\there\r\ncurly “quote”\r\nno newline")
    assert "lines 1–3 of 3 shown" in result.content
    (folder / "empty.md").write_text("")
    empty = await call(services, name="exact-skill", path="empty.md")
    assert "empty.md: empty, no lines to show" in empty.content


# --- load_skill: confinement and bad input -------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(
    "path",
    ["../shared-name/SKILL.md", "references/../../../user/user-only/SKILL.md", "%2e%2e/x"],
)
async def test_load_skill_refuses_paths_that_climb_out_of_the_skill(
    services: Services, path: str
) -> None:
    with pytest.raises(ToolError, match=r"outside the root|percent-encoded"):
        await call(services, name="pdf-processing", path=path)


@pytest.mark.anyio
async def test_load_skill_refuses_absolute_paths_outside_and_accepts_them_inside(
    services: Services, fixtures: Path
) -> None:
    outside = fixtures / "user" / "user-only" / SKILL_FILE
    with pytest.raises(ToolError, match="outside the root"):
        await call(services, name="pdf-processing", path=str(outside))
    inside = fixtures / "project" / "pdf-processing" / "references" / "forms.md"
    result = await call(services, name="pdf-processing", path=str(inside))
    assert "references/forms.md: lines 1–5 of 5 shown" in result.content


@pytest.mark.anyio
async def test_load_skill_refuses_a_symlink_that_leads_out_of_the_skill(
    services: Services, fixtures: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("SECRET")
    folder = fixtures / "project" / "pdf-processing"
    (folder / "references" / "leak.md").symlink_to(secret)
    with pytest.raises(ToolError, match="symlink") as caught:
        await call(services, name="pdf-processing", path="references/leak.md")
    assert "SECRET" not in str(caught.value)
    # A symlink that stays inside the skill is followed.
    (folder / "guide.md").symlink_to(folder / "references" / "forms.md")
    result = await call(services, name="pdf-processing", path="guide.md")
    assert "Filling PDF forms" in result.content


@pytest.mark.anyio
async def test_load_skill_says_what_a_folder_holds_and_refuses_what_is_not_text(
    services: Services, fixtures: Path
) -> None:
    with pytest.raises(ToolError, match=r"is a folder .* Files in it: references/forms.md\."):
        await call(services, name="pdf-processing", path="references")
    with pytest.raises(ToolError, match=re.escape("no file or directory 'references/nothing.md'")):
        await call(services, name="pdf-processing", path="references/nothing.md")
    (fixtures / "project" / "pdf-processing" / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\xff")
    with pytest.raises(ToolError, match=r"is not UTF-8 text \(byte 0 is not valid UTF-8\)"):
        await call(services, name="pdf-processing", path="logo.png")
    fifo = fixtures / "project" / "pdf-processing" / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(ToolError, match="not a regular file"):
        await call(services, name="pdf-processing", path="pipe")


@pytest.mark.anyio
async def test_an_unknown_skill_gets_the_list_and_a_close_match(services: Services) -> None:
    with pytest.raises(ToolError) as caught:
        await call(services, name="pdf-procesing")
    message = str(caught.value)
    assert "There is no skill 'pdf-procesing'. Did you mean 'pdf-processing'?" in message
    assert "The skills are: pdf-processing, shared-name, user-only." in message


@pytest.mark.anyio
async def test_a_malformed_skill_asked_for_by_name_says_why_it_was_skipped(
    services: Services,
) -> None:
    with pytest.raises(ToolError, match=r"'wrong-name' exists but was skipped .* does not match"):
        await call(services, name="wrong-name")


@pytest.mark.anyio
async def test_a_skill_added_during_the_session_is_found_by_discovering_again(
    services: Services, fixtures: Path
) -> None:
    before = await skills_of(services)
    assert before.get("late-skill") is None
    write_skill(fixtures / "user", "late-skill", body="LATE\n")
    result = await call(services, name="late-skill")
    assert "LATE" in result.content
    assert (await skills_of(services)).get("late-skill") is not None


@pytest.mark.anyio
async def test_a_skill_folder_removed_after_discovery_gives_a_clear_error(
    services: Services, fixtures: Path
) -> None:
    assert (await skills_of(services)).get("pdf-processing") is not None
    folder = fixtures / "project" / "pdf-processing"
    shutil.rmtree(folder)
    with pytest.raises(ToolError) as caught:
        await call(services, name="pdf-processing", path="references/forms.md")
    assert f"The folder {str(folder)!r} of the skill 'pdf-processing' no longer exists" in str(
        caught.value
    )
    (fixtures / "project" / "shared-name" / SKILL_FILE).unlink()
    with pytest.raises(ToolError, match=re.escape("'shared-name' no longer has a SKILL.md")):
        await call(services, name="shared-name")


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({}, "`name` is required"),
        ({"name": ""}, "`name`"),
        ({"name": "pdf-processing", "offset": -1}, "`offset`"),
        ({"name": "pdf-processing", "limit": 0}, "`limit`"),
        ({"name": "pdf-processing", "limit": 5000}, "`limit`"),
        ({"name": "pdf-processing", "path": ""}, "`path`"),
        ({"name": "pdf-processing", "page": 2}, "`page` is not a parameter"),
    ],
)
async def test_bad_arguments_are_refused_naming_the_field(
    services: Services, arguments: dict[str, Any], field: str
) -> None:
    with pytest.raises(ToolError, match=re.escape(field)):
        await call(services, **arguments)


# --- settings and the cache ----------------------------------------------------------------------


@pytest.mark.anyio
async def test_without_settings_the_roots_are_the_defaults_of_the_workdir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    write_skill(tmp_path / "repo" / ".wakeful" / "skills", "repo-skill", body="REPO\n")
    write_skill(tmp_path / "config" / "wakeful" / "skills", "mine", body="MINE\n")
    async with tool_services(tmp_path / "repo") as (services, _events):
        assert skill_roots(services) == tuple(default_roots(tmp_path / "repo"))
        found = await skills_of(services)
        assert {"repo-skill", "mine", "writing-wakeful-tools"} <= {s.name for s in found.skills}
        assert "REPO" in (await call(services, name="repo-skill")).content
        builtin = await call(
            services, name="writing-wakeful-tools", path="references/description-standard.md"
        )
        assert "(builtin)" in builtin.content and "parameter-example" in builtin.content


@pytest.mark.anyio
async def test_the_skill_set_is_discovered_once_and_again_when_the_roots_change(
    services: Services, fixtures: Path
) -> None:
    first = await skills_of(services)
    assert await skills_of(services) is first
    services.settings[SkillsSettings] = SkillsSettings(roots=(("user", fixtures / "user"),))
    changed = await skills_of(services)
    assert changed is not first
    assert [s.name for s in changed.skills] == ["shared-name", "user-only"]
    assert await skills_of(services, refresh=True) is not changed
