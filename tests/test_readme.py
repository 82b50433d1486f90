"""The README's library example runs as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

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
