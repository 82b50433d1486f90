"""Rules about commands that reach the network: `curl`, `wget`, `nc`, `ssh`, `scp`, `rsync`
and friends ask unless every host they name is in `allowed_hosts`. A reverse shell
(`nc -e /bin/sh`) is denied; ssh options that run a local command are judged as code.
"""

from __future__ import annotations

from typing import Final

from .analysis import Analysis, Rule
from .hosts import host_of_remote, host_of_url, judge_hosts
from .options import has_option, operands, option_values
from .parse import SimpleCommand
from .rules_files import judge_write
from .words import Word

__all__ = ["NETWORK_RULES"]

_CURL_VALUES: Final = frozenset(
    {
        "-o", "--output", "-H", "--header", "-d", "--data", "--data-raw", "--data-binary",
        "--data-urlencode", "-X", "--request", "-u", "--user", "-A", "--user-agent", "-e",
        "--referer", "-b", "--cookie", "-c", "--cookie-jar", "-T", "--upload-file", "-F",
        "--form", "-x", "--proxy", "-w", "--write-out", "-m", "--max-time", "--connect-timeout",
        "-r", "--range", "-K", "--config", "-E", "--cert", "--key", "--cacert", "--resolve",
        "-C", "--continue-at", "-D", "--dump-header", "-Y", "-y", "-z", "--retry",
        "--retry-delay", "--retry-max-time", "--url", "--limit-rate", "--max-filesize",
        "--interface", "--json", "-U", "--proxy-user", "--connect-to", "--oauth2-bearer",
    }
)  # fmt: skip
_WGET_VALUES: Final = frozenset(
    {
        "-O", "--output-document", "-o", "--output-file", "-a", "--append-output", "-P",
        "--directory-prefix", "-U", "--user-agent", "--header", "-e", "--execute", "-i",
        "--input-file", "-t", "--tries", "-T", "--timeout", "-w", "--wait", "--user",
        "--password", "-l", "--level", "-Q", "--quota", "--post-data", "--post-file",
        "--referer", "-B", "--base", "--limit-rate",
    }
)  # fmt: skip
_SSH_VALUES: Final = frozenset(
    {"-b", "-c", "-D", "-E", "-e", "-F", "-I", "-i", "-J", "-L", "-l", "-m", "-O", "-o",
     "-p", "-Q", "-R", "-S", "-W", "-w", "-B", "-P"}
)  # fmt: skip
_SSH_COMMAND_OPTIONS: Final = ("proxycommand", "localcommand", "knownhostscommand")
_NC_VALUES: Final = frozenset(
    {"-e", "-c", "-p", "-s", "-w", "-i", "-x", "-X", "-q", "-I", "-O", "-T", "-V"}
)


def _url_hosts(words: list[Word]) -> list[str | None]:
    hosts: list[str | None] = []
    for word in words:
        if word.value is None:
            hosts.append(None)
            continue
        if word.value.startswith("file:"):
            continue
        host = host_of_url(word.value)
        if host is not None:
            hosts.append(host)
    return hosts


def judge_download(command: SimpleCommand, analysis: Analysis) -> None:
    """`curl`, `wget`, `http`/`https` (HTTPie), `aria2c`: the hosts of their URLs, and the
    files they write (`-o`, `-O`)."""
    name = command.name
    args = command.args
    analysis.give_role(command, "download")
    redirecting = (
        "-x", "--proxy", "--preproxy", "--socks4", "--socks4a", "--socks5", "--socks5-hostname",
        "--connect-to", "--resolve", "--doh-url", "-K", "--config", "--unix-socket",
        "--abstract-unix-socket", "-e", "--execute", "--use-askpass", "--post-file", "-T",
        "--upload-file", "-i", "--input-file",
    )  # fmt: skip
    if option_values(args, redirecting) or has_option(
        args, long=[o for o in redirecting if o.startswith("--")]
    ):
        analysis.flag(
            command,
            "ask",
            "uses a proxy, a name override, a socket, a config file or an upload given on its "
            "command line, so where it connects or what it sends cannot be checked",
        )
    if any((w.value or "").lower().startswith("file:") for w in args):
        analysis.flag(command, "ask", "reads local files through a file:// URL")
    if name == "curl":
        urls = operands(args, _CURL_VALUES) + option_values(args, ("--url",))
        outputs = option_values(args, ("-o", "--output"))
    elif name == "wget":
        urls = operands(args, _WGET_VALUES)
        outputs = [w for w in option_values(args, ("-O", "--output-document")) if w.value != "-"]
    else:
        urls = operands(args)
        outputs = option_values(args, ("-o", "--output", "-d", "--dir"))
    judge_hosts(command, _url_hosts(urls), analysis, "reaches")
    for output in outputs:
        judge_write(command, output, analysis)


