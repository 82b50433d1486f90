"""A real Prosody XMPP server on 127.0.0.1 in a temporary directory, for the XMPP channel's tests.

Prosody is Debian's `prosody` (`scripts/test` installs it), run in the foreground with its own
configuration, data directory, pid file and log under the directory it is given, so it touches
nothing of the machine's: one virtual host "localhost" with plain-text login (this is loopback
only: `c2s_require_encryption = false`), offline storage and message archiving (XEP-0313, which
stamps XEP-0359 stanza ids), and a multi-user chat component "conference.localhost". Accounts
and rosters are written as Prosody's own data files before it starts (what `prosodyctl
register` writes), which takes no time. `stop()` and `start()` simulate a server that goes away
and comes back with its data.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

__all__ = ["DOMAIN", "MUC_DOMAIN", "ProsodyServer", "prosody_missing", "start_prosody"]

PROSODY = "/usr/bin/prosody"
INSTALL_HINT = "apt-get install prosody"
DOMAIN = "localhost"
MUC_DOMAIN = "conference.localhost"
START_TIMEOUT_S = 15.0


def prosody_missing() -> str | None:
    """Why the tests cannot start Prosody here, or None when they can."""
    if not Path(PROSODY).exists():
        return f"{PROSODY} is missing: {INSTALL_HINT}"
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _lua(text: str) -> str:
    """`text` as a Lua string literal."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _encoded(name: str) -> str:
    """A name as Prosody encodes it in data paths (%XX for anything but letters and digits)."""
    return quote(name, safe="").replace("-", "%2d").replace(".", "%2e").replace("_", "%5f")


@dataclass
class ProsodyServer:
    """A running Prosody; see the module docs."""

    root: Path
    port: int
    stanza_size_limit: int
    process: subprocess.Popen[bytes] | None = None
    passwords: dict[str, str] = field(default_factory=dict)

    @property
    def log_path(self) -> Path:
        return self.root / "prosody.log"

    def jid(self, user: str) -> str:
        return f"{user}@{DOMAIN}"

    def add_user(self, user: str, password: str, *, roster: tuple[str, ...] = ()) -> str:
        """Create an account (and its roster of mutual subscriptions), as `prosodyctl register`
        does; takes effect for logins from then on. Returns the JID."""
        host = self.root / "data" / _encoded(DOMAIN)
        (host / "accounts").mkdir(parents=True, exist_ok=True)
        (host / "accounts" / f"{_encoded(user)}.dat").write_text(
            f"return {{ [{_lua('password')}] = {_lua(password)} }};\n"
        )
        if roster:
            items = "".join(
                f"  [{_lua(jid)}] = {{ subscription = {_lua('both')}; groups = {{}} }};\n"
                for jid in roster
            )
            (host / "roster").mkdir(parents=True, exist_ok=True)
            (host / "roster" / f"{_encoded(user)}.dat").write_text(
                f"return {{\n  [false] = {{ version = 1 }};\n{items}}};\n"
            )
        self.passwords[self.jid(user)] = password
        return self.jid(user)

    def _config(self) -> str:
        root = self.root
        return f"""\
run_as_root = true
daemonize = false
pidfile = {_lua(str(root / "prosody.pid"))}
data_path = {_lua(str(root / "data"))}
log = {{ debug = {_lua(str(self.log_path))} }}
plugin_paths = {{}}
modules_enabled = {{ "roster"; "saslauth"; "disco"; "offline"; "ping"; "mam"; "posix" }}
modules_disabled = {{ "s2s" }}
interfaces = {{ "127.0.0.1" }}
c2s_ports = {{ {self.port} }}
s2s_ports = {{}}
c2s_direct_tls_ports = {{}}
legacy_ssl_ports = {{}}
c2s_require_encryption = false
allow_unencrypted_plain_auth = true
authentication = "internal_plain"
storage = "internal"
c2s_stanza_size_limit = {self.stanza_size_limit}
limits = {{ c2s = {{ rate = "100mb/s" }} }}
archive_expires_after = "1d"

VirtualHost {_lua(DOMAIN)}

Component {_lua(MUC_DOMAIN)} "muc"
  restrict_room_creation = false
  muc_room_locking = false
"""

    def start(self) -> None:
        """Start Prosody (again) and wait until it accepts connections; raises RuntimeError with
        the end of its log when it does not."""
        config = self.root / "prosody.cfg.lua"
        config.write_text(self._config())
        log = (self.root / "prosody.stdout").open("ab")
        self.process = subprocess.Popen(
            [PROSODY, "--config", str(config), "-F"],
            cwd=self.root,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.05)
        self.stop()
        tail = "\n".join(
            (self.root / name).read_text(errors="replace")[-3000:]
            for name in ("prosody.stdout", "prosody.log")
            if (self.root / name).exists()
        )
        raise RuntimeError(f"Prosody did not start on 127.0.0.1:{self.port}:\n{tail}")

    def stop(self) -> None:
        """Stop Prosody (its data stays, for `start` again)."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def start_prosody(root: Path, *, stanza_size_limit: int = 2 * 1024 * 1024) -> ProsodyServer:
    """A Prosody on a free loopback port with its files under `root`, started."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "data").mkdir(exist_ok=True)
    server = ProsodyServer(root=root, port=_free_port(), stanza_size_limit=stanza_size_limit)
    server.start()
    return server
