"""Showing a proposed edit as a unified diff, split into hunks, and applying only some hunks.

    hunks = split_hunks(old, new)                  # what edit.proposed shows, hunk by hunk
    diff = unified_diff(old, new, "src/app.py")    # the same hunks as one text
    patch = unified_diff(old, new, "src/app.py", git=True)  # the same, for `git apply`
    text = apply_hunks(old, new, accepted=[0, 2])  # the person accepted hunks 0 and 2

One `difflib.SequenceMatcher` (autojunk off) defines the hunks for all three, so the indices
the person picks are the ones they saw. Accepting every hunk gives `new` exactly, none gives
`old`. Lines keep their own terminators, so CRLF files and a missing final newline survive.
Run the tests: .venv/bin/python -m pytest tests/agent/test_edits.py -q
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from difflib import SequenceMatcher

from agent_server.agent.edits.apply import EditError

_NO_EOL = "\\ No newline at end of file\n"


@dataclass(frozen=True)
class Hunk:
    index: int  # what a partially_accepted outcome names
    header: str  # the @@ line, without its newline
    diff: str  # the hunk as unified-diff text, header included
    old_start: int  # 1-based, as in the header
    old_count: int
    new_start: int
    new_count: int


def _split(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def _range(start: int, stop: int) -> tuple[int, int, str]:
    """Unified-diff range (difflib's convention: an empty range names the line before it)."""
    count = stop - start
    first = start + 1 if count else start
    return first, count, str(first) if count == 1 else f"{first},{count}"


def _line(prefix: str, line: str) -> str:
    return prefix + line if line.endswith("\n") else prefix + line + "\n" + _NO_EOL


def _groups(a: list[str], b: list[str], context: int):
    return list(SequenceMatcher(None, a, b, autojunk=False).get_grouped_opcodes(context))


def split_hunks(old: str, new: str, context: int = 3) -> list[Hunk]:
    a, b = _split(old), _split(new)
    if a == b:
        return []
    hunks = []
    for index, group in enumerate(_groups(a, b, context)):
        o1, o2 = group[0][1], group[-1][2]
        n1, n2 = group[0][3], group[-1][4]
        os_, oc, orange = _range(o1, o2)
        ns, nc, nrange = _range(n1, n2)
        header = f"@@ -{orange} +{nrange} @@"
        body = [header + "\n"]
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                body += [_line(" ", x) for x in a[i1:i2]]
                continue
            body += [_line("-", x) for x in a[i1:i2]]
            body += [_line("+", x) for x in b[j1:j2]]
        hunks.append(Hunk(index, header, "".join(body), os_, oc, ns, nc))
    return hunks


def unified_diff(
    old: str, new: str, path: str = "file", context: int = 3, *, git: bool = False
) -> str:
    """The whole proposal as unified-diff text ('' when nothing changes). An empty `old` is
    shown as a new file (`--- /dev/null`). `git=True`: the form `git apply` takes, a
    `diff --git a/path b/path` line first and a/ b/ names on both sides (an empty `old` is
    then an existing empty file)."""
    hunks = split_hunks(old, new, context)
    if not hunks:
        return ""
    if git:
        head = f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n"
    elif old:
        head = f"--- a/{path}\n+++ b/{path}\n"
    else:
        head = f"--- /dev/null\n+++ b/{path}\n"
    return head + "".join(h.diff for h in hunks)


def apply_hunks(old: str, new: str, accepted: Iterable[int], context: int = 3) -> str:
    """`old` with only the accepted hunks of old->new applied (indices from split_hunks)."""
    a, b = _split(old), _split(new)
    groups = _groups(a, b, context) if a != b else []
    chosen = set(accepted)
    bad = sorted(i for i in chosen if not 0 <= i < len(groups))
    if bad:
        raise EditError(f"Hunk indices {bad} do not exist; this proposal has {len(groups)} hunks.")
    out: list[str] = []
    pos = 0  # next line of `old` not yet copied
    for index, group in enumerate(groups):
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                continue
            out += a[pos:i1]
            out += b[j1:j2] if index in chosen else a[i1:i2]
            pos = i2
    out += a[pos:]
    return "".join(out)
