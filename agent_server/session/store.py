"""`Store`: the session layer's async face on the feedback database.

Each method runs one short transaction of `feedback.queries` functions in a worker thread,
so the event loop never waits on the database; outcomes are group-committed, many editors'
in one transaction that also reads their suggestions and checks whose they are
(batches.py). The agent's trajectory `Event`s are stored whole in `session_events.payload`
(kind mapped onto the table's coarser kinds), which is what `load_events` rebuilds a
session from. Nothing to run; tests/api/ exercise it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from agent_server.agent.events import Event
from agent_server.models.base import Completion, Sampling
from agent_server.session.batches import Batched
from feedback.db import transaction
from feedback.models import AgentSession, Suggestion
from feedback.queries import sessions as q_sessions
from feedback.queries import suggestions as q_suggestions
from feedback.queries.outcomes_batch import BatchStored, record_outcomes
from feedback.queries.suggestions import UnknownSuggestion
from feedback.vocab import adapter_version

T = TypeVar("T")

# The loop's event kinds -> (session_events.kind, role).
_KINDS: dict[str, tuple[str, str | None]] = {
    "run_started": ("status", None),
    "assistant": ("message", "assistant"),
    "tool_call": ("tool_call", "assistant"),
    "format_error": ("error", None),
    "edit_proposed": ("edit", None),
    "edit_decision": ("edit", "user"),
    "command_approval": ("tool_call", "user"),
    "observation": ("tool_result", "tool"),
    "summary": ("summary", None),
    "run_finished": ("status", None),
}


@dataclasses.dataclass(frozen=True)
class SessionRow:
    id: str
    mode: str
    title: str
    status: str
    created_at: dt.datetime
    last_seq: int
    user_id: int | None = None  # whose session; None: the shared token's

    @classmethod
    def of(cls, row: AgentSession) -> SessionRow:
        return cls(row.id, row.mode, row.title or "", row.status, row.created_at, row.last_seq,
                   row.user_id)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class SuggestionInfo:
    session_id: str | None
    kind: str  # "completion" | "edit" | ...
    adapter_version: int | None  # None: the base model served it
    user_id: int | None = None  # whose it is; None: the shared token's


# Decides, given what is stored of its suggestion, whether an outcome may be written: None,
# or the exception its writer gets instead (another person's suggestion, another session's).
Admit = Callable[[SuggestionInfo], BaseException | None]


@dataclasses.dataclass(frozen=True)
class StoredOutcome:
    id: int
    duplicate: bool  # the client_event_id was stored before this call
    suggestion: SuggestionInfo  # what is stored of its suggestion


class Store:
    def __init__(self, factory: sessionmaker[Session]) -> None:
        self._factory = factory
        self.outcomes = Batched(factory, _record_outcomes)

    async def _run(self, fn: Callable[[Session], T]) -> T:
        def work() -> T:
            with transaction(self._factory) as db:
                return fn(db)

        return await asyncio.to_thread(work)

    async def create_session(
        self, *, mode: str, title: str, workspace: str, client: str, owner: str,
        user_id: int | None = None,
    ) -> SessionRow:  # fmt: skip
        def fn(db: Session) -> SessionRow:
            row = q_sessions.create_session(
                db, mode=mode, title=title or None, workspace_root=workspace or None,
                client_name=client[:64] or None, owner=owner, user_id=user_id,
            )  # fmt: skip
            return SessionRow.of(row)

        return await self._run(fn)

    async def get_session(self, session_id: str) -> SessionRow | None:
        def fn(db: Session) -> SessionRow | None:
            row = q_sessions.get_session(db, session_id=session_id)
            return SessionRow.of(row) if row else None

        return await self._run(fn)

    async def set_session(self, session_id: str, **fields: Any) -> None:
        await self._run(lambda db: q_sessions.update_session(db, session_id=session_id, **fields))

    async def append_event(self, session_id: str, event: Event) -> int:
        """Store one trajectory event; returns the database's seq for it."""
        kind, role = _KINDS.get(event.kind, ("status", None))
        # Not event.to_dict(): asdict deep-copies every token id of every completion, which
        # was the server's top cost under load; the JSON column serializes `data` as it is.
        payload = {"kind": event.kind, "step": event.step, "data": event.data,
                   "seq": event.seq, "ts": event.ts}  # fmt: skip
        tokens = _token_count(event)

        def fn(db: Session) -> int:
            row = q_sessions.append_event(
                db, session_id=session_id, kind=kind, role=role, payload=payload,
                token_count=tokens,
            )  # fmt: skip
            return row.seq

        return await self._run(fn)

    async def load_events(self, session_id: str) -> list[Event]:
        """The session's trajectory, oldest first (rows not written by the loop skipped)."""

        def fn(db: Session) -> list[dict[str, Any]]:
            rows = q_sessions.list_events(db, session_id=session_id)
            return [r.payload for r in rows]

        payloads = await self._run(fn)
        return [Event.from_dict(p) for p in payloads if {"kind", "step", "data"} <= p.keys()]

    async def record_suggestion(
        self,
        *,
        suggestion_id: str,
        kind: str,
        completion: Completion,
        prompt: list[dict[str, Any]],
        proposed: str,
        session_id: str | None,
        file_path: str | None,
        sampling: Sampling | None,
        latency_s: float | None = None,
        user_id: int | None = None,
    ) -> None:
        """Stored for `user_id`, or (None) for the user whose session it belongs to."""

        def fn(db: Session) -> None:
            owner = user_id
            if owner is None and session_id is not None:
                owner = db.scalar(select(AgentSession.user_id).where(AgentSession.id == session_id))
            q_suggestions.record_suggestion(
                db,
                suggestion_id=suggestion_id,
                kind=kind,
                model=completion.model,
                adapter_version=adapter_version(completion.adapter),
                prompt_messages=prompt,
                prompt_token_ids=completion.prompt_token_ids,
                completion_text=completion.text,
                completion_token_ids=list(completion.token_ids),
                completion_logprobs=list(completion.logprobs),
                finish_reason=completion.finish_reason,
                sampling=dataclasses.asdict(sampling) if sampling else None,
                proposed=proposed,
                session_id=session_id,
                file_path=file_path,
                latency_s=latency_s,
                user_id=owner,
            )

        await self._run(fn)

    async def record_outcome(self, *, admit: Admit | None = None, **fields: Any) -> StoredOutcome:
        """Idempotent on client_event_id (see feedback.queries.suggestions.record_outcome),
        committed when it returns; written with whatever other outcomes are waiting, in one
        transaction (batches.py). `admit(suggestion)` may refuse it first, in that
        transaction, by returning the exception to raise (whose suggestion it is, which
        session). UnknownSuggestion / OutcomeConflict as record_outcome raises them.

        `duplicate` is informational: two connections racing on one new id may both see
        False, but only one row is ever stored.
        """
        return await self.outcomes.call((fields, admit))


