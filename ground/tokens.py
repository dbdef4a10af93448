"""Token files: the secret a client and the agent server share, made on first use.

    token = user_token(settings)   # APPRENTICE_TOKEN, else $APPRENTICE_HOME/token (made 0600)

The agent server checks requests against these (agent_server/api/auth.py); clients of it
on this machine (`apprentice lsp --server`, `apprentice chat`) read the same file. Nothing
to run; tests/api/test_auth.py checks the file's mode and the race of two first starts.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

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


def user_token(settings: Settings) -> str:
    """The user token: `APPRENTICE_TOKEN` when set, else the token file's (made if absent)."""
    return settings.token.get_secret_value() or load_or_create_token(settings.token_file)
