"""The whitespace- and indentation-tolerant strategy (match.py's strategy 2), and `FileView`.

`tolerant_candidates(view, search, replace)` finds every place where the non-blank SEARCH
lines equal consecutive non-blank file lines modulo leading/trailing whitespace, with one
indentation mapping (indent.py) explaining every matched pair. Each place becomes a
`Candidate` whose `build()` makes the region's new lines 3-way: the SEARCH->REPLACE line
diff is applied onto the file's own lines, so unchanged context keeps the file's bytes.

Blank lines at the ends of SEARCH are fitted to the file first (`_fit_ends`): those that no
file line matches (more blank lines than the file has there, a model's mis-copy) are dropped
from SEARCH before the diff, so they can never pair with a REPLACE blank line and make a
real blank line of the file disappear.
Run the tests: .venv/bin/python -m pytest tests/agent/test_edits_match.py -q
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from difflib import SequenceMatcher

from agent_server.agent.edits.indent import (
    IndentMap,
    detect_unit,
    find_indent_map,
    indent_of,
)


class FileView:
    """The file's lines plus the indexes every block of one apply shares."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.stripped = [line.strip() for line in lines]
        self.by_line: dict[str, list[int]] = {}
        self.by_stripped: dict[str, list[int]] = {}
        tabs, spaced, widths = 0, 0, []
        for i, (line, key) in enumerate(zip(lines, self.stripped, strict=True)):
            self.by_line.setdefault(line, []).append(i)
            if key:
                self.by_stripped.setdefault(key, []).append(i)
                if line[:1] == "\t":
                    tabs += 1
                elif line[:1] == " ":
                    spaced += 1
                    widths.append(len(indent_of(line)))
        self.uses_tabs = tabs > spaced
        self.unit = 4 if self.uses_tabs else detect_unit(widths)
        self._text: str | None = None

    @property
    def text(self) -> str:
        if self._text is None:
            self._text = "\n".join(self.lines)
        return self._text


@dataclass
class Candidate:
    score: int  # 3 whitespace, 2 indent
    start: int
    end: int
    build: Callable[[], list[str]]  # the region's new lines

    @property
    def strategy(self) -> str:
        return "whitespace" if self.score == 3 else "indent"


def _lead_blank(lines: list[str]) -> int:
    n = 0
    while n < len(lines) and not lines[n].strip():
        n += 1
    return n


def _blank_run(view: FileView, f: int, step: int) -> int:
    """How many blank file lines follow one another from line `f` on, going by `step`."""
    n = 0
    while 0 <= f < len(view.lines) and not view.stripped[f]:
        n, f = n + 1, f + step
    return n


def _fit_lead(search: list[str], replace: list[str], real: int) -> tuple[list[str], list[str]]:
    """Fit SEARCH's leading blank lines to the `real` blank lines the file has there.

    Blank lines beyond `real` match no line of the file: they are dropped from SEARCH
    (outermost first) BEFORE SEARCH and REPLACE are compared, so one of them cannot pair with
    a blank line of REPLACE while a real blank line of the file pairs with nothing and is
    deleted. REPLACE loses only the leading blank lines it has beyond the file's real ones,
    at most as many as SEARCH lost: a blank line the model put into both blocks was never in
    the file and is not added; one only in SEARCH takes nothing from REPLACE. Then the blank
    lines both blocks start with are context and are stripped from both (never touched)."""
    have, want = _lead_blank(search), _lead_blank(replace)
    spurious = max(0, have - real)
    also = min(spurious, max(0, want - real))
    search, replace = search[spurious:], replace[also:]
    common = min(have - spurious, want - also)
    return search[common:], replace[common:]


def _fit_ends(
    view: FileView, search: list[str], replace: list[str], anchors: list[int]
) -> tuple[list[str], list[str]]:
    """`_fit_lead` at both ends of the blocks, for the place `anchors` (first and last
    non-blank lines matched) in the file."""
    search, replace = _fit_lead(search, replace, _blank_run(view, anchors[0] - 1, -1))
    s, r = _fit_lead(search[::-1], replace[::-1], _blank_run(view, anchors[-1] + 1, 1))
    return s[::-1], r[::-1]


def tolerant_candidates(view: FileView, search: list[str], replace: list[str]) -> list[Candidate]:
    """Every location matching `search` modulo whitespace (strategy 2), with its score."""
    nb = [k for k, line in enumerate(search) if line.strip()]
    if not nb:
        return []
    keys = [search[k].strip() for k in nb]
    n, out = len(view.lines), []
    for first in view.by_stripped.get(keys[0], []):
        anchors, f = [first], first
        for key in keys[1:]:
            f += 1
            while f < n and not view.stripped[f]:
                f += 1
            if f >= n or view.stripped[f] != key:
                break
            anchors.append(f)
        else:
            pairs = [
                (indent_of(search[k]), indent_of(view.lines[a]))
                for k, a in zip(nb, anchors, strict=True)
            ]
            scored = find_indent_map(pairs, view.unit, view.uses_tabs, search + replace)
            if scored is not None:
                # Only blank lines are dropped: the non-blank ones keep their anchors.
                s, r = _fit_ends(view, search, replace, anchors)
                kept = [k for k, line in enumerate(s) if line.strip()]
                out.append(_candidate(view, s, r, kept, anchors, *scored))
    return out


def _candidate(
    view: FileView,
    search: list[str],
    replace: list[str],
    nb: list[int],
    anchors: list[int],
    score: int,
    imap: IndentMap,
) -> Candidate:
    lines = view.lines
    amap: list[int | None] = [None] * len(search)
    known = list(zip(nb, anchors, strict=True))
    for k, a in known:
        amap[k] = a
    # Pair blank SEARCH lines with blank file lines in the same gap, in order.
    for (k0, a0), (k1, a1) in zip(known, known[1:], strict=False):
        for k, a in zip(range(k0 + 1, k1), range(a0 + 1, a1), strict=False):
            amap[k] = a
    f = anchors[0] - 1  # leading blanks left in SEARCH: the person deletes blank lines above
    for k in reversed(range(nb[0])):
        if f < 0 or view.stripped[f]:
            break
        amap[k], f = f, f - 1
    f = anchors[-1] + 1
    for k in range(nb[-1] + 1, len(search)):
        if f >= len(lines) or view.stripped[f]:
            break
        amap[k], f = f, f + 1
    mapped = [a for a in amap if a is not None]
    start, end = min(mapped), max(mapped) + 1
    strip_trailing = any(
        search[k] != search[k].rstrip() and lines[a] == lines[a].rstrip() for k, a in known
    )

    def render(line: str) -> str:
        if not line:
            return line  # an empty line stays empty whatever the indent offset
        ws = indent_of(line)
        body = line[len(ws) :]
        out = imap.render(ws) + body
        return out.rstrip() if strip_trailing else out

    def build() -> list[str]:
        out: list[str] = []
        fc = start
        ops = SequenceMatcher(None, search, replace, autojunk=False).get_opcodes()
        for tag, i1, i2, j1, j2 in ops:
            first = True
            for k in range(i1, i2):
                a = amap[k]
                if a is None:
                    continue
                if tag == "equal":
                    out.extend(lines[fc : a + 1])  # the file's own bytes, blanks between kept
                elif first:
                    out.extend(lines[fc:a])  # blank lines before a removed region stay
                    first = False
                fc = a + 1
            if tag != "equal":
                out.extend(render(line) for line in replace[j1:j2])
        out.extend(lines[fc:end])
        return out

    return Candidate(score, start, end, build)
