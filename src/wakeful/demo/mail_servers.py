"""Real mail servers on 127.0.0.1 in a temporary directory, for `wakeful demo email` and tests.

Dovecot is Debian's `dovecot-imapd` and `dovecot-lmtpd` (`scripts/test` installs them), started
in the foreground with its own configuration, state, logs and Maildirs under the directory it is
given, so it touches nothing of the machine's: one user, plain-text login (loopback only), the
special-use mailboxes Drafts, Sent, Archive, Trash and Junk. `deliver` puts a message into a
mailbox the way a delivery agent does (`doveadm save`), so clients IDLE-ing on it are told at
once; Dovecot's LMTP service takes mail for the user on `lmtp_port`. :class:`SmtpRelay` is an
SMTP server (aiosmtpd) that hands what it receives to that LMTP service: mail sent to it lands in
the user's INBOX.

As root, Dovecot runs its login and internal processes as its own users and the mail as the
`mail` user; as anyone else, everything runs as that user.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "DovecotServer",
    "DovecotUnavailable",
    "SmtpRelay",
    "dovecot_missing",
    "start_dovecot",
]

DOVECOT = "/usr/sbin/dovecot"
DOVEADM = "/usr/bin/doveadm"
LMTP = "/usr/lib/dovecot/lmtp"
INSTALL_HINT = "apt-get install dovecot-imapd dovecot-lmtpd"
START_TIMEOUT_S = 20.0


class DovecotUnavailable(RuntimeError):
    """Dovecot is not installed, or did not start; the message says why."""


def dovecot_missing() -> str | None:
    """Why the tests cannot start Dovecot here, or None when they can."""
    for program in (DOVECOT, DOVEADM, LMTP):
        if not Path(program).exists():
            return f"{program} is missing: {INSTALL_HINT}"
    return None


def _signal_group(pgid: int, signum: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):  # the group is gone already
        os.killpg(pgid, signum)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _accounts() -> tuple[str, str, str]:
    """(login user, internal user, mail user) Dovecot's processes run as."""
    if os.getuid() != 0:
        me = pwd.getpwuid(os.getuid()).pw_name
        return me, me, me
    names = {entry.pw_name for entry in pwd.getpwall()}
    login = "dovenull" if "dovenull" in names else "nobody"
    internal = "dovecot" if "dovecot" in names else "nobody"
    return login, internal, "mail"


def _config(root: Path, port: int, lmtp_port: int) -> str:
    login_user, internal_user, mail_user = _accounts()
    mail = pwd.getpwnam(mail_user)
    return f"""\
base_dir = {root}/run
state_dir = {root}/state
log_path = {root}/dovecot.log
info_log_path = {root}/dovecot.log
protocols = imap lmtp
listen = 127.0.0.1
auth_username_format = %Ln
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain login
default_login_user = {login_user}
default_internal_user = {internal_user}
first_valid_uid = {mail.pw_uid}
first_valid_gid = {mail.pw_gid}
mail_location = maildir:{root}/mail/%u
mail_plugins =
imap_idle_notify_interval = 1 secs
passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {root}/users
}}
userdb {{
  driver = static
  args = uid={mail.pw_uid} gid={mail.pw_gid} home={root}/home/%u
}}
service imap-login {{
  inet_listener imap {{
    address = 127.0.0.1
    port = {port}
  }}
  inet_listener imaps {{
    port = 0
  }}
}}
service lmtp {{
  inet_listener lmtp {{
    address = 127.0.0.1
    port = {lmtp_port}
  }}
}}
service anvil {{
  chroot =
}}
service imap-login {{
  chroot =
}}
namespace inbox {{
  inbox = yes
  separator = /
  mailbox Drafts {{
    special_use = \\Drafts
    auto = subscribe
  }}
  mailbox Sent {{
    special_use = \\Sent
    auto = subscribe
  }}
  mailbox Archive {{
    special_use = \\Archive
    auto = subscribe
  }}
  mailbox Trash {{
    special_use = \\Trash
    auto = subscribe
  }}
  mailbox Junk {{
    special_use = \\Junk
    auto = subscribe
  }}
}}
"""


