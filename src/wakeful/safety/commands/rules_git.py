"""Rules for `git`: configuration that runs programs (`-c core.sshCommand=…`, `alias.x=!…`)
is denied; rewriting remote history (`push --force`), `reset --hard`, `clean -f` and deleting
branches are asked; talking to a remote asks unless its host is in `allowed_hosts` (a named
remote like `origin` asks unless every host is allowed, because its URL is in git's
configuration, which this check does not read).
"""

from __future__ import annotations

import re
from typing import Final

from .analysis import Analysis, Rule
from .hosts import host_of_remote, judge_hosts
from .options import has_option, operands, option_values
from .parse import SimpleCommand
from .places import Place
from .rules_files import judge_write
from .words import Word

__all__ = ["GIT_RULES"]

_GLOBAL_VALUES: Final = frozenset(
    {"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--config-env", "--super-prefix"}
)
# Configuration keys whose value git runs as a program (or that load one).
_EXEC_KEYS: Final = re.compile(
    r"^(?:alias\..+|core\.(?:sshcommand|pager|editor|fsmonitor|hookspath|gitproxy|askpass)"
    r"|credential(?:\..+)?\.helper|diff\.external|diff\..+\.(?:textconv|command)"
    r"|(?:diff|merge)tool\..+\.(?:cmd|path)|merge\..+\.driver|filter\..+\.(?:clean|smudge|process)"
    r"|sequence\.editor|gpg(?:\..+)?\.program|uploadpack\.packobjectshook"
    r"|remote\..+\.(?:uploadpack|receivepack)|protocol\..+\.allow|include\.path|includeif\..+"
    r"|pager\..+|web\.browser|browser\..+\.(?:cmd|path)|man\..+\.(?:cmd|path)|ssh\.variant"
    r"|http\..*proxy|url\..+\.insteadof|submodule\..+\.update)$"
)
# Configuration keys safe to set for one command: they change output and defaults only.
_HARMLESS_KEYS: Final = re.compile(
    r"^(?:color\..+|advice\..+|user\.(?:name|email)|core\.(?:quotepath|autocrlf|safecrlf|abbrev)"
    r"|init\.defaultbranch|column\..+|diff\.(?:renames|noprefix|mnemonicprefix|algorithm|colormoved)"
    r"|merge\.conflictstyle|log\.(?:date|decorate|follow)|format\.pretty|pull\.(?:rebase|ff)"
    r"|commit\.(?:gpgsign|verbose)|tag\.gpgsign|fetch\.prune|rebase\.(?:autosquash|autostash)"
    r"|status\.(?:short|branch|showuntrackedfiles)|i18n\..+|blame\..+|grep\.(?:linenumber|extendedregexp))$"
)
_RUNS_OR_WRITES: Final = {
    "bisect": ("run",),
    "difftool": (),
    "mergetool": (),
    "filter-branch": (),
    "filter-repo": (),
    "credential": (),
    "credential-store": (),
    "credential-cache": (),
    "send-email": (),
    "daemon": (),
    "instaweb": (),
    "update-ref": ("-d",),
    "reflog": ("expire", "delete"),
    "gc": ("--prune=now",),
    "replace": (),
    "p4": (),
    "svn": (),
    "cvsimport": (),
    "archimport": (),
    "quiltimport": (),
    "remote-ext": (),
}
_NETWORK_SUBCOMMANDS: Final = frozenset({"push", "fetch", "pull", "clone", "ls-remote"})
_OPTION_VALUES: Final = frozenset(
    {"-o", "--push-option", "--receive-pack", "--upload-pack", "--exec", "-b", "--branch",
     "--depth", "--reference", "--origin", "--template", "-c", "--config", "-j", "--jobs",
     "--shallow-since", "--shallow-exclude", "--separate-git-dir", "--filter"}
)  # fmt: skip


