"""The policy's reading of words against real bash: for lines where tree-sitter-bash alone
disagrees with bash (line continuations inside words) and for the quoting, tilde, brace and
escape rules the policy relies on, the words the policy sees are the words bash passes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from wakeful.safety.commands import CommandPolicy, PolicySettings
from wakeful.safety.commands.lexer import refusal, remove_continuations
from wakeful.safety.commands.parse import new_parser, parse_script
from wakeful.safety.commands.words import HOME_MARK, PWD_MARK

BASH = shutil.which("bash")

# Each is the argument list of `printf '%s\0' …`, as written in a command line.
TRICKY = [
    "r\\\nm -rf src",
    "a\\\nb c\\\n\\\nd",
    "'a\\\nb'",
    '"a\\\nb"',
    "$'a\\\nb'",
    "x # a comment \\\n",
    "r''m \"r\"m \\rm r\\m",
    "$'\\x72\\x6d' $'\\162\\155' $'a\\tb'",
    "{a,b} x{1..3}y {a,{b,c}} '{a,b}' {a} {} \\{a,b}",
    "{rm,-rf,/}",
    "~ ~/x ~+ '~' \"~\" a=~/b --opt=~/c x~",
    "PATH=~/a:~/b",
    '$HOME/x "$HOME"/y ${HOME}z',
    "a\"b\"'c'$'d'",
    '"a\\$b" "a\\"b" "a\\\\b" "a\\qb"',
    "'' \"\" x''",
    "-rf\\\n /",
]


def _policy_words(line: str, home: str, cwd: str) -> list[str]:
    source = remove_continuations(f"printf '%s\\0' {line}")
    script = parse_script(new_parser(), source)
    assert not script.errors, script.errors
    words = script.commands[0].words[2:]
    values = []
    for word in words:
        assert word.value is not None, word.text
        values.append(word.value.replace(HOME_MARK, home).replace(PWD_MARK, cwd))
    return values


def _bash_words(line: str, home: str, cwd: str) -> list[str]:
    assert BASH is not None
    result = subprocess.run(
        [BASH, "--norc", "--noprofile", "-c", f"printf '%s\\0' {line}"],
        capture_output=True,
        check=True,
        cwd=cwd,
        env={"HOME": home, "PATH": os.environ.get("PATH", "/usr/bin:/bin")},
    )
    out = result.stdout.decode()
    return out.split("\0")[:-1] if out else []


@pytest.mark.skipif(BASH is None, reason="bash is not installed")
@pytest.mark.parametrize("line", TRICKY)
def test_the_policy_reads_words_as_bash_does(line: str, tmp_path: Path) -> None:
    home = str(tmp_path / "home")
    cwd = str(tmp_path)
    assert _policy_words(line, home, cwd) == _bash_words(line, home, cwd)


def test_tree_sitter_alone_splits_a_word_at_a_continuation() -> None:
    """The disagreement the lexer exists for: without it, `r\\<newline>m` is two words."""
    raw = parse_script(new_parser(), "r\\\nm -rf src")
    assert [w.value for w in raw.commands[0].words][:2] != ["rm", "-rf"]
    fixed = parse_script(new_parser(), remove_continuations("r\\\nm -rf src"))
    assert [w.value for w in fixed.commands[0].words] == ["rm", "-rf", "src"]


def test_text_bash_cannot_run_is_refused() -> None:
    assert refusal("ls\x00") is not None
    assert refusal("ls \udc80") is not None
    assert refusal("ls -la") is None


def test_code_points_past_255_do_not_crash_the_parser() -> None:
    # tree-sitter-bash hands the lookahead code point to isalpha(), which reads past the C
    # library's table for code points over 255: `{` then U+10FFFF crashed the process about
    # half the time. Checked in child processes, several times, so a crash fails this test.
    lines = ["{\U0010ffff", "{\U000f304e", "{\U000e0001 x", "echo ${\U000b35a0}", "a{\U0010fffd}"]
    code = (
        "import sys\n"
        "from wakeful.safety.commands import CommandPolicy, PolicySettings\n"
        "policy = CommandPolicy(PolicySettings())\n"
        "for line in sys.argv[1:]:\n"
        "    for _ in range(20):\n"
        "        policy.check(line)\n"
        "print('ok')\n"
    )
    for _ in range(5):
        done = subprocess.run(
            [sys.executable, "-c", code, *lines], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-500:]


def test_non_ascii_words_keep_their_text_and_their_judgement(tmp_path: Path) -> None:
    policy = CommandPolicy(PolicySettings(workspace=tmp_path))
    read = policy.check("cat café.txt 中文.md")
    piped = policy.check("echo 你好 | sh")
    removed = policy.check("rm -rf 資料")

    assert read.decision == "allow" and read.commands == ("cat café.txt 中文.md",)
    assert piped.decision == "ask"
    assert removed.decision == "ask" and any("資料" in reason for reason in removed.reasons)
