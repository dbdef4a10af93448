"""Follow-ups of accepted suggestions: `persisted`, `reverted` or `edited_after_accept`.

    follow = FollowUps(read=text_of_uri, write=tracker.write, settle_s=30.0)
    follow.track(EditFollowUp(sid, uri, before, accepted))   # after the accept is stored
    follow.cancel([sid])                                      # the person rejected it after all

The VS Code extension's rule (vscode-extension/src/core/outcomes.ts), `settle_s` after the
accept was stored, on the document's text then (the open buffer, else the disk, else gone):
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
One follow-up per suggestion; a rejection cancels it; shutdown drops those still waiting
(not guessed). Tests: tests/lsp/test_followups.py (rules), test_outcome_labels.py (e2e).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from difflib import SequenceMatcher

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


FollowUp = EditFollowUp | CompletionFollowUp
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


def _common_prefix(a: str, b: str) -> int:
    return len(os.path.commonprefix([a, b]))


def span_now(old: str, start: int, end: int, new: str) -> str | None:
    """What `old[start:end]` became in `new`: itself while none of it was deleted or replaced
    and nothing was typed inside it (typing next to it is not editing it); otherwise what
    now stands between what became of the text before it and of the text after it. None
    when the changed part is too long to diff."""
    if old == new:
        return old[start:end]
    prefix = _common_prefix(old, new)
    suffix = min(_common_prefix(old[::-1], new[::-1]), min(len(old), len(new)) - prefix)
    mid_end, delta = len(old) - suffix, len(new) - len(old)  # old[prefix:mid_end] changed
    if end <= prefix or start >= mid_end:  # in the unchanged head or tail
        return old[start:end]
    a, b = old[prefix:mid_end], new[prefix : len(new) - suffix]
    if len(a) > MAX_DIFF_CHARS or len(b) > MAX_DIFF_CHARS:
        return None
    ops = SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
    lo, hi = start - prefix, end - prefix  # the span in the middle's coordinates
    if not any((i1 < hi and lo < i2) if tag in ("replace", "delete") else
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
    def __init__(self, read: Read, write: Write, settle_s: float) -> None:
        self.read, self.write, self.settle_s = read, write, settle_s
        self._waiting: dict[str, tuple[FollowUp, asyncio.Task[None]]] = {}
        self._settling: set[asyncio.Task[None]] = set()  # past the wait: writing
        self._seen: set[str] = set()  # followed up or cancelled: never a second one

    def track(self, item: FollowUp) -> None:
        sid = item.suggestion_id
        if sid in self._seen:  # accepted twice (command and didChange), or rejected already
            return
        self._seen.add(sid)
        if isinstance(item, EditFollowUp):
            for older, _ in self._waiting.values():
                if isinstance(older, EditFollowUp) and older.uri == item.uri:
                    older.later.append(item.accepted)
        self._waiting[sid] = (item, asyncio.ensure_future(self._settle(item)))

    def cancel(self, ids: list[str]) -> None:
        """The person rejected these: what follows is not a verdict on an accepted text."""
        for sid in ids:
            self._seen.add(sid)
            entry = self._waiting.pop(sid, None)
            if entry is not None:
                entry[1].cancel()

    async def _settle(self, item: FollowUp) -> None:
        await asyncio.sleep(self.settle_s)
        self._waiting.pop(item.suggestion_id, None)
        task = asyncio.current_task()
        assert task is not None
        self._settling.add(task)  # from here on shutdown waits for it instead of dropping it
        try:
            now = self.read(item.uri)
            if isinstance(item, EditFollowUp):
                verdict: Verdict | None = classify_edit(item, now)
            else:
                verdict = await asyncio.to_thread(classify_completion, item, now)
            if verdict is None:
                log.info("%s: too much changed to follow it up", item.suggestion_id)
                return
            kind, final_text = verdict
            await self.write(item.suggestion_id, kind, final_text=final_text)
        except Exception:  # a failed follow-up must not take anything else down
            log.exception("could not follow up %s", item.suggestion_id)
        finally:
            self._settling.discard(task)

    async def close(self) -> None:
        """Drop the follow-ups still waiting (not guessed); finish those being written."""
        for _, task in self._waiting.values():
            task.cancel()
        self._waiting.clear()
        while self._settling:
            await asyncio.gather(*list(self._settling), return_exceptions=True)
