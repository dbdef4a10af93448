"""The users migration (0003) upgrades a database that holds rows from the previous head
(0002) without losing any: sessions, events, suggestions and outcomes come through with
`user_id` NULL (the shared token's), constraints still hold, and new rows can name a user.
On SQLite (batch mode copies the tables) and PostgreSQL (ALTER TABLE).

Run: .venv/bin/python -m pytest tests/feedback/test_migration_users.py -q
"""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine, pool, text
from sqlalchemy.exc import IntegrityError

from feedback.migrate import current_revision, upgrade
from tests.fixtures.databases import fresh_pg_database

T = "'2026-11-01 10:00:00+00:00'"
ROWS = [
    "INSERT INTO sessions (id, created_at, updated_at, mode, status, last_seq, meta) "
    f"VALUES ('s1', {T}, {T}, 'interactive', 'idle', 1, '{{}}')",
    "INSERT INTO session_events (session_id, seq, kind, payload, created_at) "
    f"VALUES ('s1', 1, 'message', '{{\"text\": \"hi\"}}', {T})",
    "INSERT INTO suggestions (id, session_id, kind, model, prompt_messages, completion_text, "
    "completion_token_ids, completion_logprobs, proposed, created_at) VALUES "
    f"('g1', 's1', 'completion', 'dev', '[]', 'x', '[1]', '[-0.5]', 'x', {T})",
    "INSERT INTO outcomes (suggestion_id, kind, client_event_id, server_time) "
    f"VALUES ('g1', 'accepted', 'e1', {T})",
    "INSERT INTO outcomes (suggestion_id, kind, client_event_id, server_time) "
    f"VALUES ('g1', 'persisted', 'e2', {T})",
]


def _upgrade_with_rows(url: str) -> None:
    upgrade(url, "0002")
    engine = create_engine(url, poolclass=pool.NullPool)
    try:
        with engine.begin() as conn:
            for statement in ROWS:
                conn.execute(text(statement))
        upgrade(url, "0003")
        assert current_revision(url) == "0003"
        with engine.connect() as conn:
            outcomes = conn.execute(
                text("SELECT client_event_id, kind, user_id FROM outcomes ORDER BY id")
            ).all()
            assert [tuple(r) for r in outcomes] == [
                ("e1", "accepted", None),
                ("e2", "persisted", None),
            ]
            assert conn.execute(text("SELECT id, user_id FROM suggestions")).all() == [("g1", None)]
            assert conn.execute(text("SELECT id, last_seq, user_id FROM sessions")).all() == [
                ("s1", 1, None)
            ]
            assert conn.execute(text("SELECT count(*) FROM session_events")).scalar() == 1
        with engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO users (name, token_hash, admin, learn, created_at) "
                    f"VALUES ('ada', 'h1', false, true, {T})"
                )
            )
            uid = conn.execute(text("SELECT id FROM users WHERE name = 'ada'")).scalar()
            conn.execute(text("UPDATE sessions SET user_id = :u"), {"u": uid})
        # The old constraints survived the table copy: an unknown outcome kind is refused...
        with pytest.raises(IntegrityError), engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO outcomes (suggestion_id, kind, client_event_id, server_time) "
                    f"VALUES ('g1', 'adored', 'e3', {T})"
                )
            )
        # ...and so is a second row with a client_event_id already stored.
        with pytest.raises(IntegrityError), engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO outcomes (suggestion_id, kind, client_event_id, server_time) "
                    f"VALUES ('g1', 'accepted', 'e1', {T})"
                )
            )
        with engine.connect() as conn:
            assert conn.execute(text("SELECT user_id FROM sessions")).scalar() == uid
    finally:
        engine.dispose()


def test_upgrade_keeps_rows_on_sqlite(sqlite_url: str) -> None:
    _upgrade_with_rows(sqlite_url)


@pytest.mark.postgres
def test_upgrade_keeps_rows_on_postgres() -> None:
    with fresh_pg_database() as url:
        _upgrade_with_rows(url)
