"""Prints one session's suggestions with their outcome rows as JSON, for the extension's tests.

    python -m tests.vscode.dump_outcomes --database-url URL --session SESSION_ID

Output: {"session_id": ..., "suggestions": [{"id", "kind", "file_path", "proposed",
"outcomes": [{"kind", "reason", "accepted_part", "accepted_length", "final_text",
"client_event_id"}, ...]}, ...]} with suggestions in creation order and outcomes in the
order they were stored. vscode-extension/test/integration/session.test.ts reads it to check
what the extension's outcomes became in the database.
"""

from __future__ import annotations

import argparse
import json
import sys

from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload

from feedback.db import make_engine
from feedback.models import Suggestion


def dump(database_url: str, session_id: str) -> dict:
    engine = make_engine(database_url)
    try:
        with Session(engine) as db:
            rows = db.scalars(
                select(Suggestion)
                .where(Suggestion.session_id == session_id)
                .options(selectinload(Suggestion.outcomes))
                .order_by(Suggestion.created_at, Suggestion.id)
            ).all()
            suggestions = [
                {
                    "id": s.id,
                    "kind": s.kind,
                    "file_path": s.file_path,
                    "proposed": s.proposed,
                    "outcomes": [
                        {
                            "kind": o.kind,
                            "reason": o.reason,
                            "accepted_part": o.accepted_part,
                            "accepted_length": o.accepted_length,
                            "final_text": o.final_text,
                            "client_event_id": o.client_event_id,
                        }
                        for o in s.outcomes
                    ],
                }
                for s in rows
            ]
    finally:
        engine.dispose()
    return {"session_id": session_id, "suggestions": suggestions}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", required=True, help="SQLAlchemy URL of the feedback DB")
    parser.add_argument("--session", required=True, help="the agent session's id")
    args = parser.parse_args(argv)
    json.dump(dump(args.database_url, args.session), sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
