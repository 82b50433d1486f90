"""The shell command policy against the red-team corpora in `redteam/`: every dangerous line is at
least asked (denied where the corpus says so), every line developers really type is allowed, and
no input whatsoever makes the check raise."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wakeful.safety.commands import CommandPolicy, PolicySettings

CORPORA = Path(__file__).parent / "redteam"
_ENTRY = re.compile(r"^(ask|deny)\s*\|\s?(.*)$")
_SHOWN = 50


@dataclass(frozen=True)
class Entry:
    corpus: str
    number: int
    expected: str
    line: str

    @property
    def id(self) -> str:
        shown = json.dumps(self.line)[1:-1]
        if len(shown) > _SHOWN:
            shown = shown[: _SHOWN - 1] + "…"
        return f"{self.corpus}:{self.number}:{shown}"


def _decode(text: str) -> str:
    if text.startswith("json:"):
        value = json.loads(text[len("json:") :])
        assert isinstance(value, str), text
        return value
    return text


def _entries(name: str) -> list[Entry]:
    found: list[Entry] = []
    path = CORPORA / f"{name}.txt"
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not raw.strip() or raw.startswith("#"):
            continue
        if name == "safe":
            found.append(Entry(name, number, "allow", _decode(raw)))
            continue
        match = _ENTRY.match(raw)
        assert match is not None, f"{path}:{number} is not 'ask | LINE' or 'deny | LINE': {raw!r}"
        found.append(Entry(name, number, match.group(1), _decode(match.group(2))))
    return found


DANGEROUS_CLASSES = (
    "lexer",
    "code_strings",
    "runners",
    "exec_options",
    "interpreters",
    "secrets_egress",
    "outside_changes",
    "regressions",
)
DANGEROUS = [entry for name in DANGEROUS_CLASSES for entry in _entries(name)]
SAFE = _entries("safe")


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("redteam")
    home = base / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("key\n")
    (home / ".aws").mkdir()
    (home / ".aws" / "credentials").write_text("[default]\n")
    workspace = base / "proj"
    for directory in ("src", "tests", "build", "dist", "logs", ".venv/bin"):
        (workspace / directory).mkdir(parents=True)
    for name in ("README.md", "script.py", "src/app.py", "Makefile", "package.json"):
        (workspace / name).write_text("x\n")
    (base / "scratch").mkdir()
    return base


@pytest.fixture(scope="module")
def policy(sandbox: Path) -> CommandPolicy:
    return CommandPolicy(
        PolicySettings(
            workspace=sandbox / "proj",
            allowed_hosts=["localhost", "127.0.0.1", "github.com", "*.pypi.org"],
            scratch_dirs=[sandbox / "scratch"],
        )
    )


@pytest.fixture(autouse=True)
def _home(sandbox: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(sandbox / "home"))


def test_the_corpora_are_large() -> None:
    assert len(DANGEROUS) >= 500
    assert len(SAFE) >= 150
    for name in DANGEROUS_CLASSES:
        assert len([e for e in DANGEROUS if e.corpus == name]) >= 40, name


@pytest.mark.parametrize("entry", DANGEROUS, ids=[e.id for e in DANGEROUS])
def test_dangerous_lines_are_not_allowed(policy: CommandPolicy, entry: Entry) -> None:
    decision = policy.check(entry.line)
    if entry.expected == "deny":
        assert decision.decision == "deny", decision.reasons
    else:
        assert decision.decision in ("ask", "deny"), decision.reasons
    assert decision.reasons, "a decision other than allow carries its reasons"


@pytest.mark.parametrize("entry", SAFE, ids=[e.id for e in SAFE])
def test_safe_lines_are_allowed(policy: CommandPolicy, entry: Entry) -> None:
    decision = policy.check(entry.line)
    assert decision.decision == "allow", decision.reasons


_TRICKY = st.sampled_from(
    [
        "\x00",
        "'",
        '"',
        "\\",
        "\\\n",
        "$(",
        "`",
        "${",
        "((",
        "[[",
        "<<",
        "EOF",
        "|",
        ";",
        "&",
        "~",
        "*",
    ]
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.text(max_size=12), _TRICKY), max_size=12).map("".join))
def test_any_text_gets_a_decision(text: str) -> None:
    decision = CommandPolicy(PolicySettings(workspace=Path("/nonexistent/ws"))).check(text)
    assert decision.decision in ("allow", "ask", "deny")
    if "\x00" in text:
        assert decision.decision == "deny"


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=40))
def test_any_bytes_get_a_decision(raw: bytes) -> None:
    text = raw.decode("utf-8", "surrogateescape")
    decision = CommandPolicy(PolicySettings(workspace=Path("/nonexistent/ws"))).check(text)
    assert decision.decision in ("allow", "ask", "deny")
