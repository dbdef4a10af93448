"""Many outcomes in one transaction: what a group-commit writer calls (session/batches.py).

    results = record_outcomes(db, [dict(suggestion_id=..., kind=..., client_event_id=...), ...])
    # one per item, in order: BatchStored(id, duplicate) or the exception record_outcome
    # would raise for it alone (UnknownSuggestion, OutcomeConflict)

The same semantics as `suggestions.record_outcome` for each item, in three statements for the
whole batch instead of three per item: which suggestions exist (one IN query), one
multi-row INSERT ... ON CONFLICT (client_event_id) DO NOTHING RETURNING, and one SELECT of
the rows the insert skipped (stored earlier: a duplicate when suggestion and kind match, a
conflict when not). An item repeated within the batch is stored once; its later copies are
duplicates. Tested in tests/feedback/test_outcomes_batch.py against the one-at-a-time path.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from feedback.models import Outcome, Suggestion
from feedback.queries.suggestions import OutcomeConflict, UnknownSuggestion, conflict

FIELDS = ("suggestion_id", "kind", "client_event_id", "accepted_part", "accepted_length",
          "reason", "final_text", "client_time", "user_id")  # fmt: skip


@dataclass(frozen=True)
class BatchStored:
    id: int
    duplicate: bool  # the client_event_id was stored before this item


def record_outcomes(
    db: Session, items: Sequence[dict[str, Any]], *, known: set[str] | None = None
) -> list[BatchStored | UnknownSuggestion | OutcomeConflict]:
    """`known`: the suggestion ids the caller read in this transaction (no query for them)."""
    # Core statements on the session's connection: the ORM's per-statement bookkeeping was a
    # fifth of the ingest path's CPU (bench/ingest.py), and these rows need none of it.
    conn = db.connection()
    if known is None:
        wanted = {item["suggestion_id"] for item in items}
        known = set(conn.scalars(select(Suggestion.id).where(Suggestion.id.in_(wanted))))
    rows = [{name: item.get(name) for name in FIELDS} for item in items
            if item["suggestion_id"] in known]  # fmt: skip
    inserted: dict[str, int] = {}
    if rows:
        dialect, table = conn.dialect.name, Outcome.__table__
        stmt: Any = {"postgresql": postgresql.insert, "sqlite": sqlite.insert}.get(dialect, insert)(
            table
        )
        # server_time: the column's Python default, filled per row by the executemany.
        returned = conn.execute(
            stmt.on_conflict_do_nothing(index_elements=["client_event_id"]).returning(
                table.c.client_event_id, table.c.id
            ),
            rows,
        )
        inserted = {event_id: outcome_id for event_id, outcome_id in returned}
    skipped = {r["client_event_id"] for r in rows} - inserted.keys()
    earlier: dict[str, tuple[int, str, str]] = {}
    if skipped:
        query = select(Outcome.client_event_id, Outcome.id, Outcome.suggestion_id, Outcome.kind)
        for event_id, outcome_id, suggestion_id, kind in conn.execute(
            query.where(Outcome.client_event_id.in_(skipped))
        ):
            earlier[event_id] = (outcome_id, suggestion_id, kind)

    # The insert keeps the first row of each client_event_id (rows are in item order): that
    # item is the one stored; every later item with its id compares against it.
    results: list[BatchStored | UnknownSuggestion | OutcomeConflict] = []
    for item in items:
        event_id, suggestion_id = item["client_event_id"], item["suggestion_id"]
        if suggestion_id not in known:
            results.append(UnknownSuggestion(suggestion_id))
        elif event_id in inserted and event_id not in earlier:
            earlier[event_id] = (inserted[event_id], suggestion_id, item["kind"])
            results.append(BatchStored(inserted[event_id], duplicate=False))
        else:
            outcome_id, stored_suggestion, stored_kind = earlier[event_id]
            if stored_suggestion != suggestion_id or stored_kind != item["kind"]:
                results.append(conflict(event_id, stored_kind, stored_suggestion))
            else:
                results.append(BatchStored(outcome_id, duplicate=True))
    return results
