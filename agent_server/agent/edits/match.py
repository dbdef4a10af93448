"""Locating one SEARCH/REPLACE block in a file, strategy by strategy (edits.py drives this).

Each block is located in the ORIGINAL file's lines (LF-normalized, no terminators) and becomes
one or more `Replacement`s (a line range and its new lines). Strategies, in order:

1. exact: the SEARCH lines appear verbatim, line-aligned.
2. whitespace / indent: the non-blank SEARCH lines equal consecutive non-blank file lines
   once leading/trailing whitespace is ignored (blank lines on either side don't count), and
   the leading whitespace of the matched pairs is related by ONE mapping: identical under
   some tab width ("whitespace": tabs vs spaces, trailing blanks, CR, blank lines), or a
   uniform column offset or indent-unit scaling ("indent": a re-indented block). The new text
   is made 3-way: the SEARCH->REPLACE line diff is applied onto the file region, so unchanged
   context keeps the file's exact bytes and only new lines are re-indented by the mapping.
3. elided (tried before 2 when SEARCH has such lines): lines that are just '...'
   (optionally commented) in SEARCH, and at the same places in REPLACE, stand for unchanged
   lines; each piece is located like strategy 2 and the pieces must follow in the file.
4. substring: SEARCH occurs exactly once inside the text (a partial-line edit).
A location whose indentation no single mapping explains is not a match (a wrong place is
worse than a "did you mean" answer).

More than one equally good location raises `Ambiguous`; none raises `NoMatch`.
Run the tests: .venv/bin/python -m pytest tests/agent/test_edits.py -q
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from difflib import SequenceMatcher

from agent_server.agent.edits.indent import (
    IndentMap,
    detect_unit,
    find_indent_map,
    indent_of,
)

ELISION = re.compile(r"^\s*(?:#|//|/\*|--|<!--)?\s*(?:\.\.\.|…)[^\n]{0,60}?(?:\*/|-->)?\s*$")


@dataclass(frozen=True)
class Replacement:
    start: int  # first replaced line, 0-based
    end: int  # one past the last replaced line (start == end: pure insertion)
    lines: list[str]
    strategy: str


class NoMatch(Exception):
    """The block matches nowhere; `reason` (may be empty) adds why."""

    def __init__(self, reason: str = "") -> None:
        super().__init__(reason)
        self.reason = reason


class Ambiguous(Exception):
    """The block matches several places; `lines` are their 1-based first lines."""

    def __init__(self, lines: list[int]) -> None:
        super().__init__(f"matches at lines {lines}")
        self.lines = lines


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


def tolerant_candidates(view: FileView, search: list[str], replace: list[str]) -> list[Candidate]:
    """Every location matching `search` modulo whitespace (strategy 2), with its score."""
    lead = min(_lead_blank(search), _lead_blank(replace))
    search, replace = search[lead:], replace[lead:]
    tail = min(_lead_blank(search[::-1]), _lead_blank(replace[::-1]))
    search, replace = search[: len(search) - tail], replace[: len(replace) - tail]
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
                out.append(_candidate(view, search, replace, nb, anchors, *scored))
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


def _exact(view: FileView, search: list[str], replace: list[str]) -> Replacement | None:
    m = len(search)
    hits = [i for i in view.by_line.get(search[0], []) if view.lines[i : i + m] == search]
    if len(hits) > 1:
        raise Ambiguous([h + 1 for h in hits])
    return Replacement(hits[0], hits[0] + m, list(replace), "exact") if hits else None


def _substring(view: FileView, search: list[str], replace: list[str]) -> Replacement | None:
    text, needle = view.text, "\n".join(search)
    if not needle.strip():
        return None
    hits, i = [], text.find(needle)
    while i >= 0 and len(hits) < 20:
        hits.append(i)
        i = text.find(needle, i + 1)
    if len(hits) > 1:
        raise Ambiguous([text.count("\n", 0, h) + 1 for h in hits])
    if not hits:
        return None
    i, j = hits[0], hits[0] + len(needle)
    ls, le = text.count("\n", 0, i), text.count("\n", 0, j)
    prefix = view.lines[ls][: i - (text.rfind("\n", 0, i) + 1)]
    suffix = view.lines[le][j - (text.rfind("\n", 0, j) + 1) :]
    new = (prefix + "\n".join(replace) + suffix).split("\n")
    return Replacement(ls, le + 1, new, "substring")


def _best(cands: list[Candidate]) -> Candidate | None:
    if not cands:
        return None
    top = max(c.score for c in cands)
    best = [c for c in cands if c.score == top]
    if len(best) > 1:
        raise Ambiguous([c.start + 1 for c in best])
    return best[0]


def _split_elided(lines: list[str]) -> list[list[str]]:
    pieces: list[list[str]] = [[]]
    for line in lines:
        if ELISION.match(line):
            pieces.append([])
        else:
            pieces[-1].append(line)
    return pieces


def _elided(view: FileView, search: list[str], replace: list[str]) -> list[Replacement] | None:
    s_pieces, r_pieces = _split_elided(search), _split_elided(replace)
    if len(s_pieces) == 1:
        return None
    if len(s_pieces) != len(r_pieces):
        raise NoMatch(
            "SEARCH uses '...' lines to skip unchanged lines, so REPLACE must have '...' "
            "lines at the same places (the same number of them)."
        )
    # Pieces of only blank lines that stay the same anchor nothing: '...' absorbs them.
    pairs = [
        (s, r)
        for s, r in zip(s_pieces, r_pieces, strict=True)
        if (s or r) and not (s == r and not "".join(s).strip())
    ]
    if not pairs or any(not "".join(s).strip() for s, _ in pairs):
        raise NoMatch("Every part of REPLACE between '...' lines needs SEARCH lines to anchor it.")
    per_piece = [tolerant_candidates(view, s, r) for s, r in pairs]
    chains: dict[int, list[Candidate]] = {}  # last piece's start -> tightest chain ending there
    for c0 in per_piece[0]:
        chain = [c0]
        for cands in per_piece[1:]:
            nxt = [c for c in cands if c.start >= chain[-1].end]
            if not nxt:
                break
            chain.append(min(nxt, key=lambda c: c.start))
        else:
            key = chain[-1].start
            if key not in chains or chains[key][0].start < c0.start:
                chains[key] = chain
    if len(chains) > 1:
        raise Ambiguous(sorted(ch[0].start + 1 for ch in chains.values()))
    if not chains:
        return None
    return [Replacement(c.start, c.end, c.build(), "elided") for c in chains.popitem()[1]]


def locate(view: FileView, search: list[str], replace: list[str]) -> list[Replacement]:
    """The replacements for one non-empty SEARCH block, by the first strategy that matches."""
    exact = _exact(view, search, replace)
    if exact is not None:
        return [exact]
    elision: NoMatch | Ambiguous | None = None
    if any(ELISION.match(line) for line in search):
        # Once the exact match failed, a '...' line is more likely an elision than a literal
        # line (read literally it can match a stub body `...` somewhere else).
        try:
            elided = _elided(view, search, replace)
            if elided is not None:
                return elided
        except (NoMatch, Ambiguous) as err:
            elision = err
    best = _best(tolerant_candidates(view, search, replace))
    if best is not None:
        return [Replacement(best.start, best.end, best.build(), best.strategy)]
    sub = _substring(view, search, replace)
    if sub is not None:
        return [sub]
    raise elision or NoMatch()


def closest_region(view: FileView, search: list[str]) -> tuple[int, int, float] | None:
    """(start, end, similarity) of the file window most like `search`, for the hint.

    Windows are ranked cheaply by how many SEARCH lines they contain verbatim (modulo
    whitespace); only the best few (or, when no line matches anywhere, a sample) get the
    expensive character-level difflib ratio."""
    lines, m = view.lines, max(len(search), 1)
    if not lines:
        return None
    want = [s.strip() for s in search]
    wanted = {w for w in want if w}
    last = max(1, len(lines) - m + 1)
    hits = [0]
    for key in view.stripped:
        hits.append(hits[-1] + (key in wanted))
    score = [hits[min(i + m, len(lines))] - hits[i] for i in range(last)]
    if max(score) > 0:
        starts = sorted(range(last), key=lambda i: -score[i])[:12]
    else:
        starts = list(range(0, last, max(1, last // 200)))
    matcher = SequenceMatcher(None, autojunk=False)
    matcher.set_seq2("\n".join(want))
    best = (0, min(m, len(lines)), -1.0)
    for i in starts:
        matcher.set_seq1("\n".join(view.stripped[i : i + m]))
        if matcher.real_quick_ratio() <= best[2] or matcher.quick_ratio() <= best[2]:
            continue
        ratio = matcher.ratio()
        if ratio > best[2]:
            best = (i, min(i + m, len(lines)), ratio)
    return best if best[2] > 0 else None
