"""Tokens and origins: who may talk to the agent server.

- The user token guards everything but `GET /healthz`. It is `APPRENTICE_TOKEN` when set,
  else the content of `$APPRENTICE_HOME/token`, made on first start (mode 0600). The admin
  token works the same way (`APPRENTICE_ADMIN_TOKEN`, `$APPRENTICE_HOME/admin_token`), and so
  does the metrics token that Prometheus scrapes `/metrics` with (`APPRENTICE_METRICS_TOKEN`,
  `$APPRENTICE_HOME/metrics_token`; the admin token is accepted there too).
- HTTP: `Authorization: Bearer <token>`. WebSocket: the same header on the handshake, or a
  `token` query parameter for clients that cannot set headers (browsers). Tokens are compared
  in constant time. Query tokens would land in access logs, so `RedactTokenFilter` hides them.
- A browser `Origin` on the WebSocket must match `allowed_origins` (fnmatch patterns); no
  Origin at all means a non-browser client (editor, CLI), which is allowed.
- People: `apprentice users add NAME` gives each person a token of their own (stored as a
  hash, feedback/queries/users.py). `identify` turns any presented token into a `Principal`:
  the admin token, the shared user token (the single-user default, `user_id` None), or an
  active user's token; a revoked or unknown one is None.
"""

from __future__ import annotations

import fnmatch
import hmac
import logging
import re
from dataclasses import dataclass

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker
from starlette.requests import HTTPConnection

from feedback.queries.users import user_for_token
from ground.settings import Settings
from ground.tokens import load_or_create_token

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Principal:
    """Who a request comes from. `user_id` None: the shared or the admin token."""

    user_id: int | None
    name: str
    admin: bool = False

    @property
    def key(self) -> str:
        """What per-token limits count by: one person, or one shared token."""
        return f"user:{self.user_id}" if self.user_id is not None else f"token:{self.name}"


SHARED = Principal(None, "default")
ADMIN = Principal(None, "admin", admin=True)


@dataclass(frozen=True)
class AuthConfig:
    """The secrets and origin rules the app checks requests against."""

    token: str
    admin_token: str
    allowed_origins: tuple[str, ...]
    metrics_token: str = ""  # empty: only the admin token may scrape /metrics

    def __post_init__(self) -> None:
        too_short = len(self.token) < 16 or len(self.admin_token) < 16
        if too_short or 0 < len(self.metrics_token) < 16:
            raise ValueError(
                "tokens must be at least 16 characters: set APPRENTICE_TOKEN / "
                "APPRENTICE_ADMIN_TOKEN / APPRENTICE_METRICS_TOKEN to a longer secret, or "
                "unset them to have one made"
            )

    @classmethod
    def from_settings(cls, settings: Settings) -> AuthConfig:
        token = settings.token.get_secret_value()
        admin = settings.admin_token.get_secret_value()
        metrics = settings.metrics_token.get_secret_value()
        return cls(
            token=token or load_or_create_token(settings.token_file),
            admin_token=admin or load_or_create_token(settings.admin_token_file),
            allowed_origins=tuple(settings.allowed_origins),
            metrics_token=metrics or load_or_create_token(settings.metrics_token_file),
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

    def check_metrics_token(self, presented: str | None) -> bool:
        """The metrics token or the admin token (constant time; the user token never)."""
        if not presented:
            return False
        given = presented.encode()
        ok_metrics = bool(self.metrics_token) and hmac.compare_digest(
            given, self.metrics_token.encode()
        )
        return ok_metrics or hmac.compare_digest(given, self.admin_token.encode())

    def identify(self, presented: str | None, db: sessionmaker[Session]) -> Principal | None:
        """The principal a token stands for; None when it opens nothing. Blocking (one
        indexed query for a person's token): call it from a worker thread."""
        if not presented:
            return None
        if self.check_token(presented, admin=True):
            return ADMIN
        if self.check_token(presented):
            return SHARED
        try:
            with db() as session:
                user = user_for_token(session, presented)
        except SQLAlchemyError:
            log.exception("could not look a token up (is the database at head?)")
            return None
        return Principal(user.id, user.name, user.admin) if user is not None else None

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