def judge_git(command: SimpleCommand, analysis: Analysis) -> None:
    """All git rules; see the module docstring."""
    args = command.args
    i = 0
    while i < len(args):
        value = args[i].value
        if value is None or not value.startswith("-"):
            break
        if value in ("-c",) and i + 1 < len(args):
            _judge_config(command, args[i + 1], analysis)
        elif value.startswith("-c") and len(value) > 2:
            _judge_config(command, Word(args[i].text, value[2:]), analysis)
        elif value in ("-C", "--git-dir", "--work-tree") or value.startswith(
            ("--git-dir=", "--work-tree=")
        ):
            target = (
                args[i + 1]
                if "=" not in value and i + 1 < len(args)
                else Word(value, value.split("=", 1)[-1])
            )
            place = analysis.places.locate(target).place
            if place not in (Place.WORKSPACE, Place.WORKSPACE_ROOT):
                analysis.flag(
                    command,
                    "ask",
                    f"works on the repository or tree at {target.text}, outside the workspace",
                )
        elif value.startswith("--config-env") or value.startswith("--exec-path="):
            analysis.flag(command, "ask", f"changes git's configuration or programs with {value}")
        i += 2 if value in _GLOBAL_VALUES else 1
    if i >= len(args):
        return
    sub = args[i].value
    rest = args[i + 1 :]
    if sub is None:
        analysis.flag(
            command,
            "ask",
            f"runs the git command {args[i].text}, which cannot be checked statically",
        )
        return
    if sub in _RUNS_OR_WRITES:
        needles = _RUNS_OR_WRITES[sub]
        if not needles or any(w.value in needles for w in rest):
            analysis.flag(
                command,
                "ask",
                f"runs git {sub}, which runs programs, rewrites history, handles credentials or "
                "reaches outside the workspace",
            )
    if sub == "grep" and (
        option_values(rest, ("-O", "--open-files-in-pager"))
        or has_option(rest, long=("--open-files-in-pager",))
        or any((w.value or "").startswith("-O") for w in rest)
    ):
        analysis.flag(command, "ask", "opens the matches in a pager command it is given")
    if has_option(rest, long=("--output",)) or option_values(rest, ("--output",)):
        analysis.flag(command, "ask", "writes its output to a file it is given (--output)")
        for output in option_values(rest, ("--output",)):
            judge_write(command, output, analysis)
    for directory in (
        option_values(rest, ("-o", "--output-directory")) if sub == "format-patch" else []
    ):
        judge_write(command, directory, analysis)
    if sub == "config":
        _judge_config_command(command, rest, analysis)
    elif sub == "push":
        _judge_push(command, rest, analysis)
    elif sub == "reset" and has_option(rest, long=("--hard", "--merge", "--keep")):
        analysis.flag(command, "ask", "discards uncommitted changes (git reset --hard)")
    elif (
        sub == "clean"
        and has_option(rest, "f", ("--force",))
        and not has_option(rest, "n", ("--dry-run",))
    ):
        analysis.flag(command, "ask", "deletes untracked files (git clean -f)")
    elif sub == "branch" and has_option(rest, "D"):
        analysis.flag(
            command, "ask", "deletes a branch whether or not it was merged (git branch -D)"
        )
    elif sub == "stash" and rest and rest[0].value in ("clear", "drop"):
        analysis.flag(command, "ask", "throws away stashed changes")
    elif sub in ("rebase",):
        for j, word in enumerate(rest):
            if word.value in ("-x", "--exec") and j + 1 < len(rest):
                _run_code(command, rest[j + 1], analysis, "given to git rebase --exec")
    elif sub == "submodule" and rest and rest[0].value == "foreach":
        code = [w for w in rest[1:] if not (w.value or "").startswith("-")]
        if code:
            _run_code(
                command,
                Word(
                    " ".join(w.text for w in code),
                    None
                    if any(w.value is None for w in code)
                    else " ".join(w.value or "" for w in code),
                ),
                analysis,
                "given to git submodule foreach",
            )
    if sub in _NETWORK_SUBCOMMANDS:
        _judge_remote(command, sub, rest, analysis)


