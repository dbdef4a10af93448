"""Writes vscode-extension/test/unit/fixtures/hunks.json from the server's real edits_diff.

    .venv/bin/python -m tests.vscode.make_hunk_fixtures

Each case holds old and new text, the hunks split_hunks makes (as edit.proposed sends them)
and, for every subset of hunk indices (all subsets up to 4 hunks, else a sample), the text
apply_hunks gives. The extension's applyHunks must reproduce each one
(vscode-extension/test/unit/hunks.test.ts). Rerun after changing edits_diff.py.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

from agent_server.agent.edits.diff import apply_hunks, split_hunks

OUT = Path(__file__).resolve().parents[2] / "vscode-extension/test/unit/fixtures/hunks.json"

lines20 = "".join(f"line {i}\n" for i in range(20))

CASES = {
    "one line changed": ("x = 1\n", "x = 2\n"),
    "two far-apart hunks": (
        lines20,
        lines20.replace("line 2\n", "LINE 2\n").replace("line 17\n", "LINE 17\n"),
    ),
    "three hunks with insertion and deletion": (
        lines20,
        "header\n" + lines20.replace("line 9\n", "").replace("line 19\n", "line 19\nline 20\n"),
    ),
    "no final newline, last line changed": ("a\nb\nc", "a\nb\nC"),
    "final newline added": ("a\nb", "a\nb\n"),
    "crlf file": ("a\r\nb\r\nc\r\n", "a\r\nB\r\nc\r\n"),
    "new file from empty": ("", "print('hi')\nprint('bye')\n"),
    "whole file deleted": ("one\ntwo\n", ""),
    "unicode line separators": ("a\u2028b\nc\x0cd\n", "a\u2028B\nc\x0cd\nz\n"),
    "lone carriage returns": ("a\rb\rc\n", "a\rX\rc\n"),
    "adjacent changes merge into one hunk": (
        lines20,
        lines20.replace("line 5\n", "5\n").replace("line 8\n", "8\n"),
    ),
    "emoji and astral text": ("s = '😀'\nt = 1\n", "s = '😃'\nt = 1\n"),
}


def subsets(n: int) -> list[list[int]]:
    idx = range(n)
    if n <= 4:
        return [list(c) for k in range(n + 1) for c in itertools.combinations(idx, k)]
    return [[], list(idx), [0], [n - 1], list(range(0, n, 2))]


def main() -> None:
    cases = []
    for name, (old, new) in CASES.items():
        hunks = split_hunks(old, new)
        applied = [{"accepted": s, "text": apply_hunks(old, new, s)} for s in subsets(len(hunks))]
        cases.append({
            "name": name,
            "old": old,
            "new": new,
            "hunks": [{"index": h.index, "header": h.header, "diff": h.diff} for h in hunks],
            "applied": applied,
        })  # fmt: skip
    OUT.write_text(
        json.dumps({"generated_by": "tests/vscode/make_hunk_fixtures.py", "cases": cases}, indent=1)
        + "\n"
    )
    print(f"wrote {len(cases)} cases to {OUT}")


if __name__ == "__main__":
    main()
