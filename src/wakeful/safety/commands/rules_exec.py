"""Rules about what a command runs: wrappers (`sudo`, `env`, `nice`, `timeout`, `xargs`,
`find -exec`, …) whose payload is judged as a command of its own, code strings (`sh -c`,
`eval`, `alias`, heredocs fed to a shell) parsed again, interpreter one-liners (`python -c`,
`perl -e`, `node -e`) searched for shelling out, deletes and network use. Commands that stop
the machine or change it are in :mod:`.rules_system`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from .analysis import Analysis, Rule
from .catalog import judge_program, judge_script, judge_stdin_code
from .options import has_option, operands, option_values
from .parse import SimpleCommand
from .places import Place
from .rules_files import judge_write
from .rules_interpreters import judge_interpreter
from .words import Word

__all__ = ["ALWAYS_RULES", "EXEC_RULES", "SHELLS"]

SHELLS: Final = frozenset({"sh", "bash", "zsh", "dash", "ksh", "ash", "mksh", "fish", "busybox"})
# Variables whose value some program runs as a command.
_COMMAND_VARIABLES: Final = frozenset(
    {
        "GIT_SSH_COMMAND", "GIT_SSH", "GIT_PAGER", "PAGER", "GIT_EDITOR", "EDITOR", "VISUAL",
        "GIT_EXTERNAL_DIFF", "GIT_ASKPASS", "SSH_ASKPASS", "GIT_PROXY_COMMAND", "BASH_ENV",
        "ENV", "PROMPT_COMMAND", "GIT_SEQUENCE_EDITOR", "MANPAGER", "SUDO_ASKPASS",
        "PS0", "PS1", "PS2", "PS3", "PS4", "LESSOPEN", "LESSCLOSE", "LESSEDIT", "BROWSER",
        "SYSTEMD_PAGER", "GIT_DIFF_OPTS", "FCEDIT", "TERMINAL", "SHELL",
    }
)  # fmt: skip
# Values of those variables that run nothing but a pager or nothing at all.
_HARMLESS_COMMANDS: Final = frozenset(
    {"", "cat", "less", "more", "less -R", "less -FRX", "less -FR", "true", "vim", "vi", "nano",
     "/bin/cat", "/usr/bin/less"}
)  # fmt: skip
# Variables that send traffic elsewhere or change which program or repository is used.
_REDIRECTING_VARIABLES: Final = frozenset(
    {
        "http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "all_proxy",
        "ftp_proxy", "FTP_PROXY", "RSYNC_PROXY", "RSYNC_RSH", "RSYNC_CONNECT_PROG",
        "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_CONFIG",
        "GIT_ALTERNATE_OBJECT_DIRECTORIES", "CURL_HOME", "WGETRC", "SSL_CERT_FILE",
        "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL",
        "NPM_CONFIG_REGISTRY", "npm_config_registry", "CDPATH", "TMPDIR", "HISTFILE",
    }
)  # fmt: skip
_SYSTEM_PATH_DIRS: Final = frozenset(
    {"/bin", "/usr/bin", "/usr/local/bin", "/sbin", "/usr/sbin", "/usr/local/sbin"}
)
# Variables that load code into the command that it did not ask for.
_CODE_LOADING_VARIABLES: Final = frozenset(
    {
        "LD_PRELOAD", "LD_AUDIT", "LD_LIBRARY_PATH", "DYLD_INSERT_LIBRARIES",
        "DYLD_LIBRARY_PATH", "PERL5OPT", "PERL5LIB", "NODE_OPTIONS", "PYTHONSTARTUP",
        "RUBYOPT", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT", "GIT_CONFIG_GLOBAL",
        "GIT_CONFIG_SYSTEM", "GIT_EXEC_PATH", "GIT_TEMPLATE_DIR", "PYTHONPATH", "PYTHONHOME",
        "PYTHONUSERBASE", "PYTHONINSPECT", "NODE_PATH", "RUBYLIB", "PERLLIB", "PERL5DB",
        "GCONV_PATH", "LD_BIND_NOW", "MALLOC_CHECK_", "GLIBC_TUNABLES", "JAVA_TOOL_OPTIONS",
        "_JAVA_OPTIONS", "CLASSPATH", "GOFLAGS", "RUSTC_WRAPPER", "RUSTFLAGS", "CARGO_HOME",
        "PYTEST_ADDOPTS", "PYTEST_PLUGINS", "MAKEFLAGS", "MFLAGS", "BASH_LOADABLES_PATH",
    }
)  # fmt: skip
_DECODERS: Final = frozenset({"base64", "base32", "xxd", "uudecode", "openssl", "basenc"})
_MAX_WATCH_WORDS: Final = 200


# -- every command ---------------------------------------------------------------------------


def judge_dynamic_name(command: SimpleCommand, analysis: Analysis) -> None:
    """A command whose name only the running shell knows (`$(echo rm) -rf /`, `$CMD`)."""
    if command.words and command.name is None:
        analysis.flag(
            command,
            "ask",
            f"runs a command whose name ({command.words[0].text}) depends on the running shell "
            "and cannot be checked statically",
        )
    elif command.words and command.words[0].glob:
        analysis.flag(
            command,
            "ask",
            f"runs a command whose name ({command.words[0].text}) is a pattern the shell "
            "expands, which cannot be checked statically",
        )


def judge_assignments(command: SimpleCommand, analysis: Analysis) -> None:
    """`NAME=value cmd` prefixes that make the command run other code."""
    _judge_variables(command, command.assignments, analysis)


def _judge_variables(
    command: SimpleCommand, assignments: Sequence[tuple[str, Word]], analysis: Analysis
) -> None:
    for name, value in assignments:
        if name == "IFS":
            analysis.flag(
                command, "ask", "sets IFS, which changes how bash splits every later word"
            )
        elif name.startswith("BASH_FUNC_"):
            analysis.flag(command, "ask", f"defines the exported function {name}, code bash runs")
        elif name == "PATH":
            _judge_path(command, value, analysis)
        elif name in _REDIRECTING_VARIABLES:
            analysis.flag(
                command, "ask", f"sets {name}, which sends traffic or reads and writes elsewhere"
            )
        elif name in _COMMAND_VARIABLES and value.value in _HARMLESS_COMMANDS:
            continue
        elif name in _COMMAND_VARIABLES:
            analysis.flag(command, "ask", f"sets {name}, a command some program runs")
            if value.value is None:
                analysis.flag(
                    command,
                    "ask",
                    f"sets {name}, a command some program runs, to {value.text}, which cannot "
                    "be checked statically",
                )
            else:
                analysis.run_script(
                    value.value, depth=command.depth + 1, origin=command, what=f"in {name}"
                )
        elif name in _CODE_LOADING_VARIABLES:
            analysis.flag(command, "ask", f"sets {name}, which loads code into the program it runs")


def _judge_path(command: SimpleCommand, value: Word, analysis: Analysis) -> None:
    """`PATH=…` decides which program every later name runs: only system directories and the
    PATH bash already has keep names meaning what the rules think they mean."""
    if value.value is None:
        text = value.text.replace('"', "")
        pieces = text.split(":")
        if all(p in ("$PATH", "${PATH}") or p in _SYSTEM_PATH_DIRS for p in pieces):
            return
    elif all(p in _SYSTEM_PATH_DIRS for p in value.value.split(":")):
        return
    analysis.flag(
        command,
        "ask",
        f"sets PATH to {value.text}, so later command names may run programs from other "
        "directories, which cannot be checked",
    )


# -- wrappers --------------------------------------------------------------------------------


def _first_operand(args: Sequence[Word], takes_value: frozenset[str]) -> int:
    """The index of the first word that is not an option (or an option's value)."""
    i = 0
    while i < len(args):
        value = args[i].value
        if value is None or not value.startswith("-") or value == "-":
            return i
        if value == "--":
            return i + 1
        i += 2 if value in takes_value else 1
    return i


def _wrapper(takes_value: Sequence[str] = (), skip_operands: int = 0) -> Rule:
    needs_value = frozenset(takes_value)

    def judge_wrapped(command: SimpleCommand, analysis: Analysis) -> None:
        start = _first_operand(command.args, needs_value) + skip_operands
        analysis.derive(command, command.args[start:])

    judge_wrapped.__doc__ = "Judge the command the wrapper runs as a command of its own."
    return judge_wrapped


def judge_sudo(command: SimpleCommand, analysis: Analysis) -> None:
    """`sudo`/`doas`: ask (another user, usually root), and judge the command it runs."""
    takes = frozenset({"-u", "-g", "-h", "-p", "-C", "-U", "-r", "-t", "-T", "-D", "-a"})
    args = command.args
    start = _first_operand(args, takes)
    if start >= len(args):
        if has_option(args, "sie", ("--shell", "--login", "--edit")):
            analysis.flag(command, "ask", "opens a shell or an editor as root")
        return
    analysis.flag(command, "ask", "runs a command as another user (root unless -u says otherwise)")
    analysis.derive(command, args[start:])


def judge_su(command: SimpleCommand, analysis: Analysis) -> None:
    """`su`: ask; a `-c` string is judged as code."""
    analysis.flag(command, "ask", "switches to another user")
    args = command.args
    for i, word in enumerate(args):
        if word.value in ("-c", "--command") and i + 1 < len(args):
            _run_string(command, args[i + 1], analysis, "given to su -c")


def judge_env(command: SimpleCommand, analysis: Analysis) -> None:
    """`env [-i] [-u NAME] [NAME=value…] cmd`: the variables, an `-S` string, and the command."""
    args = command.args
    i = 0
    assignments: list[tuple[str, Word]] = []
    while i < len(args):
        value = args[i].value
        if value is None:
            break
        if value in ("-C", "--chdir") or value.startswith("--chdir="):
            analysis.flag(command, "ask", "runs a command in another directory (env -C)")
            return
        if value in ("-u", "--unset"):
            i += 2
            continue
        if value in ("-S", "--split-string") and i + 1 < len(args):
            _run_string(command, args[i + 1], analysis, "given to env -S")
            return
        if value == "--":
            i += 1
            continue
        if value.startswith("-") and value != "-":
            i += 1
            continue
        name, equals, rest = value.partition("=")
        if equals and name.replace("_", "").isalnum():
            assignments.append((name, Word(args[i].text, rest)))
            i += 1
            continue
        break
    _judge_variables(command, assignments, analysis)
    if i >= len(args):
        analysis.flag(
            command, "ask", "prints every variable of the environment, credentials included"
        )
        return
    analysis.derive(command, args[i:])


def judge_timeout(command: SimpleCommand, analysis: Analysis) -> None:
    """`timeout [opts] DURATION cmd`."""
    start = _first_operand(command.args, frozenset({"-s", "--signal", "-k", "--kill-after"}))
    analysis.derive(command, command.args[start + 1 :])


def judge_command_builtin(command: SimpleCommand, analysis: Analysis) -> None:
    """`command cmd` runs cmd; `command -v cmd` only looks it up."""
    if has_option(command.args, "vV"):
        return
    _wrapper()(command, analysis)


def judge_xargs(command: SimpleCommand, analysis: Analysis) -> None:
    """`xargs cmd args`: cmd runs with words read from standard input, which cannot be known."""
    takes = frozenset(
        {"-a", "-d", "-E", "-I", "-L", "-l", "-n", "-P", "-s", "--arg-file", "--delimiter",
         "--eof", "--replace", "--max-lines", "--max-args", "--max-procs", "--max-chars",
         "--process-slot-var"}
    )  # fmt: skip
    args = command.args
    start = _first_operand(args, takes)
    replace = next(
        (
            args[i + 1].value
            for i, w in enumerate(args[:start])
            if w.value in ("-I", "--replace") and i + 1 < len(args)
        ),
        None,
    )
    for word in args[:start]:
        value = word.value or ""
        if value.startswith("-I") and len(value) > 2:
            replace = value[2:]
        elif value.startswith("--replace="):
            replace = value.split("=", 1)[1]
        elif value in ("-i", "--replace"):
            replace = "{}"
    payload = list(args[start:]) or [Word("echo", "echo")]
    unknown = Word("<input>", None)
    if replace:
        payload = [Word(w.text, None) if w.value and replace in w.value else w for w in payload]
    else:
        payload.append(unknown)
    analysis.derive(command, payload)


def judge_watch(command: SimpleCommand, analysis: Analysis) -> None:
    """`watch [opts] cmd…`: the words are joined and run by `sh -c`."""
    start = _first_operand(command.args, frozenset({"-n", "--interval", "-d", "-g"}))
    words = command.args[start : start + _MAX_WATCH_WORDS]
    if any(w.value is None for w in words):
        analysis.flag(command, "ask", "runs a command that cannot be checked statically")
        return
    analysis.run_script(
        " ".join(w.value or "" for w in words),
        depth=command.depth + 1,
        origin=command,
        what="given to watch",
    )


# -- code strings ----------------------------------------------------------------------------


def _run_string(command: SimpleCommand, word: Word, analysis: Analysis, what: str) -> None:
    analysis.give_role(command, "code")
    if word.value is None:
        analysis.flag(
            command,
            "ask",
            f"runs the shell code {word.text} ({what}), which depends on the running shell "
            "and cannot be checked statically",
        )
        return
    analysis.run_script(word.value, depth=command.depth + 1, origin=command, what=what)


def judge_shell(command: SimpleCommand, analysis: Analysis) -> None:
    """`sh`/`bash`/… : a `-c` string is parsed again; a script read from standard input (a
    pipe, a redirection, a heredoc) is asked about (a static heredoc is still judged, so a
    deny inside it holds); a script file is trusted only inside the workspace."""
    args = list(command.args)
    name = command.name or "sh"
    if name == "busybox":
        analysis.flag(command, "ask", "runs a busybox applet, a program this policy does not judge")
        return
    takes = frozenset({"-o", "+o", "-O", "+O", "--rcfile", "--init-file"})
    start = _first_operand(args, takes)
    clusters = [w.value or "" for w in args[:start] if not (w.value or "").startswith("--")]
    runs_string = any("c" in c[1:] for c in clusters if c.startswith("-") and c not in takes)
    reads_stdin = any("s" in c[1:] for c in clusters if c.startswith("-") and c not in takes)
    if any("i" in c[1:] for c in clusters if c.startswith("-") and c not in takes):
        analysis.flag(command, "ask", "starts an interactive shell")
    if option_values(args[:start], ("--rcfile", "--init-file")):
        analysis.flag(command, "ask", "runs a startup file given on its command line")
    if runs_string:
        if start < len(args):
            _run_string(command, args[start], analysis, f"given to {name} -c")
        return
    if start < len(args) and not reads_stdin and args[start].value != "-":
        judge_script(command, args[start], analysis, name)
        return
    judge_stdin_code(command, analysis, name)
    if command.stdin_text is not None:
        analysis.run_script(
            command.stdin_text, depth=command.depth + 1, origin=command, what=f"fed to {name}"
        )


def judge_eval(command: SimpleCommand, analysis: Analysis) -> None:
    """`eval words…`: the words are joined and parsed again."""
    analysis.give_role(command, "code")
    words = command.args
    if any(w.value is None for w in words):
        dynamic = next(w for w in words if w.value is None)
        analysis.flag(
            command,
            "ask",
            f"evaluates {dynamic.text} as shell code, which depends on the running shell and "
            "cannot be checked statically",
        )
        return
    analysis.run_script(
        " ".join(w.value or "" for w in words),
        depth=command.depth + 1,
        origin=command,
        what="given to eval",
    )


_STDIN_FILES: Final = ("/dev/stdin", "/dev/fd/0", "/proc/self/fd/0", "/dev/fd/", "/proc/")


def judge_source(command: SimpleCommand, analysis: Analysis) -> None:
    """`source FILE`/`. FILE` runs a file in this shell: standard input (`/dev/stdin`) is
    asked like a pipe into a shell; other files like scripts."""
    found = operands(command.args)
    if not found:
        return
    target = found[0]
    analysis.give_role(command, "code")
    if target.value is not None and target.value.startswith(_STDIN_FILES):
        judge_stdin_code(command, analysis, "shell")
        return
    judge_script(command, target, analysis, "shell")


def judge_alias(command: SimpleCommand, analysis: Analysis) -> None:
    """`alias name='code'`: the code runs whenever the name is used, so it is judged now."""
    for word in command.args:
        value = word.value
        if value is None:
            analysis.flag(
                command, "ask", f"defines an alias {word.text} that cannot be checked statically"
            )
            continue
        name, equals, body = value.partition("=")
        if equals:
            analysis.run_script(
                body, depth=command.depth + 1, origin=command, what=f"in the alias {name}"
            )


def judge_find(command: SimpleCommand, analysis: Analysis) -> None:
    """`find ROOTS… EXPR`: `-delete` deletes trees under the roots, `-exec`/`-execdir`/`-ok`
    run a command per file (judged with `{}` standing for any file under the roots),
    `-fprint`/`-fprintf`/`-fls` write files."""
    args = command.args
    i = 0
    roots: list[Word] = []
    while i < len(args) and args[i].value in ("-H", "-L", "-P"):
        i += 1
    while i < len(args) and not (args[i].value or "-").startswith(("-", "(", "!", ")")):
        roots.append(args[i])
        i += 1
    while i < len(args) and args[i].value is None:
        roots.append(args[i])  # a dynamic word may be a root or a test: keep it as a root
        i += 1
    roots = roots or [Word(".", ".")]
    while i < len(args):
        value = args[i].value
        if value == "-delete":
            _judge_find_delete(command, roots, analysis)
        elif value in ("-exec", "-execdir", "-ok", "-okdir"):
            end = i + 1
            while end < len(args) and args[end].value not in (";", "+"):
                end += 1
            payload = args[i + 1 : end]
            if value in ("-ok", "-okdir") or (
                payload
                and (payload[0].value or "").rsplit("/", 1)[-1]
                in ("rm", "unlink", "shred", "mv", "rmdir", "truncate")
            ):
                analysis.flag(command, "ask", "deletes, moves or overwrites every matching file")
            for root in roots:
                any_file = (
                    Word("{}", None)
                    if root.value is None
                    else Word("{}", root.value.rstrip("/") + "/*", glob=True)
                )
                analysis.derive(command, [_fill_braces(w, any_file) for w in payload])
            i = end
        elif value in ("-fprint", "-fprint0", "-fls", "-fprintf") and i + 1 < len(args):
            judge_write(command, args[i + 1], analysis)
            i += 1
        i += 1


def _fill_braces(word: Word, any_file: Word) -> Word:
    """A `-exec` word with `{}` standing for any file under the root, also inside a string
    (`sh -c 'echo > {}'`)."""
    if word.value is None or "{}" not in word.value:
        return word
    if word.value == "{}":
        return any_file
    if any_file.value is None:
        return Word(word.text, None)
    return Word(word.text, word.value.replace("{}", any_file.value))


def _judge_find_delete(command: SimpleCommand, roots: list[Word], analysis: Analysis) -> None:
    places = analysis.places
    for root in roots:
        location = places.locate(root)
        if not location.known:
            analysis.flag(
                command,
                "ask",
                f"deletes files under {root.text}, which cannot be checked statically",
            )
        elif location.place in (Place.WORKSPACE, Place.WORKSPACE_ROOT, Place.SCRATCH):
            analysis.flag(command, "ask", f"deletes matching files under {location.path}")
        else:
            analysis.flag(
                command,
                "deny",
                f"deletes files under {location.path}, outside the workspace ({places.workspace})",
            )


def judge_decoder(command: SimpleCommand, analysis: Analysis) -> None:
    """`base64 -d`, `xxd -r`, `openssl … -d`: its output is hidden code if it is then run."""
    if has_option(command.args, "dDr", ("--decode", "--reverse")):
        analysis.give_role(command, "decode")


ALWAYS_RULES: Final[tuple[Rule, ...]] = (judge_dynamic_name, judge_assignments, judge_program)

EXEC_RULES: Final[dict[str, tuple[Rule, ...]]] = {
    "sudo": (judge_sudo,),
    "doas": (judge_sudo,),
    "su": (judge_su,),
    "env": (judge_env,),
    "nice": (_wrapper(("-n", "--adjustment")),),
    "ionice": (_wrapper(("-c", "-n", "-p", "-P", "-u", "--class", "--classdata")),),
    "nohup": (_wrapper(),),
    "setsid": (_wrapper(),),
    "stdbuf": (_wrapper(("-i", "-o", "-e")),),
    "time": (_wrapper(("-f", "-o", "--format", "--output")),),
    "builtin": (_wrapper(),),
    "exec": (_wrapper(("-a",)),),
    "command": (judge_command_builtin,),
    "timeout": (judge_timeout,),
    "xargs": (judge_xargs,),
    "watch": (judge_watch,),
    **{name: (judge_shell,) for name in SHELLS},
    "eval": (judge_eval,),
    "source": (judge_source,),
    ".": (judge_source,),
    "alias": (judge_alias,),
    "find": (judge_find,),
    **{name: (judge_interpreter,) for name in ("python", "perl", "ruby", "node", "nodejs", "php")},
    "python3": (judge_interpreter,),
    **{name: (judge_decoder,) for name in _DECODERS},
}
