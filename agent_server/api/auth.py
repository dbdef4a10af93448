"""Tokens and origins: who may talk to the agent server.

- The user token guards everything but `GET /healthz`. It is `APPRENTICE_TOKEN` when set,
  else the content of `$APPRENTICE_HOME/token`, made on first start (mode 0600). The admin
  token works the same way (`APPRENTICE_ADMIN_TOKEN`, `$APPRENTICE_HOME/admin_token`).
- HTTP: `Authorization: Bearer <token>`. WebSocket: the same header on the handshake, or a
  `token` query parameter for clients that cannot set headers (browsers). Tokens are compared
  in constant time. Query tokens would land in access logs, so `RedactTokenFilter` hides them.
- A browser `Origin` on the WebSocket must match `allowed_origins` (fnmatch patterns); no
  Origin at all means a non-browser client (editor, CLI), which is allowed.
"""

from __future__ import annotations

import fnmatch
import hmac
import logging
import os
import re
import secrets
from dataclasses import dataclass
from pathlib import Path

from starlette.requests import HTTPConnection

from ground.settings import Settings


def load_or_create_token(path: Path) -> str:
    """Read the token at `path`, or make one there readable by the owner only."""
    try:
        token = path.read_text().strip()
        if token:
            return token
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    token = secrets.token_urlsafe(32)
    # Write to a private temp file, then rename: the token is never world-readable, and a
    # second process starting at the same moment keeps whichever token landed first.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    try:
        os.link(tmp, path)  # fails if another process made it meanwhile
    except FileExistsError:
        token = path.read_text().strip()
    finally:
        tmp.unlink(missing_ok=True)
    return token


@dataclass(frozen=True)
class AuthConfig:
    """The secrets and origin rules the app checks requests against."""

    token: str
    admin_token: str
    allowed_origins: tuple[str, ...]

    def __post_init__(self) -> None:
        if len(self.token) < 16 or len(self.admin_token) < 16:
            raise ValueError(
                "tokens must be at least 16 characters: set APPRENTICE_TOKEN / "
                "APPRENTICE_ADMIN_TOKEN to a longer secret, or unset them to have one made"
            )

    @classmethod
    def from_settings(cls, settings: Settings) -> AuthConfig:
        token = settings.token.get_secret_value()
        admin = settings.admin_token.get_secret_value()
        return cls(
            token=token or load_or_create_token(settings.token_file),
            admin_token=admin or load_or_create_token(settings.admin_token_file),
            allowed_origins=tuple(settings.allowed_origins),
        )

    def check_token(self, presented: str | None, *, admin: bool = False) -> bool:
        """Constant-time comparison; the admin token also passes user checks."""
        if not presented:
            return False
        given = presented.encode()
        ok_admin = hmac.compare_digest(given, self.admin_token.encode())
        if admin:
            return ok_admin
        return hmac.compare_digest(given, self.token.encode()) or ok_admin

    def origin_allowed(self, origin: str | None) -> bool:
        if origin is None:
            return True  # not a browser
        return any(fnmatch.fnmatchcase(origin, pattern) for pattern in self.allowed_origins)


def bearer_token(conn: HTTPConnection) -> str | None:
    header = conn.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return None


def websocket_token(conn: HTTPConnection) -> str | None:
    return bearer_token(conn) or conn.query_params.get("token") or None


class RedactTokenFilter(logging.Filter):
    """Hide `token=...` query parameters in uvicorn's access log lines."""

    _pattern = re.compile(r"([?&]token=)[^&\s\"]+")

    def filter(self, record: logging.LogRecord) -> bool:
        if record.args and isinstance(record.args, tuple):
            record.args = tuple(
                self._pattern.sub(r"\1***", a) if isinstance(a, str) else a for a in record.args
            )
        return True


def install_access_log_filter() -> None:
    """Add RedactTokenFilter to uvicorn's access logger, once per process."""
    logger = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, RedactTokenFilter) for f in logger.filters):
        logger.addFilter(RedactTokenFilter())
