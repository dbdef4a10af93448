"""The follow-up rules of lsp/followups.py, and the settle option of lsp/config.py.

Pure functions, the `FollowUps` scheduler and the `OutcomeTracker` (lsp/outcomes.py: which
decision starts which follow-up) on an in-memory document (tens of milliseconds of settle
time); the end-to-end cases are in test_outcome_labels.py.
Run: .venv/bin/python -m pytest tests/lsp/test_followups.py -q
"""

from __future__ import annotations

import asyncio

import pytest

from lsp.config import settle_option
from lsp.followups import (
    MAX_DIFF_CHARS,
    CompletionFollowUp,
    EditFollowUp,
    FollowUps,
    WrittenCompletion,
    WrittenEdit,
    classify_completion,
    classify_edit,
    classify_written,
    span_now,
)
from lsp.host import OutcomeRecord
from lsp.outcomes import OutcomeTracker

DOC = "def add(a, b):\n    return a + b\n\nprint(add(1, 2))\n"
START = DOC.index("a + b")
END = START + len("a + b")


@pytest.mark.parametrize(
    ("now", "span"),
    [
        (DOC, "a + b"),
        ("# adds\n" + DOC, "a + b"),  # typed before
        (DOC + "print(add(3, 4))\n", "a + b"),  # typed after
        (DOC.replace("return a + b", "return a + b  # sum"), "a + b"),  # right after it
        (DOC.replace("    return a + b", "    return (a + b)"), "a + b"),  # around it
        (DOC.replace("a + b", "a + b + c"), "a + b"),  # continued: not edited
        ("# x\n" + DOC.replace("print", "echo"), "a + b"),  # before and after it
        (DOC.replace("a + b", ""), ""),  # undone
        (DOC.replace("    return a + b\n", ""), ""),  # its line deleted
        (DOC.replace("a + b", "a * b"), "a * b"),  # changed inside
        (DOC.replace("a + b", "a+b"), "a+b"),  # changed inside
        (DOC.replace("a + b", "b - a"), "b - a"),  # rewritten
        ("# x\n" + DOC.replace("a + b", "sum((a, b))"), "sum((a, b))"),  # and typed before
    ],
)
def test_span_follows_the_completion(now: str, span: str):
    assert span_now(DOC, START, END, now) == span


def test_span_of_a_huge_change_is_unknown():
    # Both edges in a changed middle too long to diff: nothing is reported, not a guess.
    now = "x" * (MAX_DIFF_CHARS + 10) + "a * b" + "y" * (MAX_DIFF_CHARS + 10)
    assert span_now(DOC, START, END, now) is None
    assert classify_completion(CompletionFollowUp("s", "u", DOC, START, END), now) is None


def test_completion_verdicts():
    f = CompletionFollowUp("s", "file:///a.py", DOC, START, END)
    assert classify_completion(f, DOC + "\n") == ("persisted", None)
    assert classify_completion(f, DOC.replace("a + b", "")) == ("reverted", None)
    assert classify_completion(f, None) == ("reverted", None)  # the file is gone
    assert classify_completion(f, DOC.replace("a + b", "a*b")) == ("edited_after_accept", "a*b")


def test_edit_verdicts_follow_the_extension():
    f = EditFollowUp("s", "file:///a.py", before="old\n", accepted="new\n")
    assert classify_edit(f, "new\n") == ("persisted", None)
    assert classify_edit(f, "old\n") == ("reverted", None)
    assert classify_edit(f, None) == ("reverted", None)
    assert classify_edit(f, "new\nmore\n") == ("edited_after_accept", "new\nmore\n")
    created = EditFollowUp("s", "file:///b.py", before=None, accepted="new\n")
    assert classify_edit(created, None) == ("reverted", None)
    assert classify_edit(created, "") == ("edited_after_accept", "")