def judge_netcat(command: SimpleCommand, analysis: Analysis) -> None:
    """`nc`, `ncat`, `netcat`, `telnet`, `socat`: a program handed to the network (`-e`, `-c`,
    `EXEC:`) is denied; listening is asked; connections ask unless the host is allowed."""
    args = command.args
    analysis.give_role(command, "download")
    if command.name == "socat":
        if any(
            "exec:" in (w.value or "").lower() or "system:" in (w.value or "").lower() for w in args
        ):
            analysis.flag(
                command,
                "deny",
                "connects a program's input and output to another address (EXEC/SYSTEM)",
            )
        else:
            analysis.flag(command, "ask", "relays data between addresses that are not checked")
        return
    if option_values(args, ("-e", "-c", "--exec", "--sh-exec", "--lua-exec")):
        analysis.flag(
            command, "deny", "hands a program's input and output to the network (a remote shell)"
        )
        return
    if has_option(args, "l", ("--listen",), _NC_VALUES):
        analysis.flag(command, "ask", "listens for network connections")
        return
    found = operands(args, _NC_VALUES)
    if found:
        value = found[0].value
        judge_hosts(
            command, [value.split("@")[-1] if value is not None else None], analysis, "connects to"
        )


def judge_ssh(command: SimpleCommand, analysis: Analysis) -> None:
    """`ssh`: the host (and jump hosts), and options that run a local command."""
    args = command.args
    _judge_ssh_options(command, args, analysis)
    found = operands(args, _SSH_VALUES)
    hosts: list[str | None] = []
    if option_values(args, ("-F", "-L", "-R", "-D", "-W", "-w")):
        analysis.flag(command, "ask", "uses a config file, forwards ports or tunnels traffic")
    if len(found) > 1 or has_option(args, "tN"):
        analysis.flag(command, "ask", "runs a command on another machine")
    if found:
        value = found[0].value
        hosts.append(_strip_user(value) if value is not None else None)
    for jump in option_values(args, ("-J",)):
        hosts.extend(
            _strip_user(h) if jump.value is not None else None
            for h in (jump.value or "?").split(",")
        )
    judge_hosts(command, hosts, analysis, "connects to")


def _strip_user(text: str) -> str:
    host = text.split("@")[-1]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _judge_ssh_options(command: SimpleCommand, args: tuple[Word, ...], analysis: Analysis) -> None:
    for option in option_values(args, ("-o",)):
        if option.value is None:
            analysis.flag(
                command,
                "ask",
                f"sets the ssh option {option.text}, which cannot be checked statically",
            )
            continue
        key, _, value = option.value.replace("=", " ", 1).partition(" ")
        if key.lower() in _SSH_COMMAND_OPTIONS:
            analysis.give_role(command, "code")
            analysis.run_script(
                value.strip(),
                depth=command.depth + 1,
                origin=command,
                what=f"in the ssh option {key}",
            )
            analysis.flag(command, "ask", f"runs a local command through the ssh option {key}")


