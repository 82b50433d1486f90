"""The README's library example runs as written."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from wakeful.config import load_config

README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_library_example_runs(tmp_path: Path) -> None:
    code = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)[0]
    script = tmp_path / "example.py"
    script.write_text(code, encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "It is sunny in Paris."
    assert (tmp_path / "agent.db").exists()


def test_the_readme_starts_with_the_two_setup_commands() -> None:
    text = README.read_text(encoding="utf-8")
    block = re.findall(r"```bash\n(.*?)```", text, re.S)[0].strip().splitlines()
    assert block == [
        "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/wakeful demo async",
        "./scripts/test",
    ]


@pytest.mark.slow
def test_the_tour_after_the_demo_works_as_written(tmp_path: Path) -> None:
    # The block that starts with the demo: each command is run as the README gives it, in a
    # fresh folder, with only the demo sped up.
    blocks = re.findall(r"```bash\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    [tour] = [b for b in blocks if b.startswith("wakeful demo async")]
    outputs = []
    for line in tour.strip().splitlines():
        words = shlex.split(line)
        assert words[0] == "wakeful"
        if words[1] == "demo":
            words += ["--speed", "20"]
        proc = subprocess.run(
            [sys.executable, "-m", "wakeful", *words[1:]],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert proc.returncode == 0, f"{line}\n{proc.stdout}\n{proc.stderr}"
        outputs.append(proc.stdout)
    demo, events, tasks, timers, audit = outputs
    store = ".wakeful/demo/three_scripts.db"
    assert f"stored in {store}" in demo and f"wakeful tasks --store {store}" in demo
    assert "user.input" in events and "tool.result" in events
    assert tasks.count("run_shell") == 3 and "cancelled" in tasks
    assert timers.startswith("No timers in ")
    assert "run_shell" in audit and "cancel_task" in audit


def test_the_channels_example_is_a_valid_configuration(tmp_path: Path) -> None:
    """`wakeful channels` checks each table of the README's example against its kind."""
    blocks = re.findall(r"```toml\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    [example] = [b for b in blocks if "[[channels.email]]" in b]
    (tmp_path / "wakeful.toml").write_text(example, encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "wakeful", "channels", "--json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    names = re.findall(r'"name": "([^"]+)"', proc.stdout)
    for kind in ("email:inbox", "webhook:github", "xmpp:chat", "telegram:bot", "system:"):
        assert any(name.startswith(kind) for name in names), proc.stdout


def test_the_delivery_example_is_a_valid_configuration(tmp_path: Path) -> None:
    """The README's `[delivery]` table loads as written."""
    blocks = re.findall(r"```toml\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    [example] = [b for b in blocks if "[delivery]" in b]
    (tmp_path / "wakeful.toml").write_text(example, encoding="utf-8")
    config = load_config(tmp_path / "wakeful.toml")
    assert config.delivery.channels == ("console", "telegram:bot", "email:inbox")
    assert config.delivery.min_urgency == {"email:inbox": "urgent"}
    assert config.delivery.quiet_hours is not None


def test_the_agents_example_is_a_valid_configuration(tmp_path: Path) -> None:
    """The README's `[[agents]]` example loads into an agent definition as written."""
    blocks = re.findall(r"```toml\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    [example] = [b for b in blocks if "[[agents]]" in b]
    (tmp_path / "wakeful.toml").write_text(example, encoding="utf-8")
    config = load_config(tmp_path / "wakeful.toml")
    [researcher] = config.agent_definitions()
    assert researcher.name == "researcher" and researcher.tools == ("fetch_page",)
    assert researcher.context.strategy == "adaptive"
    assert config.subagent_limits().max_depth == 2


def test_the_collaboration_example_is_a_valid_configuration(tmp_path: Path) -> None:
    """The README's `[tools.collaboration]` table loads as written."""
    blocks = re.findall(r"```toml\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    [example] = [b for b in blocks if "[tools.collaboration]" in b]
    (tmp_path / "wakeful.toml").write_text(example, encoding="utf-8")
    collaboration = load_config(tmp_path / "wakeful.toml").tools.collaboration
    assert collaboration is not None
    assert collaboration.im_addresses == ("boss@example.org",)
    assert collaboration.slack["ops"].webhook_url_env == "SLACK_OPS_WEBHOOK"
