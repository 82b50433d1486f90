"""Rules about the machine itself: stopping or restarting it, services, signals to other
processes, and the tools that change users, mounts, firewalls, kernel modules or scheduled jobs.
"""

from __future__ import annotations

from typing import Final

from .analysis import Analysis, Rule
from .options import has_option, operands
from .parse import SimpleCommand

__all__ = ["SYSTEM_RULES"]

_POWER: Final = frozenset({"shutdown", "reboot", "halt", "poweroff", "kexec", "killall5"})
_SYSTEMCTL_POWER: Final = frozenset(
    {"poweroff", "reboot", "halt", "kexec", "suspend", "hibernate", "rescue", "emergency",
     "isolate", "soft-reboot"}
)  # fmt: skip
_SYSTEMCTL_READ: Final = ("status", "show", "list-", "is-", "cat", "help", "--version")
_ADMIN: Final = frozenset(
    {
        "mount", "umount", "iptables", "ip6tables", "nft", "ufw", "useradd", "userdel",
        "usermod", "groupadd", "groupdel", "passwd", "chpasswd", "visudo", "modprobe", "insmod",
        "rmmod", "swapoff", "swapon", "launchctl", "service", "chattr", "setcap", "mknod",
        "crontab", "sysctl", "chroot", "nsenter", "unshare",
    }
)  # fmt: skip


def judge_power(command: SimpleCommand, analysis: Analysis) -> None:
    """Shutting down, rebooting, killing every process."""
    analysis.flag(command, "deny", "stops or restarts the machine or all its processes")


def judge_init(command: SimpleCommand, analysis: Analysis) -> None:
    """`init 0`/`init 6`/`telinit …` change the run level."""
    if any(w.value in ("0", "1", "6", "s", "S") for w in command.args):
        judge_power(command, analysis)


def judge_systemctl(command: SimpleCommand, analysis: Analysis) -> None:
    """`systemctl poweroff` is denied; changing units is asked; reading them is allowed."""
    found = operands(
        command.args,
        (
            "-H",
            "--host",
            "-M",
            "--machine",
            "-t",
            "--type",
            "-p",
            "--property",
            "-n",
            "--lines",
            "-o",
            "--output",
            "-s",
            "--signal",
        ),
    )
    verb = found[0].value if found else None
    if verb in _SYSTEMCTL_POWER:
        judge_power(command, analysis)
    elif verb is None and found:
        analysis.flag(command, "ask", "runs a systemctl action that cannot be checked statically")
    elif verb is not None and not verb.startswith(_SYSTEMCTL_READ):
        analysis.flag(command, "ask", f"changes system services ({verb})")


def judge_kill(command: SimpleCommand, analysis: Analysis) -> None:
    """`kill`/`pkill`/`killall` signal other processes: asked; PID 1 (init) or -1 (every
    process) is denied."""
    args = command.args
    first = args[0].value if args else None
    if command.name == "kill" and first in ("-l", "-L", "--list"):
        return
    i = 0
    if first in ("-s", "-n"):
        i = 2
    elif first is not None and first.startswith("-") and len(args) > 1:
        i = 1  # a signal: `-9`, `-KILL`, `-SIGKILL`
    if command.name == "kill" and any(word.value in ("1", "-1") for word in args[i:]):
        analysis.flag(command, "deny", "kills init or every process")
        return
    analysis.flag(command, "ask", "sends a signal to other processes")


def judge_admin(command: SimpleCommand, analysis: Analysis) -> None:
    """Tools that change users, mounts, firewalls, kernel modules or scheduled jobs."""
    if command.name == "crontab" and has_option(command.args, "l"):
        return
    analysis.flag(command, "ask", "changes system administration state")


SYSTEM_RULES: Final[dict[str, tuple[Rule, ...]]] = {
    **{name: (judge_power,) for name in _POWER},
    "init": (judge_init,),
    "telinit": (judge_init,),
    "systemctl": (judge_systemctl,),
    "kill": (judge_kill,),
    "pkill": (judge_kill,),
    "killall": (judge_kill,),
    "skill": (judge_kill,),
    **{name: (judge_admin,) for name in _ADMIN},
}
"""Rules about the machine, by program name."""
