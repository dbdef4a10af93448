"""Suggestions and their outcomes, and the learner's read of both.

    s = record_suggestion(db, kind="edit", model="dev", adapter_version=None, ...)
    record_outcome(db, suggestion_id=s.id, kind="accepted", client_event_id="evt-17")

`record_suggestion` refuses a row without the exact prompt and completion token ids
(`MissingTokenIds`): they are what the learner trains on. `record_outcome` is idempotent
on `client_event_id`: the same event written twice (a client retry, or two connections at
once) stores one row, and both calls get that row.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session, selectinload

from feedback.models import Outcome, Suggestion


class UnknownSuggestion(LookupError):
    """No suggestion with that id."""


class OutcomeConflict(ValueError):
    """A client_event_id was reused for a different suggestion or outcome kind."""


class MissingTokenIds(ValueError):
    """A suggestion without its prompt or completion token ids, or with a logprob count that
    differs from its completion ids: the learner could not train on it, so it is not stored."""


def check_token_ids(
    prompt_token_ids: list[int] | None,
    completion_token_ids: list[int] | None,
    completion_logprobs: list[float] | None,
) -> None:
    """MissingTokenIds unless both id lists are non-empty and one logprob per completion id."""
    if not prompt_token_ids:
        raise MissingTokenIds(
            "prompt_token_ids are missing: pass the ids the backend fed the model "
            "(Completion.prompt_token_ids); the learner never re-tokenizes a prompt"
        )
    if not completion_token_ids:
        raise MissingTokenIds(
            "completion_token_ids are missing: pass the sampled ids (Completion.token_ids)"
        )
    if len(completion_token_ids) != len(completion_logprobs or []):
        raise MissingTokenIds(
            f"{len(completion_token_ids)} completion token ids but "
            f"{len(completion_logprobs or [])} logprobs: pass one logprob per sampled token"
        )


def record_suggestion(
    db: Session,
    *,
    kind: str,
    model: str,
    adapter_version: int | None,
    prompt_messages: list[Any],
    completion_text: str,
    completion_token_ids: list[int],
    completion_logprobs: list[float],
    proposed: str,
    prompt_token_ids: list[int] | None,
    session_id: str | None = None,
    finish_reason: str | None = None,
    sampling: dict[str, Any] | None = None,
    file_path: str | None = None,
    latency_s: float | None = None,
    suggestion_id: str | None = None,
    user_id: int | None = None,
) -> Suggestion:
    """Store one model output before the client sees it.

    Token ids are required: MissingTokenIds (a ValueError) when the prompt or completion ids
    are missing or empty, or the logprobs are not one per completion id.
    """
    check_token_ids(prompt_token_ids, completion_token_ids, completion_logprobs)
    row = Suggestion(
        kind=kind,
        model=model,
        adapter_version=adapter_version,
        session_id=session_id,
        user_id=user_id,
        prompt_messages=prompt_messages,
        prompt_token_ids=prompt_token_ids,
        completion_text=completion_text,
        completion_token_ids=completion_token_ids,
        completion_logprobs=completion_logprobs,
        finish_reason=finish_reason,
        sampling=sampling,
        proposed=proposed,
        file_path=file_path,
        latency_s=latency_s,
    )
    if suggestion_id is not None:
        row.id = suggestion_id
    db.add(row)
    db.flush()
    return row


def get_suggestion(db: Session, *, suggestion_id: str) -> Suggestion | None:
    return db.get(Suggestion, suggestion_id)


def record_outcome(
    db: Session,
    *,
    suggestion_id: str,
    kind: str,
    client_event_id: str,
    accepted_part: list[Any] | None = None,
    accepted_length: int | None = None,
    reason: str | None = None,
    final_text: str | None = None,
    client_time: dt.datetime | None = None,
    user_id: int | None = None,
) -> Outcome:
    """Store what happened to a suggestion, once per `client_event_id`; return the stored row.

    INSERT ... ON CONFLICT (client_event_id) DO NOTHING, then SELECT: on PostgreSQL a
    concurrent insert of the same id makes ours wait for it to commit, then skip; the
    SELECT (a new snapshot under READ COMMITTED) sees the winner's row.
    """
    # Whether it exists, nothing more: loading the row would decode its prompt and token ids.
    if db.scalar(select(Suggestion.id).where(Suggestion.id == suggestion_id)) is None:
        raise UnknownSuggestion(suggestion_id)
    values = dict(
        suggestion_id=suggestion_id,
        kind=kind,
        client_event_id=client_event_id,
        accepted_part=accepted_part,
        accepted_length=accepted_length,
        reason=reason,
        final_text=final_text,
        client_time=client_time,
        user_id=user_id,
    )
    dialect, table = db.get_bind().dialect.name, Outcome.__table__
    stmt: Any
    if dialect == "postgresql":
        stmt = postgresql.insert(table)
    elif dialect == "sqlite":
        stmt = sqlite.insert(table)
    else:  # pragma: no cover - make_engine refuses other databases
        stmt = insert(table)
    # A Core insert with the values as parameters (server_time: the column's Python default):
    # `.values(**values)` on the ORM entity built and hashed a new statement on every call,
    # 2-3x the cost of the INSERT itself (bench/ingest.py).
    db.execute(stmt.on_conflict_do_nothing(index_elements=["client_event_id"]), values)
    stored = db.scalars(
        select(Outcome)
        .where(Outcome.client_event_id == client_event_id)
        .execution_options(populate_existing=True)
    ).one()
    if stored.suggestion_id != suggestion_id or stored.kind != kind:
        raise conflict(client_event_id, stored.kind, stored.suggestion_id)
    return stored


def conflict(client_event_id: str, stored_kind: str, stored_suggestion: str) -> OutcomeConflict:
    return OutcomeConflict(
        f"client_event_id {client_event_id!r} was already used for a {stored_kind!r} "
        f"outcome of suggestion {stored_suggestion}; send a new id for a new event"
    )


def outcomes_for_suggestion(db: Session, *, suggestion_id: str) -> list[Outcome]:
    """In the order they were stored."""
    return list(
        db.scalars(
            select(Outcome).where(Outcome.suggestion_id == suggestion_id).order_by(Outcome.id)
        )
    )


@dataclass(frozen=True)
class FeedbackItem:
    """A suggestion with all its outcomes (older ones included), oldest outcome first."""

    suggestion: Suggestion
    outcomes: list[Outcome]


def feedback_since(
    db: Session,
    *,
    since: dt.datetime | None = None,
    after_outcome_id: int | None = None,
    limit: int | None = None,
) -> list[FeedbackItem]:
    """Suggestions that got an outcome after a time or after an outcome id, oldest first.

    Cursor caveat for PostgreSQL: ids are handed out at INSERT, not at COMMIT, so an outcome
    with a smaller id can become visible after a larger one. A learner that pages by id
    should leave a margin (e.g. only read up to outcomes older than a few seconds).
    """
    fresh = select(Outcome.suggestion_id)
    if since is not None:
        fresh = fresh.where(Outcome.server_time > since)
    if after_outcome_id is not None:
        fresh = fresh.where(Outcome.id > after_outcome_id)
    query = (
        select(Suggestion)
        .where(Suggestion.id.in_(fresh))
        .options(selectinload(Suggestion.outcomes))
        .order_by(Suggestion.created_at, Suggestion.id)
    )
    if limit is not None:
        query = query.limit(limit)
    return [FeedbackItem(s, list(s.outcomes)) for s in db.scalars(query)]
