"""The people who use one server: each with their own token, stored only as a hash.

`token_hash` is the SHA-256 of a random 32-byte token (hex): a fast hash is enough for a
secret with 256 bits of entropy (there is nothing to brute-force), and it lets a presented
token be found by an index lookup, then compared in constant time. `revoked_at` set: the
token no longer opens anything. `learn` False: the person opted out, and the learner never
trains on their feedback. Sessions, suggestions and outcomes record the user they came
from (`user_id`; NULL: the shared `APPRENTICE_TOKEN`, or rows older than users).
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import Boolean, Integer, String, true
from sqlalchemy.orm import Mapped, mapped_column

from feedback.models.base import Base, UTCDateTime, utcnow


class User(Base):
    __tablename__ = "users"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    admin: Mapped[bool] = mapped_column(Boolean, default=False)
    learn: Mapped[bool] = mapped_column(Boolean, default=True, server_default=true())
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime(), default=utcnow)
    rotated_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime())
    revoked_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime())
