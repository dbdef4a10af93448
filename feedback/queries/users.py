"""Users and their tokens: add, list, revoke, rotate, and find the user a token belongs to.

    user, token = add_user(db, "ada", admin=False)   # the token: shown once, never stored
    found = user_for_token(db, token)                 # None: unknown or revoked
    token = rotate_user(db, "ada")                    # the old token stops working

Only the SHA-256 of a token is stored (users.py says why that suffices); a lookup finds the
row by that hash and compares it again with `hmac.compare_digest`, so no answer depends on
how much of a hash matched. Names: 1-64 letters, digits, `.`, `_`, `-`.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Iterable

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from feedback.models import User, utcnow

TOKEN_PREFIX = "apu_"  # tells a person's token apart from the shared / admin tokens in a log
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


class UserError(ValueError):
    """A user command that cannot be done (unknown name, name taken, bad name)."""


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def _get(db: Session, name: str) -> User:
    user = db.scalar(select(User).where(User.name == name))
    if user is None:
        raise UserError(f"no user named {name!r} (apprentice users list shows them)")
    return user


def add_user(db: Session, name: str, *, admin: bool = False) -> tuple[User, str]:
    if not _NAME.match(name):
        raise UserError(
            f"bad user name {name!r}: 1-64 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    if db.scalar(select(User.id).where(User.name == name)) is not None:
        raise UserError(f"a user named {name!r} exists; rotate their token instead")
    token = new_token()
    user = User(name=name, token_hash=hash_token(token), admin=admin, learn=True)
    db.add(user)
    db.flush()
    return user, token


def list_users(db: Session) -> list[User]:
    return list(db.scalars(select(User).order_by(User.id)))


def revoke_user(db: Session, name: str) -> User:
    """The user's token stops working at once; their rows stay theirs."""
    user = _get(db, name)
    user.revoked_at = user.revoked_at or utcnow()
    db.flush()
    return user


def rotate_user(db: Session, name: str) -> str:
    """A new token for the user (the old one stops working); lifts a revocation."""
    user = _get(db, name)
    token = new_token()
    user.token_hash, user.rotated_at, user.revoked_at = hash_token(token), utcnow(), None
    db.flush()
    return token


def set_learning(db: Session, name: str, *, learn: bool) -> User:
    """Opt a user's feedback in to or out of training (the learner reads `learn`)."""
    user = _get(db, name)
    user.learn = learn
    db.flush()
    return user


def user_for_token(db: Session, token: str) -> User | None:
    """The active user whose token this is; None when unknown or revoked."""
    if not token.startswith(TOKEN_PREFIX):
        return None  # not a person's token: no query
    digest = hash_token(token)
    user = db.scalar(select(User).where(User.token_hash == digest))
    if user is None or user.revoked_at is not None:
        return None
    return user if hmac.compare_digest(user.token_hash, digest) else None


def excluded_user_ids(db: Session, names: Iterable[str] = ()) -> set[int]:
    """Users whose feedback the learner must not train on: opted out, or named."""
    query = select(User.id).where(or_(User.learn.is_(False), User.name.in_(list(names))))
    return set(db.scalars(query))


def user_ids(db: Session, names: Iterable[str]) -> dict[str, int]:
    """name -> id for the names that exist (admin filters by name)."""
    rows = db.execute(select(User.name, User.id).where(User.name.in_(list(names))))
    return {name: uid for name, uid in rows}