def _run_code(command: SimpleCommand, word: Word, analysis: Analysis, what: str) -> None:
    if word.value is None:
        analysis.flag(
            command,
            "ask",
            f"runs shell code {word.text} ({what}) that cannot be checked statically",
        )
    else:
        analysis.run_script(word.value, depth=command.depth + 1, origin=command, what=what)


def _judge_config(command: SimpleCommand, setting: Word, analysis: Analysis) -> None:
    if setting.value is None:
        analysis.flag(
            command,
            "ask",
            f"sets git configuration {setting.text} that cannot be checked statically",
        )
        return
    key = setting.value.split("=", 1)[0].lower()
    if _EXEC_KEYS.match(key):
        analysis.flag(
            command,
            "deny",
            f"sets the git configuration {key}, which makes git run a program "
            "(configuration injection)",
        )
    elif not _HARMLESS_KEYS.match(key):
        analysis.flag(
            command,
            "ask",
            f"sets the git configuration {key} for this command, which may change what git runs "
            "or where it writes or connects",
        )


def _judge_config_command(
    command: SimpleCommand, rest: tuple[Word, ...], analysis: Analysis
) -> None:
    if has_option(rest, long=("--global", "--system", "--file", "--blob")) or option_values(
        rest, ("-f", "--file")
    ):
        analysis.flag(command, "ask", "changes or reads git configuration outside the repository")
    if any(
        "credential" in (w.value or "").lower() or "url" in (w.value or "").lower() for w in rest
    ):
        analysis.flag(command, "ask", "reads or changes credential or remote configuration")
    found = operands(rest, ("-f", "--file", "--blob", "--type", "--default", "--comment"))
    if found and found[0].value in ("set", "--add", "add"):
        found = found[1:]
    if len(found) >= 2:
        key = found[0]
        if key.value is None:
            analysis.flag(
                command,
                "ask",
                f"sets git configuration {key.text} that cannot be checked statically",
            )
        elif _EXEC_KEYS.match(key.value.lower()):
            analysis.flag(
                command,
                "deny",
                f"stores the git configuration {key.value}, which makes git run a program",
            )


def _judge_push(command: SimpleCommand, rest: tuple[Word, ...], analysis: Analysis) -> None:
    forced = has_option(
        rest,
        "fd",
        ("--force", "--force-with-lease", "--force-if-includes", "--mirror", "--delete", "--prune"),
        _OPTION_VALUES,
    )
    refspecs = operands(rest, _OPTION_VALUES)[1:]
    if forced or any((w.value or "").startswith(("+", ":")) for w in refspecs):
        analysis.flag(
            command,
            "ask",
            "rewrites or deletes history on the remote (a forced push or a deleted ref)",
        )


def _judge_remote(
    command: SimpleCommand, sub: str, rest: tuple[Word, ...], analysis: Analysis
) -> None:
    found = operands(rest, _OPTION_VALUES)
    remote = found[0] if found else Word("origin", "origin")
    if remote.value is not None and "::" in remote.value and "://" not in remote.value:
        analysis.flag(
            command, "ask", f"uses the remote helper in {remote.text}, which runs a program"
        )
        return
    if sub == "clone" and len(found) > 1:
        judge_write(command, found[1], analysis)
    if remote.value is None:
        judge_hosts(command, [None], analysis, f"talks (git {sub}) to")
        return
    host = host_of_remote(remote.value)
    if host is not None:
        judge_hosts(command, [host.split("@")[-1]], analysis, f"talks (git {sub}) to")
    elif (
        not remote.value.startswith(("/", ".", "~", "file://", "\x00"))
        and "*" not in analysis.allowed_hosts
    ):
        analysis.flag(
            command,
            "ask",
            f"talks (git {sub}) to the remote {remote.value!r}, whose host is in git's "
            "configuration, which this check does not read; add '*' to allowed_hosts to allow it",
        )


GIT_RULES: Final[dict[str, tuple[Rule, ...]]] = {"git": (judge_git,)}
