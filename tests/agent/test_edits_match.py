"""Edit matching at the ends of a SEARCH block: blank lines that no file line matches.

A model often copies one blank line too many at the start or the end of SEARCH (and only
there: REPLACE is right). Such a block must be placed exactly, the file's real blank lines
kept, or refused with the file untouched; never applied so that a real blank line vanishes.

Run: .venv/bin/python -m pytest tests/agent/test_edits_match.py -q
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_server.agent.edits import EditError, SearchReplace, plan_edits

PY = "import os\n\n\ndef f():\n    return 1\n\n\ndef g():\n    pass\n"
FIXED = PY.replace("return 1", "return 2")


def apply(text: str, search: str, replace: str) -> str:
    return plan_edits(text, [SearchReplace(search, replace)]).text


def test_spurious_leading_blank_keeps_the_real_blank_lines() -> None:
    # Three blank lines in SEARCH, two in the file, two in REPLACE: both real ones stay.
    assert apply(PY, "\n\n\ndef f():\n    return 1\n", "\n\ndef f():\n    return 2\n") == FIXED
    # One blank line in the file, two in SEARCH; REPLACE keeps one and inserts a line.
    out = apply("h\n\n    f\n", "\n\n    f\n", "\n    new\n    f\n")
    assert out == "h\n\n    new\n    f\n"


def test_spurious_trailing_blank_keeps_the_real_blank_lines() -> None:
    assert apply(PY, "def f():\n    return 1\n\n\n\n", "def f():\n    return 2\n\n\n") == FIXED
    out = apply("def f():\n    return 1\nx = f()\n", "def f():\n    return 1\n\n", "def f():\n")
    assert out == "def f():\nx = f()\n"


def test_spurious_blank_at_the_file_start_or_end() -> None:
    assert apply("x = 1\ny = 2\n", "\nx = 1\n", "x = 3\n") == "x = 3\ny = 2\n"
    assert apply("a\nb\n", "b\n\n", "c\n") == "a\nc\n"
    # Past the last line: the blank both blocks end with and one more in SEARCH only.
    assert apply("a\nb\n", "b\n\n\n", "c\n\n") == "a\nc\n"
    assert apply("a\nb", "b\n\n", "c\n") == "a\nc"


def test_blank_lines_that_exist_are_still_deleted_or_kept_as_asked() -> None:
    assert apply("a\n\nb\n", "\nb\n", "c\n") == "a\nc\n"  # SEARCH names a real blank line
    assert apply("a\nb\n", "\nb\n", "\nc\n") == "a\nc\n"  # in both blocks: context, not added
    out = apply(PY, "\n\ndef g():\n    pass\n", "\ndef g():\n    pass\n")
    assert out == PY.replace("\n\n\ndef g", "\n\ndef g")


def test_a_blank_edge_is_never_a_partial_line_match() -> None:
    # Only a partial-line match would fit ("x = 1" ends a line); with the spurious blank
    # line it used to join the next line onto REPLACE ("y = x = 2z").
    text = "y = x = 1\nz\n"
    with pytest.raises(EditError, match="does not match"):
        apply(text, "x = 1\n\n", "x = 2\n")
    assert apply(text, "\nz\n", "w\n") == "y = x = 1\nw\n"  # whole lines: placed
    assert apply(text, "x = 1", "x = 2") == "y = x = 2\nz\n"  # a real partial-line edit


def _leading_blanks(lines: list[str]) -> int:
    n = 0
    while n < len(lines) and not lines[n].strip():
        n += 1
    return n


@settings(max_examples=400, deadline=None)
@given(
    shape=st.lists(st.tuples(st.booleans(), st.integers(0, 2)), min_size=4, max_size=16),
    data=st.data(),
)
def test_spurious_edge_blanks_are_placed_exactly_or_refused(shape, data) -> None:
    """A region of a file (distinct non-blank lines, real blank lines between), changed
    inside and given with 1-2 extra blank lines at one end of SEARCH only, where the file
    has no blank line: the result is the true after-text or an EditError, never another."""
    lines = ["" if blank else "    " * depth + f"w{k}()" for k, (blank, depth) in enumerate(shape)]
    i = data.draw(st.integers(0, len(lines) - 3))
    j = data.draw(st.integers(i + 3, len(lines)))
    region = lines[i:j]
    if not any(x.strip() for x in region):
        return
    inner = region[1:-1]
    k = data.draw(st.integers(0, len(inner)))
    inner = inner[:k] + [data.draw(st.sampled_from(["new()", "    new()"]))] + inner[k + 1 :]
    replace = [region[0], *inner, region[-1]]
    # An inserted blank line next to an edge run of blank lines cannot be told from one the
    # model copied into both blocks; the edges stay as in the file here.
    edges = _leading_blanks(replace) == _leading_blanks(region)
    if not edges or _leading_blanks(replace[::-1]) != _leading_blanks(region[::-1]):
        return
    extra = [""] * data.draw(st.integers(1, 2))
    eol = "\n" if data.draw(st.booleans()) else ""
    if data.draw(st.booleans()):
        if i > 0 and not lines[i - 1].strip():
            return  # a real blank line there: SEARCH would name it
        search = extra + region
    else:
        if j < len(lines) and not lines[j].strip():
            return
        search = region + extra
    before = "\n".join(lines) + eol
    expected = "\n".join(lines[:i] + replace + lines[j:]) + eol
    block = SearchReplace("".join(x + "\n" for x in search), "".join(x + "\n" for x in replace))
    try:
        out = plan_edits(before, [block]).text
    except EditError:
        return
    assert out == expected