def _record_outcomes(
    db: Session, items: Sequence[tuple[dict[str, Any], Admit | None]]
) -> list[StoredOutcome | BaseException]:
    """A batch of outcomes: their suggestions read in one query, each admitted or refused,
    the admitted written together (feedback/queries/outcomes_batch.py)."""
    infos = _suggestion_infos(db, [fields["suggestion_id"] for fields, _ in items])
    results: dict[int, StoredOutcome | BaseException] = {}  # by index in items
    admitted: dict[int, SuggestionInfo] = {}
    for i, ((fields, admit), info) in enumerate(zip(items, infos, strict=True)):
        if info is None:
            results[i] = UnknownSuggestion(fields["suggestion_id"])
        elif admit is not None and (refusal := admit(info)) is not None:
            results[i] = refusal
        else:
            admitted[i] = info
    known = {items[i][0]["suggestion_id"] for i in admitted}
    stored = record_outcomes(db, [items[i][0] for i in admitted], known=known)
    for (i, info), row in zip(admitted.items(), stored, strict=True):
        ok = isinstance(row, BatchStored)
        results[i] = StoredOutcome(row.id, row.duplicate, info) if ok else row
    return [results[i] for i in range(len(items))]


def _suggestion_infos(db: Session, ids: Sequence[str]) -> list[SuggestionInfo | None]:
    """What outcomes need to know of their suggestions, for a batch of them: these columns
    only (the whole row would decode its prompt and token ids too)."""
    query = select(Suggestion.id, Suggestion.session_id, Suggestion.kind,
                   Suggestion.adapter_version, Suggestion.user_id)  # fmt: skip
    found = {
        row.id: SuggestionInfo(row.session_id, row.kind, row.adapter_version, row.user_id)
        for row in db.connection().execute(query.where(Suggestion.id.in_(set(ids))))
    }
    return [found.get(i) for i in ids]


def _token_count(event: Event) -> int | None:
    completion = event.data.get("completion")
    if isinstance(completion, dict):
        usage = completion.get("usage") or {}
        return usage.get("completion_tokens")
    return None
