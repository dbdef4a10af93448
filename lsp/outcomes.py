"""`OutcomeTracker`: turns what the editor does with a suggestion into `outcomes` rows.

Inline completions (per document, the newest one is "pending"):
  returned to the editor            -> shown
  `apprentice.accept` (item command) -> accepted, or partially_accepted with acceptedLength
  `apprentice.reject`               -> rejected (reason: dismissed, or the client's)
  a newer request for the document  -> rejected (superseded), unless accepted first
  the document closed               -> rejected (closed)
Code actions (the edits one resolve returned, per document):
  resolve returned the edit                 -> shown
  the action's command ran after the client applied the edit, or the document's text
  became the proposed text (didChange)      -> accepted
  a newer resolve or the document closed    -> rejected (superseded / closed)
Chat edits sent with workspace/applyEdit are recorded where they are applied (lsp/editors.py:
accepted, or rejected with an `[editor] ` reason when the editor did not apply them);
`apprentice.reject` of one afterwards is the person's rejection.
Accepted ones (and accepted or partially accepted completions) are followed up once the
accept is stored: persisted / reverted / edited_after_accept after the settle time
(lsp/followups.py); a rejection cancels the follow-up.
Ones not taken are followed up with `written` (what the person wrote at their place instead)
once the rejection is stored: a completion rejected, superseded or partially accepted; a
code action rejected or superseded; a chat edit the person rejected while its accept's
follow-up still waited. Not a rejection for a closed document (its place is gone), nor a
chat edit the editor failed to apply (nobody saw it). A newer suggestion supersedes an
older one but never cancels its follow-up.

State changes happen synchronously when a message arrives, before any await, so messages
are judged in the order the editor sent them. Event ids are derived from the suggestion and
the kind (`lsp:<id>:<kind>`): a command the client sends twice, or an accept seen both as
a command and as a didChange, stores one row. Tests: tests/lsp/test_server.py.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from lsp.followups import (
    CompletionFollowUp,
    EditFollowUp,
    FollowUp,
    FollowUps,
    Read,
    WrittenCompletion,
    WrittenEdit,
)
from lsp.host import OutcomeRecord

log = logging.getLogger(__name__)
Record = Callable[[OutcomeRecord], Awaitable[None]]


@dataclass
class Pending:
    ids: list[str]
    kind: str  # "inline" | "action"
    uri: str = ""
    text: str = ""  # inline: the completion offered...
    offset: int = 0  # ...at this index of the document...
    doc: str | None = None  # ...as it was then (kept until decided: a `written` follow-up's)
    expected: dict[str, str] = field(default_factory=dict)  # action: uri -> text if applied
    follow: dict[str, EditFollowUp] = field(default_factory=dict)  # action: id -> its file
    done: bool = False  # accepted or rejected already


def event_id(suggestion_id: str, kind: str) -> str:
    return f"lsp:{suggestion_id}:{kind}"


class OutcomeTracker:
    def __init__(
        self, record: Record, read: Read, settle_s: float, read_open: Read | None = None
    ) -> None:
        self._record = record
        self.follow = FollowUps(read, self.write, settle_s, read_open)
        self.pending: dict[tuple[str, str], Pending] = {}  # (uri, kind) -> newest
        self.by_id: dict[str, Pending] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    # ---- writes ------------------------------------------------------------------------

    async def write(self, suggestion_id: str, kind: str, **fields: object) -> None:
        await self._record(
            OutcomeRecord(suggestion_id, kind, event_id(suggestion_id, kind), **fields)  # type: ignore[arg-type]
        )

    def _background(
        self, suggestion_id: str, kind: str, *then: FollowUp | None, **fields: object
    ) -> None:
        """Record without holding up the message that caused it (superseded, closed...);
        `then` is followed up once the row is stored (a follow-up must come after it)."""

        async def run() -> None:
            try:
                await self.write(suggestion_id, kind, **fields)
            except Exception:  # a failed log write must not take the editor's request down
                log.exception("could not record %s for %s", kind, suggestion_id)
                return
            for item in then:
                if item is not None:
                    self.follow.track(item)

        task = asyncio.ensure_future(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        """Shutdown: drop the follow-ups still waiting, wait for the writes under way."""
        await self.follow.close()
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def _written(self, p: Pending, sid: str) -> list[FollowUp]:
        """The `written` follow-up of `sid` (offered in `p`, not decided yet), if any."""
        if p.kind == "inline":
            return [WrittenCompletion(sid, p.uri, p.doc, p.offset)] if p.doc is not None else []
        f = p.follow.get(sid)
        return [WrittenEdit(sid, f.uri, f.before, [f.accepted])] if f is not None else []

    def _decided(self, p: Pending) -> None:
        p.done, p.doc = True, None  # the snapshot is no longer needed: let it go

    def _reject(self, p: Pending, reason: str) -> None:
        if not p.done:
            for sid in p.ids:  # a closed document: the place to follow is gone
                then = self._written(p, sid) if reason != "closed" else []
                self._background(sid, "rejected", *then, reason=reason)
            self._decided(p)

    # ---- events ------------------------------------------------------------------------

    def offered(self, uri: str, kind: str, ids: list[str], **extra: object) -> Pending:
        """A new suggestion for `uri` is about to be shown; the previous one is superseded."""
        self.superseded(uri, kind)
        p = Pending(list(ids), kind, uri, **extra)  # type: ignore[arg-type]
        self.pending[(uri, kind)] = p
        for sid in ids:
            self.by_id[sid] = p
        return p

    def superseded(self, uri: str, kind: str) -> None:
        old = self.pending.pop((uri, kind), None)
        if old is not None:
            self._reject(old, "superseded")

    def closed(self, uri: str) -> None:
        for kind in ("inline", "action"):
            old = self.pending.pop((uri, kind), None)
            if old is not None:
                self._reject(old, "closed")

    def changed(self, uri: str, text: str) -> None:
        """The document's text now; a pending code action whose edit it holds is accepted."""
        p = self.pending.get((uri, "action"))
        if p is not None and not p.done and p.expected.get(uri) == text:
            self._decided(p)
            for sid in p.ids:
                self._background(sid, "accepted", p.follow.get(sid),
                                 reason="applied in the editor")  # fmt: skip

    def mark_done(self, ids: list[str]) -> None:
        """Synchronously, as the accept/reject message arrives: nothing supersedes it now."""
        for sid in ids:
            p = self.by_id.get(sid)
            if p is not None:
                self._decided(p)

    def accepting(self, ids: list[str], accepted_length: int | None) -> list[FollowUp]:
        """As the accept arrives: done, and what to follow up once it is stored. A completion's
        span is found where it was offered, in the document as it is now (the client runs
        the item's command after inserting it). A partial accept is followed up with
        `written` too: what stands at the place (the taken prefix and what was typed)."""
        found: list[FollowUp] = []
        for sid in ids:
            p = self.by_id.get(sid)
            if p is not None and not p.done and p.kind == "inline" and (
                    accepted_length is not None and accepted_length < len(p.text)):  # fmt: skip
                found += self._written(p, sid)
        self.mark_done(ids)
        for sid in ids:
            p = self.by_id.get(sid)
            if p is not None and p.kind == "action" and sid in p.follow:
                found.append(p.follow[sid])
            elif p is not None and p.kind == "inline":
                taken = p.text[: accepted_length if accepted_length is not None else None]
                now, end = self.follow.read(p.uri), p.offset + len(taken)
                if taken and now is not None and now[p.offset : end] == taken:
                    found.append(CompletionFollowUp(sid, p.uri, now, p.offset, end))
                else:  # not where it was offered: nothing to follow
                    log.info("%s: accepted text not found at its offset", sid)
        return found

    def rejecting(self, ids: list[str]) -> list[FollowUp]:
        """The person's rejection: done, and no follow-up of an earlier accept any more.
        Returns the `written` follow-ups to track once the rejection is stored: of what was
        still offered, and of an agent edit whose accept was still being followed up."""
        found: list[FollowUp] = []
        for sid in ids:
            p = self.by_id.get(sid)
            if p is not None and not p.done:
                found += self._written(p, sid)
        self.mark_done(ids)
        for f in self.follow.cancel(ids):
            if isinstance(f, EditFollowUp):  # applied, then rejected: the agent's texts
                found.append(WrittenEdit(f.suggestion_id, f.uri, f.before,
                                         [f.accepted, *f.later]))  # fmt: skip
        return found

    def offered_length(self, suggestion_id: str) -> int | None:
        p = self.by_id.get(suggestion_id)
        return len(p.text) if p is not None and p.kind == "inline" else None
