"""Prints suggestions with their outcome rows (and a session's events) as JSON, for the
extension's tests.

    python -m tests.vscode.dump_outcomes --database-url URL --session SESSION_ID
    python -m tests.vscode.dump_outcomes --database-url URL --suggestion ID [--suggestion ID2]
    python -m tests.vscode.dump_outcomes --database-url URL --completions

Output: {"session_id": ... (null without --session), "suggestions": [{"id", "session_id",
"kind", "file_path", "proposed", "model", "adapter_version", "completion_token_ids",
"completion_logprobs", "finish_reason", "outcomes": [{"kind", "reason", "accepted_part",
"accepted_length", "final_text", "client_event_id"}, ...]}, ...], "events": [{"seq", "kind",
"role", "loop_kind"}, ...]} (loop_kind: the agent loop's event kind, e.g. run_finished).
Suggestions are the session's plus the named ones (an inline completion need not have a
session) plus, with --completions, every inline completion; in creation order; outcomes and
events in the order they were stored; "events" is empty without --session.
vscode-extension/test/integration/{session.test.ts,realServer.real.ts} read it to check what
the extension's traffic became in the database, and the code-server e2e
(vscode-extension/test/e2e/inlineCompletion.mjs) to wait for a completion's follow-up.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from sqlalchemy import or_, select
from sqlalchemy.orm import Session, selectinload

from feedback.db import make_engine
from feedback.models import Suggestion
from feedback.queries import list_events


def dump(
    database_url: str,
    session_id: str | None,
    suggestion_ids: Sequence[str] = (),
    completions: bool = False,
) -> dict:
    if session_id is None and not suggestion_ids and not completions:
        raise ValueError("name a session, at least one suggestion, or all completions")
    engine = make_engine(database_url)
    try:
        with Session(engine) as db:
            wanted = []
            if session_id is not None:
                wanted.append(Suggestion.session_id == session_id)
            if suggestion_ids:
                wanted.append(Suggestion.id.in_(list(suggestion_ids)))
            if completions:
                wanted.append(Suggestion.kind == "completion")
            rows = db.scalars(
                select(Suggestion)
                .where(or_(*wanted))
                .options(selectinload(Suggestion.outcomes))
                .order_by(Suggestion.created_at, Suggestion.id)
            ).all()
            suggestions = [
                {
                    "id": s.id,
                    "session_id": s.session_id,
                    "kind": s.kind,
                    "file_path": s.file_path,
                    "proposed": s.proposed,
                    "model": s.model,
                    "adapter_version": s.adapter_version,
                    "completion_token_ids": s.completion_token_ids,
                    "completion_logprobs": s.completion_logprobs,
                    "finish_reason": s.finish_reason,
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
            events = []
            if session_id is not None:
                events = [
                    {
                        "seq": e.seq,
                        "kind": e.kind,
                        "role": e.role,
                        "loop_kind": e.payload.get("kind"),
                    }
                    for e in list_events(db, session_id=session_id)
                ]
    finally:
        engine.dispose()
    return {"session_id": session_id, "suggestions": suggestions, "events": events}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", required=True, help="SQLAlchemy URL of the feedback DB")
    parser.add_argument("--session", help="an agent session's id: its suggestions and events")
    parser.add_argument(
        "--suggestion", action="append", default=[], help="a suggestion's id (repeatable)"
    )
    parser.add_argument(
        "--completions", action="store_true", help="every inline completion, whatever its session"
    )
    args = parser.parse_args(argv)
    if args.session is None and not args.suggestion and not args.completions:
        parser.error("give --session, --suggestion or --completions (or several)")
    found = dump(args.database_url, args.session, args.suggestion, args.completions)
    json.dump(found, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