def judge_copy_remote(command: SimpleCommand, analysis: Analysis) -> None:
    """`scp`, `sftp`, `rsync`: remote operands (`host:path`, `rsync://…`) ask unless allowed;
    a local destination is judged as a write; `rsync -e CMD` is judged as code."""
    args = command.args
    name = command.name
    if name == "rsync":
        found = operands(
            args,
            (
                "-e",
                "--rsh",
                "--exclude",
                "--include",
                "--filter",
                "-f",
                "--files-from",
                "--exclude-from",
                "--include-from",
                "--port",
                "--password-file",
                "-T",
                "--temp-dir",
                "--log-file",
                "--chmod",
                "--chown",
                "--backup-dir",
                "--suffix",
                "--compare-dest",
                "--link-dest",
                "--copy-dest",
                "-B",
                "--block-size",
                "--timeout",
                "--contimeout",
                "--max-size",
                "--min-size",
                "--bwlimit",
                "--partial-dir",
            ),
        )
        for shell in option_values(args, ("-e", "--rsh")):
            if shell.value is None or not shell.value.startswith("ssh"):
                analysis.flag(command, "ask", f"runs {shell.text} as its remote shell")
            if shell.value is None:
                analysis.flag(
                    command,
                    "ask",
                    f"runs the remote shell {shell.text}, which cannot be checked statically",
                )
            else:
                analysis.run_script(
                    shell.value, depth=command.depth + 1, origin=command, what="given to rsync -e"
                )
    else:
        _judge_ssh_options(command, args, analysis)
        found = operands(args, _SSH_VALUES)
    hosts: list[str | None] = []
    for word in found:
        if word.value is None:
            hosts.append(None)
            continue
        host = host_of_remote(word.value)
        if host is not None:
            hosts.append(host.split("@")[-1])
    judge_hosts(command, hosts, analysis, "copies files with")
    if name != "sftp" and len(found) >= 2:
        destination = found[-1]
        if destination.value is None or host_of_remote(destination.value) is None:
            judge_write(command, destination, analysis)


def judge_remote_login(command: SimpleCommand, analysis: Analysis) -> None:
    """`ftp`, `lftp`, `telnet`, `mosh`: the first operand is the host."""
    found = operands(command.args, ("-p", "-u", "-e", "-c", "--ssh"))
    if found:
        value = found[0].value
        judge_hosts(
            command, [_strip_user(value) if value is not None else None], analysis, "connects to"
        )


def judge_name_lookup(command: SimpleCommand, analysis: Analysis) -> None:
    """`ping`, `dig`, `nslookup`, `host`, `traceroute`, `whois`, `getent hosts`: the names they
    look up leave the machine (DNS), so a name built from data exfiltrates it."""
    args = command.args
    found = [
        w
        for w in operands(
            args,
            ("-c", "-i", "-W", "-w", "-t", "-p", "-s", "-I", "-q", "-m", "-f", "-b", "-k", "-y"),
        )
        if w.value is None or not w.value.isdigit()
    ]
    if command.name == "getent" and found:
        found = found[1:]
    hosts: list[str | None] = []
    for word in found:
        value = word.value
        if value is None:
            hosts.append(None)
        elif value.startswith("@"):
            hosts.append(value[1:])
        elif value.lower() not in (
            "a",
            "aaaa",
            "mx",
            "ns",
            "txt",
            "any",
            "soa",
            "cname",
            "ptr",
            "srv",
        ):
            hosts.append(value)
    judge_hosts(command, hosts, analysis, "looks up")


def judge_openssl(command: SimpleCommand, analysis: Analysis) -> None:
    """`openssl s_client`/`s_server` talk to the network."""
    if command.args and command.args[0].value in ("s_client", "s_server", "s_time", "ocsp"):
        analysis.flag(command, "ask", "opens a network connection")


NETWORK_RULES: Final[dict[str, tuple[Rule, ...]]] = {
    **{
        name: (judge_name_lookup,)
        for name in (
            "ping",
            "ping6",
            "dig",
            "nslookup",
            "host",
            "traceroute",
            "traceroute6",
            "tracepath",
            "whois",
            "getent",
            "mtr",
            "arping",
            "drill",
        )
    },
    "openssl": (judge_openssl,),
    **{name: (judge_download,) for name in ("curl", "wget", "http", "https", "aria2c", "fetch")},
    **{name: (judge_netcat,) for name in ("nc", "ncat", "netcat", "socat")},
    "ssh": (judge_ssh,),
    **{name: (judge_copy_remote,) for name in ("scp", "sftp", "rsync")},
    **{name: (judge_remote_login,) for name in ("ftp", "lftp", "telnet", "mosh")},
}