@dataclass
class DovecotServer:
    """A running Dovecot: where it listens, who can log in, and how to put mail in it."""

    root: Path
    host: str
    port: int
    user: str
    password: str
    lmtp_port: int = 0
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def config(self) -> Path:
        return self.root / "dovecot.conf"

    def deliver(self, raw: bytes, mailbox: str = "INBOX") -> None:
        """Deliver one message (RFC 5322 bytes) into `mailbox`, as a delivery agent does."""
        subprocess.run(
            [DOVEADM, "-c", str(self.config), "save", "-u", self.user, "-m", mailbox],
            input=raw,
            check=True,
            capture_output=True,
            timeout=30,
        )

    def doveadm(self, *args: str) -> str:
        """Run a doveadm command against this server's mail (e.g. "mailbox", "create", "X")
        and return what it prints."""
        done = subprocess.run(
            [DOVEADM, "-c", str(self.config), *args],
            check=True,
            capture_output=True,
            timeout=30,
        )
        return done.stdout.decode()

    def log(self) -> str:
        """What the server has logged so far (for a failing test's message)."""
        path = self.root / "dovecot.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        """Stop the server (every IMAP connection drops); `start` brings it back with the same
        mail."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        # The whole process group: the IMAP processes serving open connections outlive the
        # master otherwise, and a stopped server must drop its clients.
        _signal_group(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        _signal_group(process.pid, signal.SIGKILL)
        if process.stderr is not None:
            process.stderr.close()

    def start(self) -> None:
        """Start (or restart) the server and wait until it accepts connections."""
        if self.process is not None and self.process.poll() is None:
            return
        self.process = subprocess.Popen(
            [DOVECOT, "-F", "-c", str(self.config)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                stderr = self.process.stderr
                err = stderr.read().decode(errors="replace") if stderr else ""
                raise DovecotUnavailable(
                    f"dovecot exited with {self.process.returncode}: {err.strip()}\n{self.log()}"
                )
            try:
                with socket.create_connection((self.host, self.port), timeout=0.5) as sock:
                    if sock.recv(64).startswith(b"* OK"):
                        return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise DovecotUnavailable(f"dovecot did not accept connections in time:\n{self.log()}")


def start_dovecot(
    root: Path, *, user: str = "secretary", password: str = "correct horse"
) -> DovecotServer:
    """Configure a Dovecot under `root` (created if needed) and start it."""
    missing = dovecot_missing()
    if missing:
        raise DovecotUnavailable(missing)
    root.mkdir(parents=True, exist_ok=True)
    _, _, mail_user = _accounts()
    for sub in ("run", "state", "mail", "home"):
        (root / sub).mkdir(exist_ok=True)
    # Dovecot refuses a base_dir path other users cannot traverse; pytest's tmp dirs are 0700.
    for path in [root, *root.parents]:
        if path == Path("/") or path.stat().st_uid != os.getuid():
            break
        path.chmod(path.stat().st_mode | 0o711)
    if os.getuid() == 0:
        mail = pwd.getpwnam(mail_user)
        for sub in ("mail", "home"):
            shutil.chown(root / sub, mail.pw_uid, mail.pw_gid)
    (root / "users").write_text(f"{user}:{{PLAIN}}{password}\n")
    port, lmtp_port = _free_port(), _free_port()
    server = DovecotServer(
        root=root, host="127.0.0.1", port=port, user=user, password=password, lmtp_port=lmtp_port
    )
    server.config.write_text(_config(root, port, lmtp_port))
    server.start()
    return server


class SmtpRelay:
    """An SMTP server on 127.0.0.1 (aiosmtpd, in a thread of its own) that relays every message
    it accepts to a Dovecot's LMTP service, as a mail system's MTA does: mail sent to it lands in
    the Dovecot user's INBOX, where IMAP IDLE reports it."""

    def __init__(self, dovecot: DovecotServer) -> None:
        from aiosmtpd.controller import Controller

        self.dovecot = dovecot
        self.port = _free_port()
        self.host = "127.0.0.1"
        self._controller = Controller(_LmtpHandler(dovecot), hostname=self.host, port=self.port)

    def start(self) -> None:
        self._controller.start()

    def stop(self) -> None:
        self._controller.stop()

    def send(self, raw: bytes, *, sender: str, recipients: list[str]) -> None:
        """Hand one message to this server over SMTP, as another mail server would (lines
        end in CRLF on the wire, whatever they end in in `raw`)."""
        import re
        import smtplib

        wire = re.sub(rb"\r?\n", b"\r\n", raw)
        with smtplib.SMTP(self.host, self.port, timeout=30) as smtp:
            smtp.sendmail(sender, recipients, wire)


class _LmtpHandler:
    def __init__(self, dovecot: DovecotServer) -> None:
        self.dovecot = dovecot

    async def handle_DATA(self, server: object, session: object, envelope: Any) -> str:
        import smtplib

        import anyio

        raw = envelope.original_content or envelope.content
        sender, recipients = envelope.mail_from, list(envelope.rcpt_tos)

        def relay() -> None:
            with smtplib.LMTP(self.dovecot.host, self.dovecot.lmtp_port, timeout=30) as lmtp:
                lmtp.sendmail(sender, recipients, raw)

        try:
            await anyio.to_thread.run_sync(relay)
        except (OSError, smtplib.SMTPException) as exc:
            return f"451 could not deliver to the mailbox: {exc}"
        return "250 Message accepted for delivery"
