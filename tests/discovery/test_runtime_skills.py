"""Skills in a running runtime: the index in the system prompt, bodies through load_skill, and
skipped skills reported to the operator — with and without tool discovery."""

from __future__ import annotations

from pathlib import Path

import pytest

from wakeful.discovery.session_tools import DiscoverySettings
from wakeful.discovery.skill_tools import SkillsSettings
from wakeful.events import user_input
from wakeful.messages import ToolMessage
from wakeful.models import ScriptedModel, call, say, use
from wakeful.runtime import Runtime

pytestmark = pytest.mark.anyio

FIXTURES = Path(__file__).parent / "skill_fixtures"


def settings() -> SkillsSettings:
    return SkillsSettings(roots=(("project", FIXTURES / "project"), ("user", FIXTURES / "user")))


@pytest.mark.parametrize("discovery", [None, DiscoverySettings()], ids=["plain", "discovery"])
async def test_the_index_is_in_the_prompt_and_bodies_load_on_demand(
    tmp_path: Path, discovery: DiscoverySettings | None
) -> None:
    model = ScriptedModel([use(call("load_skill", name="pdf-processing")), say("")])
    runtime = Runtime(
        model=model,
        with_timers=False,
        workdir=tmp_path,
        skills=settings(),
        discovery=discovery,
    )
    async with runtime as rt:
        await rt.submit(user_input("fill in this PDF form"))
        await rt.wait_idle()
        (loaded,) = [
            m for m in rt.sessions["main"].trajectory.messages if isinstance(m, ToolMessage)
        ]
    first, second = model.requests
    system = first.messages[0].content
    assert "pdf-processing" in system and "load_skill" in system
    assert "user-only" in system
    assert "wrong-name" not in system  # malformed skills are skipped
    assert second.messages[0].content == system
    assert "load_skill" in {t.name for t in first.tools}
    assert loaded.status == "ok", loaded.content
    body = (FIXTURES / "project" / "pdf-processing" / "SKILL.md").read_text()
    assert body.split("---", 2)[2].strip().splitlines()[0] in loaded.content
    notes = [m["text"] for m in rt.outbox.sent if m["channel"] == "operator"]
    assert any("wrong-name" in n for n in notes)
    assert any("shared-name" in n for n in notes)  # shadowed across roots
