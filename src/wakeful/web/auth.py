"""Who may use the web console: the token, the Origin and Host checks, and the CSRF token.

Every request needs the console's token: in the `wakeful_console` cookie (set once by opening the
URL printed at start-up, `/?token=…`, which redirects to `/` so the token leaves the address bar),
or in an `Authorization: Bearer …` header (scripts). Without it: 401. The cookie is HttpOnly (no
script reads it) and SameSite=Strict (no other site's page makes the browser send it).

State-changing requests (every POST) need, on top of the token, three things a page from another
site cannot produce: an `Origin` header naming the console itself, a `Host` naming it (against DNS
rebinding), and an `X-CSRF-Token` header holding a value derived from the token that the page
carries in a `<meta>` tag. A custom header cannot be sent across origins without a CORS preflight
that the console never answers, so even a browser without SameSite support is covered. The event
stream (a GET, which same-origin browsers send without `Origin`) is refused when an `Origin` or
`Sec-Fetch-Site` says the request comes from another site. Wrong Origin or Host: 403.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from typing import Final

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

COOKIE: Final = "wakeful_console"
CSRF_HEADER: Final = "x-csrf-token"

CONTENT_SECURITY_POLICY: Final = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)
"""No inline script, nothing from elsewhere, and the console never framed by another page."""

SECURITY_HEADERS: Final = {
    "content-security-policy": CONTENT_SECURITY_POLICY,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "cache-control": "no-store",
}


def new_token() -> str:
    """A fresh console token: 32 random bytes, URL-safe."""
    return secrets.token_urlsafe(32)


@dataclass(frozen=True)
class ConsoleAuth:
    """The token and the addresses (`host:port`) the console answers on."""

    token: str
    hosts: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def for_address(cls, token: str, host: str, port: int) -> ConsoleAuth:
        """Accept the address it is bound to, and `localhost`/`127.0.0.1` for a loopback one."""
        names = {host}
        if host in ("127.0.0.1", "localhost", "::1"):
            names |= {"127.0.0.1", "localhost"}
        # An IPv6 address comes in brackets in Host and Origin: "[::1]:8787".
        shown = (f"[{name}]" if ":" in name else name for name in names)
        return cls(token, frozenset(f"{name}:{port}" for name in shown))

    def at_port(self, host: str, port: int) -> ConsoleAuth:
        """The same token, answering at `host:port` (once a server bound to port 0 knows it)."""
        return ConsoleAuth.for_address(self.token, host, port)

    @property
    def csrf_token(self) -> str:
        """What the page sends back in `X-CSRF-Token`; derived, so the token is never shown."""
        return hmac.new(self.token.encode(), b"wakeful console csrf", hashlib.sha256).hexdigest()

    def origins(self) -> Iterable[str]:
        return (f"http://{host}" for host in self.hosts)

    def has_token(self, request: Request) -> bool:
        given = request.cookies.get(COOKIE, "")
        bearer = request.headers.get("authorization", "")
        if bearer.lower().startswith("bearer "):
            given = given or bearer[7:].strip()
        return _same(given, self.token)

    def refusal(self, request: Request) -> Response | None:
        """Why this request may not go on (401 or 403), or None when it may."""
        if self.hosts and request.headers.get("host", "") not in self.hosts:
            return _refuse(403, "This console answers only at its own address (Host header).")
        if not self.has_token(request):
            return _refuse(
                401,
                "The console's token is missing or wrong: open the URL printed when the console "
                "started (it ends in /?token=…), or send `Authorization: Bearer <token>`.",
            )
        origin = request.headers.get("origin")
        if origin is not None and origin not in set(self.origins()):
            return _refuse(403, f"Requests from {origin!r} are not allowed; use the console page.")
        if request.headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
            return _refuse(403, "Requests from another site are not allowed.")
        if request.method not in ("GET", "HEAD"):  # safe methods change nothing
            if origin is None:
                return _refuse(403, "A change needs the Origin header of the console's page.")
            if not _same(request.headers.get(CSRF_HEADER, ""), self.csrf_token):
                return _refuse(403, "The CSRF token is missing or wrong; reload the page.")
        return None

    def login_refusal(self, request: Request) -> Response | None:
        """Why a login (`GET /?token=…`) may not go on: a foreign Host, or a wrong token."""
        if self.hosts and request.headers.get("host", "") not in self.hosts:
            return _refuse(403, "This console answers only at its own address (Host header).")
        if not _same(request.query_params.get("token", ""), self.token):
            return _refuse(401, "That token is wrong: copy the URL printed at start-up.")
        return None

    def login(self, request: Request, response: Response) -> bool:
        """Set the cookie when `?token=` is right; True when it was."""
        if not _same(request.query_params.get("token", ""), self.token):
            return False
        cookie: SimpleCookie = SimpleCookie()
        cookie[COOKIE] = self.token
        cookie[COOKIE]["httponly"] = True
        cookie[COOKIE]["samesite"] = "Strict"
        cookie[COOKIE]["path"] = "/"
        response.headers.append("set-cookie", cookie.output(header="").strip())
        return True


def _same(given: str, expected: str) -> bool:
    return bool(given) and hmac.compare_digest(given.encode(), expected.encode())


def _refuse(status: int, text: str) -> Response:
    return PlainTextResponse(text, status_code=status, headers=SECURITY_HEADERS)
