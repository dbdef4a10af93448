"""Locating one SEARCH/REPLACE block in a file, strategy by strategy (apply.py drives this).

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
   Blank lines at SEARCH's ends that no file line matches are dropped first (tolerant.py).
3. elided (tried before 2 when SEARCH has such lines): lines that are just '...'
   (optionally commented) in SEARCH, and at the same places in REPLACE, stand for unchanged
   lines; each piece is located like strategy 2 and the pieces must follow in the file.
4. substring: SEARCH occurs exactly once inside the text (a partial-line edit); a SEARCH
   whose first or last line is blank is never one.
A location whose indentation no single mapping explains is not a match (a wrong place is
worse than a "did you mean" answer).

More than one equally good location raises `Ambiguous`; none raises `NoMatch`.
Run the tests: .venv/bin/python -m pytest tests/agent/test_edits*.py -q
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from difflib import SequenceMatcher

from agent_server.agent.edits.tolerant import Candidate, FileView, tolerant_candidates

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


def _exact(view: FileView, search: list[str], replace: list[str]) -> Replacement | None:
    m = len(search)
    hits = [i for i in view.by_line.get(search[0], []) if view.lines[i : i + m] == search]
    if len(hits) > 1:
        raise Ambiguous([h + 1 for h in hits])
    return Replacement(hits[0], hits[0] + m, list(replace), "exact") if hits else None


def _substring(view: FileView, search: list[str], replace: list[str]) -> Replacement | None:
    text, needle = view.text, "\n".join(search)
    if not search[0].strip() or not search[-1].strip():
        # A blank first or last line makes the needle start or end at a line break: its
        # prefix or suffix would be a whole neighbouring line, joined onto REPLACE's first or
        # last line when REPLACE lacks that blank line. Not a partial-line edit: no match.
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
