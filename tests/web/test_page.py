"""The page's own files: valid JavaScript, no inline script or style, shipped in the package."""

from __future__ import annotations

import re
import shutil
import subprocess
from importlib.resources import files

import pytest

from wakeful.web.page import page_html, static_file


@pytest.mark.skipif(shutil.which("node") is None, reason="node is missing: apt-get install nodejs")
def test_the_script_is_valid_javascript() -> None:
    script = files("wakeful.web") / "static" / "console.js"
    checked = subprocess.run(
        ["node", "--check", str(script)], capture_output=True, text=True, timeout=30
    )
    assert checked.returncode == 0, checked.stderr


def test_the_page_has_no_inline_script_and_escapes_what_it_carries() -> None:
    page = page_html('"><script>alert(1)</script>', "<main>")
    assert re.findall(r"<script[^>]*>", page) == ['<script src="/static/console.js" defer>']
    assert "<script>alert(1)" not in page and "&lt;main&gt;" in page
    assert " style=" not in page and "<style" not in page
    assert not re.search(r"\son[a-z]+=", page)  # no inline handlers (onclick=…)


def test_the_script_builds_text_with_text_content_only() -> None:
    script = static_file("console.js").decode()
    assert "innerHTML" not in script and "outerHTML" not in script
    assert "insertAdjacentHTML" not in script and "eval(" not in script
    assert 'setAttribute("sandbox", "")' in script  # a card's page runs no script
