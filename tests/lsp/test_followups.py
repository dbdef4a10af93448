"""The follow-up rules of lsp/followups.py, and the settle option of lsp/config.py.

Pure functions and the `FollowUps` scheduler on an in-memory document (tens of
milliseconds of settle time); the end-to-end cases are in test_outcome_labels.py.
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
    classify_completion,
    classify_edit,
    span_now,
)

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