class Doc:
    """One document the follow-ups read, and the outcomes they write."""

    def __init__(self, text: str) -> None:
        self.text: str | None = text
        self.written: list[tuple[str, str, str | None]] = []

    def read(self, uri: str) -> str | None:
        return self.text

    async def write(self, sid: str, kind: str, final_text: str | None = None) -> None:
        self.written.append((sid, kind, final_text))


async def test_scheduler_one_follow_up_each_and_rejections_cancel():
    doc = Doc("v1\n")
    follow = FollowUps(doc.read, doc.write, settle_s=0.05)
    follow.track(EditFollowUp("a", "u", "v0\n", "v1\n"))
    follow.track(EditFollowUp("a", "u", "v0\n", "v1\n"))  # accepted twice: followed up once
    follow.track(EditFollowUp("b", "u", "v0\n", "v1\n"))
    follow.cancel(["b"])  # rejected before it settled
    follow.cancel(["c"])
    follow.track(EditFollowUp("c", "u", "v0\n", "v1\n"))  # rejected before the accept stored
    await asyncio.sleep(0.2)
    assert doc.written == [("a", "persisted", None)]


async def test_a_later_accepted_edit_of_the_file_keeps_the_earlier_one():
    doc = Doc("v2\n")  # the agent edited the file twice; the person took both
    follow = FollowUps(doc.read, doc.write, settle_s=0.05)
    follow.track(EditFollowUp("first", "u", "v0\n", "v1\n"))
    follow.track(EditFollowUp("second", "u", "v1\n", "v2\n"))
    await asyncio.sleep(0.2)
    assert sorted(doc.written) == [("first", "persisted", None), ("second", "persisted", None)]


async def test_shutdown_drops_what_still_waits():
    doc = Doc("v1\n")
    follow = FollowUps(doc.read, doc.write, settle_s=30)
    follow.track(EditFollowUp("a", "u", "v0\n", "v1\n"))
    await asyncio.wait_for(follow.close(), 1)
    assert doc.written == []


# ---- `written`: what the person wrote where a suggestion was not taken ------------------

STUB = "def add(a, b):\n    return \n\nprint(add(1, 2))\n"
AT = STUB.index("return ") + len("return ")  # the cursor a completion was offered at


def typed(text: str, doc: str = STUB, at: int = AT) -> str:
    return doc[:at] + text + doc[at:]


@pytest.mark.parametrize(
    ("now", "written"),
    [
        (STUB, ""),  # nothing typed: staying quiet was right
        (typed("max(a, b)"), "max(a, b)"),  # typed at the place
        (typed("a\n    # and more"), "a\n    # and more"),  # more than a line
        (typed("\n    x = 1"), "\n    x = 1"),  # a new line from the end of the line
        ("# adds\n" + STUB + "print(3)\n", ""),  # typed elsewhere only
        ("# adds\n" + typed("a - b"), "a - b"),  # elsewhere and at the place
        (STUB.replace("def add(a, b):\n", ""), ""),  # deleted before it, nothing typed
        (typed("a - b").replace("def add(a, b):\n", ""), "a - b"),  # deleted before it, typed
        (STUB.replace("    return \n", ""), ""),  # its line deleted
    ],
)
def test_written_is_what_stands_at_the_place(now: str, written: str):
    assert span_now(STUB, AT, AT, now, written=True) == written
    f = WrittenCompletion("s", "u", STUB, AT)
    assert classify_written(f, now) == ("written", written)


def test_written_after_a_partial_accept_starts_at_the_place():
    # "a + b" offered, "a " taken (the editor inserted it), then "* b" typed.
    assert span_now(STUB, AT, AT, typed("a * b"), written=True) == "a * b"
    # What the taken prefix alone still says of the accepted span: untouched.
    after_accept = typed("a ")
    assert span_now(after_accept, AT, AT + 2, typed("a * b")) == "a "


def test_written_of_a_place_that_cannot_be_followed_is_nothing():
    f = WrittenCompletion("s", "u", STUB, AT)
    assert classify_written(f, None) is None  # the document closed or gone
    huge = "x" * (MAX_DIFF_CHARS + 10) + "a * b" + "y" * (MAX_DIFF_CHARS + 10)
    assert classify_written(f, huge) is None  # changed too much to diff: not a guess


