"""Follow-ups of decided suggestions: what became of a taken one, what was written instead.

    follow = FollowUps(read=text_of_uri, write=tracker.write, settle_s=30.0, read_open=buffer)
    follow.track(EditFollowUp(sid, uri, before, accepted))   # after the accept is stored
    follow.track(WrittenCompletion(sid, uri, text, offset))  # after the rejection is stored
    follow.cancel([sid])                                      # the person rejected it after all

Taken ones: the VS Code extension's rule (vscode-extension/src/core/outcomes.ts), `settle_s`
after the accept was stored, on the document's text then (the open buffer, else the disk,
else gone):
- an agent edit (chat edit applied, code action accepted): the whole text is the accepted
  text -> persisted; gone, or back to the text before the edit -> reverted; anything else
  -> edited_after_accept with final_text = the text now. Later accepted agent edits of the
  same document count as the accepted text too: the agent building on an edit keeps it.
- an inline completion: the same question asked of the completion's own span, followed
  through the changes since (`span_now`: typing elsewhere in the file, or right next to
  it, does not edit a completion): the span still holds the accepted text -> persisted;
  nothing -> reverted; else edited_after_accept with final_text = what the span holds
  now. When the changes are too long to diff, nothing is reported (the extension, too,
  reports nothing it cannot read).
Ones not taken: `written` (feedback/vocab.py WRITTEN; the rule is EditOutcome's, in
agent_server/protocol/messages.py), `settle_s` after the rejection (or a partial accept)
was stored, with final_text = what the person wrote at its place instead:
- an inline completion (`WrittenCompletion`): what stands now at the position it was offered
  at, between what became of the text before it and of the text after it in the document
  it was offered on (`span_now(..., written=True)`: typing right at the position counts,
  typing elsewhere does not); after a partial accept, the taken prefix and what was typed
  after it; "" when nothing was written there (staying quiet was right). Read from the
  open buffer only: a closed document, or one changed too much to diff, says nothing.
- an agent edit (`WrittenEdit`: a code action rejected or superseded, a chat edit the
  person rejected after it was applied): the document's text now, unless it is the text
  before the proposal (nothing written), a text the agent proposed for it (the proposal,
  or a later accepted agent edit: not the person's writing), or gone.
At most one follow-up of each kind per suggestion (a partially accepted completion gets
both); a rejection cancels an accept's follow-up, never a `written` one; shutdown drops
those still waiting, and those tracked after it (not guessed); so does the oldest of more
than `max_written` completions followed at once.
Tests: tests/lsp/test_followups.py (rules), test_outcome_labels.py (e2e).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from difflib import SequenceMatcher

from feedback.vocab import WRITTEN

log = logging.getLogger(__name__)
MAX_DIFF_CHARS = 20_000  # a changed middle longer than this is not followed (diff cost)
Read = Callable[[str], str | None]  # uri -> the document's text now, None when gone
Write = Callable[..., Awaitable[None]]  # (suggestion_id, kind, final_text=...) -> stored


@dataclass
class EditFollowUp:
    suggestion_id: str
    uri: str
    before: str | None  # None: the edit created the file
    accepted: str
    later: list[str] = field(default_factory=list)  # later accepted agent texts of this uri


@dataclass(frozen=True)
class CompletionFollowUp:
    suggestion_id: str
    uri: str
    text: str  # the document right after the accept
    start: int  # the accepted completion is text[start:end]
    end: int


@dataclass(frozen=True)
class WrittenCompletion:
    suggestion_id: str
    uri: str
    text: str  # the document the completion was offered on...
    offset: int  # ...at this index


@dataclass
class WrittenEdit:
    suggestion_id: str
    uri: str
    before: str | None  # the document before the proposal (None: the file did not exist)
    agent: list[str]  # the texts the agent proposed for it: never the person's writing


FollowUp = EditFollowUp | CompletionFollowUp | WrittenCompletion | WrittenEdit
Verdict = tuple[str, str | None]  # (outcome kind, final_text)


def classify_edit(f: EditFollowUp, now: str | None) -> Verdict:
    if now is not None and (now == f.accepted or now in f.later):
        return "persisted", None
    if now is None or now == f.before:
        return "reverted", None
    return "edited_after_accept", now


def classify_completion(f: CompletionFollowUp, now: str | None) -> Verdict | None:
    """None: the document changed too much between to tell what became of the span."""
    if now is None:
        return "reverted", None
    span = span_now(f.text, f.start, f.end, now)
    if span is None:
        return None
    if span == f.text[f.start : f.end]:
        return "persisted", None
    return ("reverted", None) if span == "" else ("edited_after_accept", span)


def classify_written(f: WrittenCompletion | WrittenEdit, now: str | None) -> Verdict | None:
    """None: nothing to say (the document gone, changed too much, or nothing the person
    wrote in an edit's place)."""
    if now is None:
        return None
    if isinstance(f, WrittenEdit):
        return None if now == (f.before or "") or now in f.agent else (WRITTEN, now)
    span = span_now(f.text, f.offset, f.offset, now, written=True)
    return None if span is None else (WRITTEN, span)


def judge(item: FollowUp, now: str | None) -> Verdict | None:
    if isinstance(item, EditFollowUp):
        return classify_edit(item, now)
    if isinstance(item, CompletionFollowUp):
        return classify_completion(item, now)
    return classify_written(item, now)


def _common_prefix(a: str, b: str) -> int:
    return len(os.path.commonprefix([a, b]))


def _edges(old: str, new: str, start: int, end: int, written: bool) -> tuple[int, int]:
    """The lengths of the unchanged head and tail around the changed middle. `written`:
    pulled back to the place old[start:end] when it lies within the change's width of it,
    so that what was typed at the place is at it (a plain common prefix sees "\\n    x"
    typed at the end of a line as "    x\\n" typed after the line's end: not at the place)."""
    shorter, back = min(len(old), len(new)), _common_prefix(old[::-1], new[::-1])
    prefix = _common_prefix(old, new)
    suffix = min(back, shorter - prefix)
    if written:
        head = min(prefix, start)
        tail = min(back, shorter - head, len(old) - end)
        change = max(len(old), len(new)) - prefix - suffix  # the longer changed middle
        if (prefix - head) + (suffix - tail) <= change:  # farther off: not at the place
            return head, tail
    return prefix, suffix


def span_now(old: str, start: int, end: int, new: str, *, written: bool = False) -> str | None:
    """What `old[start:end]` became in `new`: itself while none of it was deleted or replaced
    and nothing was typed inside it (typing next to it is not editing it); otherwise what
    now stands between what became of the text before it and of the text after it. None
    when the changed part is too long to diff.
    `written=True` (the place of a suggestion not taken, zero-width for a completion):
    always what stands between, typing right at the place included."""
    if old == new:
        return old[start:end]
    prefix, suffix = _edges(old, new, start, end, written)
    mid_end, delta = len(old) - suffix, len(new) - len(old)  # old[prefix:mid_end] changed
    if (end < prefix or start > mid_end) if written else (end <= prefix or start >= mid_end):
        return old[start:end]  # in the unchanged head or tail
    a, b = old[prefix:mid_end], new[prefix : len(new) - suffix]
    if len(a) > MAX_DIFF_CHARS or len(b) > MAX_DIFF_CHARS:
        return None
    ops = SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
    lo, hi = start - prefix, end - prefix  # the span in the middle's coordinates
    if not written and not any(
        (i1 < hi and lo < i2) if tag in ("replace", "delete") else
        (tag == "insert" and lo < i1 < hi) for tag, i1, i2, _, _ in ops):  # fmt: skip
        return old[start:end]
    if lo <= 0:
        first = start
    else:  # where the text before the span ends now (a replacement across it: the span's)
        tag, i1, i2, j1, j2 = next(op for op in ops if op[1] < lo <= op[2] and op[1] < op[2])
        first = prefix + (j1 + lo - i1 if tag == "equal" else j2 if i2 == lo else j1)
    if hi >= len(a):
        last = end + delta
    else:  # where the text after the span starts now
        tag, i1, i2, j1, j2 = next(op for op in ops if op[1] <= hi < op[2])
        last = prefix + (j1 + hi - i1 if tag == "equal" else j1 if i1 == hi else j2)
    return new[first:last] if last > first else ""


class FollowUps:
    # Completions not taken, followed at once: each holds its document as it was offered,
    # and a person typing on supersedes one after another; beyond this the oldest is dropped.
    max_written = 100

    def __init__(
        self, read: Read, write: Write, settle_s: float, read_open: Read | None = None
    ) -> None:
        """`read`: the document's text (buffer, else disk); `read_open`: the open buffer only
        (a completion's place; default `read`)."""
        self.read, self.write, self.settle_s = read, write, settle_s
        self.read_open = read_open or read
        self._waiting: dict[str, tuple[FollowUp, asyncio.Task[None]]] = {}  # by key()
        self._settling: set[asyncio.Task[None]] = set()  # past the wait: writing
        self._seen: set[str] = set()  # followed up or cancelled: never a second one
        self._closed = False

    @staticmethod
    def key(item: FollowUp) -> str:
        """An accept's follow-up is keyed by its suggestion; a `written` one apart from it."""
        sid = item.suggestion_id
        return f"{sid}:{WRITTEN}" if isinstance(item, WrittenCompletion | WrittenEdit) else sid

    def track(self, item: FollowUp) -> None:
        key = self.key(item)
        # Accepted twice (command and didChange), rejected already, or shutting down.
        if key in self._seen or self._closed:
            return
        self._seen.add(key)
        if isinstance(item, EditFollowUp):  # the agent's text: the person's for no one
            for older, _ in self._waiting.values():
                if isinstance(older, EditFollowUp) and older.uri == item.uri:
                    older.later.append(item.accepted)
                elif isinstance(older, WrittenEdit) and older.uri == item.uri:
                    older.agent.append(item.accepted)
        if isinstance(item, WrittenCompletion):
            places = [k for k, (f, _) in self._waiting.items() if isinstance(f, WrittenCompletion)]
            for oldest in places[: max(0, len(places) + 1 - self.max_written)]:
                self._waiting.pop(oldest)[1].cancel()
        self._waiting[key] = (item, asyncio.ensure_future(self._settle(key, item)))

    def cancel(self, ids: list[str]) -> list[FollowUp]:
        """The person rejected these: what follows is not a verdict on an accepted text.
        Returns the accepts' follow-ups it cancelled (a `written` one is never cancelled)."""
        cancelled = []
        for sid in ids:
            self._seen.add(sid)
            entry = self._waiting.pop(sid, None)
            if entry is not None:
                entry[1].cancel()
                cancelled.append(entry[0])
        return cancelled

    async def _settle(self, key: str, item: FollowUp) -> None:
        await asyncio.sleep(self.settle_s)
        self._waiting.pop(key, None)
        task = asyncio.current_task()
        assert task is not None
        self._settling.add(task)  # from here on shutdown waits for it instead of dropping it
        try:
            read = self.read_open if isinstance(item, WrittenCompletion) else self.read
            now = read(item.uri)
            if isinstance(item, EditFollowUp | WrittenEdit):
                verdict: Verdict | None = judge(item, now)
            else:  # a diff: off the event loop
                verdict = await asyncio.to_thread(judge, item, now)
            if verdict is None:
                log.info("%s: nothing to follow up (%s)", item.suggestion_id, type(item).__name__)
                return
            kind, final_text = verdict
            await self.write(item.suggestion_id, kind, final_text=final_text)
        except Exception:  # a failed follow-up must not take anything else down
            log.exception("could not follow up %s", item.suggestion_id)
        finally:
            self._settling.discard(task)

    async def close(self) -> None:
        """Drop the follow-ups still waiting (not guessed), and any tracked from now on (a
        rejection still being stored); finish those being written."""
        self._closed = True
        for _, task in self._waiting.values():
            task.cancel()
        self._waiting.clear()
        while self._settling:
            await asyncio.gather(*list(self._settling), return_exceptions=True)
