"""Browser sign-in for the admin dashboard: a signed session cookie and its CSRF token.

The admin token is typed once into the dashboard's login form and sent in a JSON body (never a
URL); the server answers with `Set-Cookie: apprentice_admin=<issued>.<nonce>.<signature>`
(HttpOnly, SameSite=Strict, Secure over https, `SESSION_S` long). The signature is an HMAC
keyed by a hash of the admin token, so a new admin token ends every session. A request signed
in by the cookie that changes state must carry the session's CSRF token in `X-CSRF-Token`
(an HMAC of the nonce; the dashboard reads it from `GET /v1/admin/session`): a page on another
site can make the browser send the cookie, but it cannot read or forge that header. Requests
with `Authorization: Bearer <admin token>` need no CSRF token (no ambient credential).
Nothing to run; tests/api/test_admin_session.py.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass

COOKIE = "apprentice_admin"
CSRF_HEADER = "X-CSRF-Token"
SESSION_S = 12 * 3600
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


@dataclass(frozen=True)
class AdminSession:
    nonce: str
    issued: int

    def expires(self) -> int:
        return self.issued + SESSION_S


def _key(admin_token: str) -> bytes:
    return hashlib.sha256(b"apprentice-admin-session\0" + admin_token.encode()).digest()


def _sign(admin_token: str, text: str) -> str:
    return hmac.new(_key(admin_token), text.encode(), hashlib.sha256).hexdigest()


def new_cookie(admin_token: str, now: float | None = None) -> tuple[str, AdminSession]:
    """A fresh cookie value and the session it stands for."""
    session = AdminSession(nonce=secrets.token_hex(16), issued=int(now or time.time()))
    body = f"{session.issued}.{session.nonce}"
    return f"{body}.{_sign(admin_token, body)}", session


def read_cookie(
    admin_token: str, value: str | None, now: float | None = None
) -> AdminSession | None:
    """The session of a valid, unexpired cookie; None for anything else."""
    if not value or len(value) > 256:
        return None
    issued, _, rest = value.partition(".")
    nonce, _, signature = rest.partition(".")
    if not (issued.isdigit() and nonce and signature):
        return None
    if not hmac.compare_digest(signature, _sign(admin_token, f"{issued}.{nonce}")):
        return None
    session = AdminSession(nonce=nonce, issued=int(issued))
    current = now or time.time()
    if not session.issued - 60 <= current < session.expires():  # a minute of clock skew
        return None
    return session


def csrf_token(admin_token: str, session: AdminSession) -> str:
    return _sign(admin_token, f"csrf.{session.nonce}")


def csrf_ok(admin_token: str, session: AdminSession, presented: str | None) -> bool:
    return bool(presented) and hmac.compare_digest(
        presented or "", csrf_token(admin_token, session)
    )
