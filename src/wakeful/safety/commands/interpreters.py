"""What a one-line program for Python, Perl, Ruby, Node or PHP does that a shell policy cares
about: running shell commands, deleting files, reaching the network, running decoded code.

The code is not executed or fully parsed; it is searched for the calls that do these things
(`os.system`, `subprocess`, `child_process`, `shutil.rmtree`, `urllib`, …). A shell command given
as a string literal to such a call (`os.system('rm -rf /')`) is returned so the policy can judge
it like any other command line. Code that builds its calls dynamically (`getattr(os, 'sys' +
'tem')`) is not recognised: the sandbox, not this check, is the defence against it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final

from ..verdict import Decision

__all__ = ["CodeReport", "inspect_code", "language_of"]

_LANGUAGES: Final = {
    "python": "Python",
    "perl": "Perl",
    "ruby": "Ruby",
    "node": "Node",
    "nodejs": "Node",
    "php": "PHP",
}

_SHELL_OUT: Final = {
    "Python": re.compile(
        r"\bos\s*\.\s*(?:system|popen|exec\w*|spawn\w*|posix_spawn\w*)\b"
        r"|\bsubprocess\b|\bpty\s*\.\s*spawn\b|\bcommands\s*\.\s*getoutput\b"
    ),
    "Node": re.compile(r"\bchild_process\b|\b(?:execSync|spawnSync|execFileSync)\b"),
    "Perl": re.compile(r"\b(?:system|exec)\b|\bqx\s*[({\[/|!]|`[^`]+`|\bopen\s*\(.*\|"),
    "Ruby": re.compile(r"\b(?:system|exec|spawn)\b|\bIO\s*\.\s*popen\b|\bOpen3\b|%x[({\[]|`[^`]+`"),
    "PHP": re.compile(
        r"\b(?:system|exec|passthru|shell_exec|proc_open|popen|pcntl_exec)\s*\(|`[^`]+`"
    ),
}
# A string literal right after a shelling-out call: the command it runs.
_SHELL_STRING: Final = re.compile(
    r"(?:system|popen|exec\w*|spawn\w*|getoutput|check_output|check_call|call|run|Popen"
    r"|execSync|shell_exec|passthru|qx)\s*\(?\s*(?:\[\s*)?"
    r"(?P<q>'''|\"\"\"|'|\"|`)(?P<cmd>.*?)(?P=q)",
    re.DOTALL,
)
_BACKTICKS: Final = re.compile(r"`([^`]+)`")
_DELETES: Final = re.compile(
    r"\bshutil\s*\.\s*rmtree\b|\bos\s*\.\s*(?:remove|unlink|rmdir|removedirs)\b"
    r"|\.\s*(?:unlink|rmdir)\s*\(|\brmtree\b|\bunlink\b|\bFileUtils\s*\.\s*rm\w*\b"
    r"|\bFile\s*\.\s*delete\b|\bfs\s*\.\s*(?:rm|rmdir|unlink)\w*\b|\b(?:rmSync|unlinkSync|rmdirSync)\b"
)
_NETWORK: Final = re.compile(
    r"\burllib\w*\b|\brequests\b|\bhttpx\b|\bhttp\s*\.\s*client\b|\bsocket\b|\baiohttp\b"
    r"|\bftplib\b|\bsmtplib\b|\bparamiko\b|\bLWP\b|\bHTTP::Tiny\b|\bIO::Socket\b"
    r"|\bNet::\w+|\bopen-uri\b|\bURI\s*\.\s*open\b|\bfetch\s*\(|\brequire\s*\(\s*['\"](?:https?|net|dgram|tls)['\"]"
    r"|\bcurl_exec\b|\bfile_get_contents\s*\(\s*['\"]https?:"
)
_DECODE_AND_RUN: Final = re.compile(
    r"(?:\bexec|\beval|\bcompile|\bFunction)\s*\(.*(?:b64decode|base64|atob|decode\s*\(|fromhex|\\x[0-9a-f]{2})"
    r"|\beval\s*\(.*\bpack\s*\(",
    re.DOTALL | re.IGNORECASE,
)
_URL_HOST: Final = re.compile(
    r"\b[a-z][a-z0-9+.-]*://(?:[^/@\s'\"]*@)?(\[[^\]]+\]|[^/:\s'\"?#]+)", re.IGNORECASE
)
_ABSOLUTE_LITERAL: Final = re.compile(r"(['\"])(/[^'\"]*|~[^'\"]*)\1")


@dataclass(slots=True)
class CodeReport:
    """What the code does: findings `(decision, what)`, the shell command strings it passes to
    shelling-out calls, the hosts named in URLs and the absolute paths it names in literals."""

    findings: list[tuple[Decision, str]] = field(default_factory=list)
    shell_strings: list[str] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)
    deletes: bool = False
    paths: list[str] = field(default_factory=list)


def language_of(name: str) -> str | None:
    """The language an interpreter's name runs (`python3.12` → Python), or None."""
    if name.startswith("python"):
        return "Python"
    return _LANGUAGES.get(name)


def inspect_code(language: str, code: str) -> CodeReport:
    """Search the code of a one-liner for shelling out, deletes, network use and decoded code."""
    report = CodeReport()
    if _SHELL_OUT[language].search(code):
        report.findings.append(("ask", f"runs {language} code that starts shell commands"))
        for match in _SHELL_STRING.finditer(code):
            report.shell_strings.append(match.group("cmd"))
        if language in ("Perl", "Ruby", "PHP"):
            report.shell_strings.extend(m.group(1) for m in _BACKTICKS.finditer(code))
    if _DECODE_AND_RUN.search(code):
        report.findings.append(("ask", f"runs {language} code that decodes and runs hidden code"))
    if _DELETES.search(code):
        report.deletes = True
        report.paths = [m.group(2) for m in _ABSOLUTE_LITERAL.finditer(code)]
    if _NETWORK.search(code):
        report.hosts = [m.group(1).strip("[]") for m in _URL_HOST.finditer(code)]
        if not report.hosts:
            report.findings.append(
                (
                    "ask",
                    f"runs {language} code that uses the network, to hosts that cannot be "
                    "checked statically",
                )
            )
    return report