def test_written_edit_is_the_text_now_when_the_person_changed_it():
    f = WrittenEdit("s", "u", before="old\n", agent=["agent\n"])
    assert classify_written(f, "mine\n") == ("written", "mine\n")
    assert classify_written(f, "old\n") is None  # nothing written
    assert classify_written(f, "agent\n") is None  # the agent's text, not the person's
    assert classify_written(f, None) is None  # gone
    created = WrittenEdit("s", "u", before=None, agent=["new\n"])
    assert classify_written(created, "") is None  # an empty file: nothing written
    assert classify_written(created, "mine\n") == ("written", "mine\n")


async def test_only_so_many_places_are_followed_at_once():
    doc = Doc(typed("x"))
    follow = FollowUps(doc.read, doc.write, settle_s=0.05)
    follow.max_written = 2
    for sid in ("oldest", "older", "newest"):  # superseded one after another
        follow.track(WrittenCompletion(sid, "u", STUB, AT))
    await asyncio.sleep(0.2)
    assert sorted(doc.written) == [("newest", "written", "x"), ("older", "written", "x")]


class Recorded:
    """The OutcomeTracker's store: (suggestion id, kind, reason, final_text) as written."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, str, str | None, str | None]] = []

    async def record(self, o: OutcomeRecord) -> None:
        self.rows.append((o.suggestion_id, o.kind, o.reason, o.final_text))

    def of(self, sid: str) -> list[tuple[str, str | None, str | None]]:
        return [(kind, reason, text) for s, kind, reason, text in self.rows if s == sid]


def tracker(docs: dict[str, str | None], settle_s: float = 0.05):
    """An OutcomeTracker on the documents `docs` (uri -> text; missing or None: gone)."""
    store = Recorded()
    return OutcomeTracker(store.record, docs.get, settle_s), store


async def reject(t: OutcomeTracker, sid: str) -> None:
    """What apprentice.reject does (lsp/features/commands.py)."""
    written = t.rejecting([sid])
    await t.write(sid, "rejected", reason="dismissed")
    for item in written:
        t.follow.track(item)


async def test_a_rejected_completion_is_followed_by_what_was_typed_at_it():
    docs: dict[str, str | None] = {"u": STUB}
    t, store = tracker(docs)
    t.offered("u", "inline", ["s"], text="a + b", offset=AT, doc=STUB)
    await reject(t, "s")
    await reject(t, "s")  # twice: one `written` all the same
    docs["u"] = "# adds\n" + typed("sum((a, b))")
    await asyncio.sleep(0.3)
    assert store.of("s") == [("rejected", "dismissed", None), ("rejected", "dismissed", None),
                             ("written", None, "sum((a, b))")]  # fmt: skip


async def test_a_newer_completion_does_not_cancel_the_older_ones_written():
    docs: dict[str, str | None] = {"u": STUB}
    t, store = tracker(docs)
    t.offered("u", "inline", ["first"], text="a + b", offset=AT, doc=STUB)
    docs["u"] = typed("m")  # the person types on; the editor asks again
    t.offered("u", "inline", ["second"], text="in(a, b)", offset=AT + 1, doc=typed("m"))
    await reject(t, "second")
    docs["u"] = typed("max(a, b)")
    await asyncio.sleep(0.3)
    assert store.of("first") == [("rejected", "superseded", None), ("written", None, "max(a, b)")]
    assert store.of("second") == [("rejected", "dismissed", None), ("written", None, "ax(a, b)")]


async def test_nothing_typed_is_written_empty_and_a_lost_place_says_nothing():
    docs: dict[str, str | None] = {"quiet": STUB, "closed": STUB, "gone": STUB}
    t, store = tracker(docs)
    for uri in docs:
        t.offered(uri, "inline", [uri], text="a + b", offset=AT, doc=STUB)
    await reject(t, "quiet")
    t.closed("closed")  # rejected (closed): the place is gone with the buffer
    await reject(t, "gone")
    docs["gone"] = None  # ...as it is when the document is gone by the time it settles
    await asyncio.sleep(0.3)
    assert store.of("quiet") == [("rejected", "dismissed", None), ("written", None, "")]
    assert store.of("closed") == [("rejected", "closed", None)]
    assert store.of("gone") == [("rejected", "dismissed", None)]


async def test_a_partial_accept_is_followed_up_both_ways():
    docs: dict[str, str | None] = {"u": typed("a ")}  # "a " of "a + b" taken and inserted
    t, store = tracker(docs)
    t.offered("u", "inline", ["s"], text="a + b", offset=AT, doc=STUB)
    follow_ups = t.accepting(["s"], 2)
    await t.write("s", "partially_accepted", accepted_length=2)
    for item in follow_ups:
        t.follow.track(item)
    docs["u"] = typed("a * b")
    await asyncio.sleep(0.3)
    first, *follow = store.of("s")
    assert first == ("partially_accepted", None, None)
    assert sorted(follow) == [("persisted", None, None), ("written", None, "a * b")]


async def test_shutdown_drops_written_follow_ups_not_guessed():
    docs: dict[str, str | None] = {"u": STUB}
    t, store = tracker(docs)
    t.offered("u", "inline", ["waiting"], text="a + b", offset=AT, doc=STUB)
    await reject(t, "waiting")
    t.offered("u", "inline", ["storing"], text="a + b", offset=AT, doc=STUB)
    t.superseded("u", "inline")  # its rejection is being stored as the server shuts down
    docs["u"] = typed("a - b")
    await asyncio.wait_for(t.close(), 1)
    await asyncio.sleep(0.3)
    assert [(sid, kind) for sid, kind, _, _ in store.rows] == [
        ("waiting", "rejected"), ("storing", "rejected")]  # fmt: skip


async def test_rejected_agent_edits_are_followed_by_the_persons_text():
    docs: dict[str, str | None] = {"a": "fixed by hand\n", "kept": "agent\n", "own": "mine\n"}
    t, store = tracker(docs)
    # A code action offered (not applied) and rejected; the person wrote their own fix.
    action = EditFollowUp("action", "a", "buggy\n", "fixed by the agent\n")
    t.offered("a", "action", ["action"], follow={"action": action})
    await reject(t, "action")
    # Chat edits applied (their accepts followed up), then rejected by the person: one
    # still holds the agent's text (nothing the person wrote), one the person's own.
    for sid in ("kept", "own"):
        t.follow.track(EditFollowUp(sid, sid, "old\n", "agent\n"))
        await reject(t, sid)
    await asyncio.sleep(0.3)
    assert store.of("action") == [("rejected", "dismissed", None),
                                  ("written", None, "fixed by hand\n")]  # fmt: skip
    assert store.of("kept") == [("rejected", "dismissed", None)]
    assert store.of("own") == [("rejected", "dismissed", None), ("written", None, "mine\n")]


@pytest.mark.parametrize(
    ("options", "settle", "warned"),
    [
        (None, 30.0, False),
        ({}, 30.0, False),
        ({"outcomeSettleSeconds": 0.25}, 0.25, False),
        ({"outcomeSettleSeconds": 5}, 5.0, False),
        ({"outcomeSettleSeconds": 0}, 30.0, True),
        ({"outcomeSettleSeconds": -1}, 30.0, True),
        ({"outcomeSettleSeconds": "10"}, 30.0, True),
        ({"outcomeSettleSeconds": True}, 30.0, True),
        ({"outcomeSettleSeconds": float("nan")}, 30.0, True),
        ({"outcomeSettleSeconds": 10**9}, 30.0, True),
    ],
)
def test_settle_option(options: object, settle: float, warned: bool):
    value, problem = settle_option(options, 30.0)
    assert value == settle and (problem is not None) == warned
    if warned:
        assert "outcomeSettleSeconds" in str(problem)
