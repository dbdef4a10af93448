"""Perturbations for bench/edit_apply.py: how a model mis-copies a SEARCH/REPLACE block.

Each function takes a `Case` (the file before, the SEARCH and REPLACE lines, the expected
file after) and returns a perturbed Case, or None when the kind does not apply to this hunk
(e.g. no indentation to convert). The expected text changes only where the perturbation
changes the file itself (CRLF). `ALLOWED` says what the comparison may ignore per kind; the
kinds not in it (the spurious blank line at either end of SEARCH included) must give the real
after-text byte for byte.
Not a test; run the bench: .venv/bin/python bench/edit_apply.py --help
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, replace
from difflib import SequenceMatcher

from agent_server.agent.edits.indent import indent_of
from agent_server.agent.edits.match import ELISION
from agent_server.agent.edits.tolerant import FileView


@dataclass(frozen=True)
class Case:
    before: str  # the whole file the edit is applied to
    search: list[str]  # SEARCH lines (no terminators)
    replace: list[str]
    expected: str  # the whole file after a correct application
    block_newline: str = "\n"  # the model's line ends in the block
    at: int | None = None  # SEARCH's first line in `before.split("\n")`, when known


def _indent_convert(lines: list[str], to_tabs: bool, unit: int) -> list[str]:
    out = []
    for line in lines:
        ws = indent_of(line)
        body = line[len(ws) :]
        if to_tabs:
            cols = len(ws.expandtabs(unit))
            out.append("\t" * (cols // unit) + " " * (cols % unit) + body)
        else:
            out.append(ws.replace("\t", " " * unit) + body)
    return out


def tabs(case: Case, rng: random.Random) -> Case | None:
    view = FileView(case.before.replace("\r\n", "\n").split("\n"))
    to_tabs = not view.uses_tabs
    s = _indent_convert(case.search, to_tabs, view.unit)
    r = _indent_convert(case.replace, to_tabs, view.unit)
    return replace(case, search=s, replace=r) if s != case.search else None


def trailing_ws(case: Case, rng: random.Random) -> Case | None:
    s = []
    for line in case.search:
        if line != line.rstrip():
            s.append(line.rstrip() if rng.random() < 0.7 else line)
        elif rng.random() < 0.5:
            s.append(line + rng.choice([" ", "  ", "\t", "    "]))
        else:
            s.append(line)
    return replace(case, search=s) if s != case.search else None


def reindent(case: Case, rng: random.Random) -> Case | None:
    """Shift SEARCH and REPLACE by one uniform amount, as when a model quotes a nested block
    from its own indentation level (dedent to column 0) or nests it once more."""
    both = [x for x in case.search + case.replace if x.strip()]
    if not both:
        return None
    common = min(len(indent_of(x)) for x in both)
    prefixes = {indent_of(x)[:common] for x in both}
    if common and len(prefixes) == 1:
        cut = common

        def shift(x: str) -> str:
            return x[cut:] if x.strip() else x.strip(" \t")
    else:
        pad = "\t" if all(x.startswith("\t") for x in both) else "    "

        def shift(x: str) -> str:
            return pad + x if x.strip() else x

    s, r = [shift(x) for x in case.search], [shift(x) for x in case.replace]
    return replace(case, search=s, replace=r) if s != case.search else None


def _context_positions(search: list[str], replace: list[str]) -> list[tuple[int, int]]:
    """(i in SEARCH, j in REPLACE) of lines the edit leaves unchanged."""
    ops = SequenceMatcher(None, search, replace, autojunk=False).get_opcodes()
    return [
        (i1 + k, j1 + k) for tag, i1, i2, j1, _ in ops if tag == "equal" for k in range(i2 - i1)
    ]


def blank_lines(case: Case, rng: random.Random) -> Case | None:
    """Drop a blank context line or add one, consistently in SEARCH and REPLACE."""
    ctx = _context_positions(case.search, case.replace)
    blanks = [(i, j) for i, j in ctx if not case.search[i].strip()]
    s, r = list(case.search), list(case.replace)
    if blanks and rng.random() < 0.6:
        i, j = rng.choice(blanks)
        del s[i], r[j]
    else:
        inner = [(i, j) for i, j in ctx if i > 0]
        if not inner:
            return None
        i, j = rng.choice(inner)
        s.insert(i, "")
        r.insert(j, "")
    return replace(case, search=s, replace=r)


def crlf(case: Case, rng: random.Random) -> Case | None:
    if rng.random() < 0.5:  # a CRLF file, LF blocks
        return replace(
            case,
            before=case.before.replace("\n", "\r\n"),
            expected=case.expected.replace("\n", "\r\n"),
        )
    return replace(case, block_newline="\r\n")  # an LF file, CRLF blocks


def elided(case: Case, rng: random.Random) -> Case | None:
    """Replace the middle of a run of >= 3 unchanged lines with '...' in both blocks."""
    ctx = _context_positions(case.search, case.replace)
    runs, run = [], [ctx[0]] if ctx else []
    for a, b in zip(ctx, ctx[1:], strict=False):
        if b == (a[0] + 1, a[1] + 1):
            run.append(b)
        else:
            runs.append(run)
            run = [b]
    runs.append(run)
    runs = [x for x in runs if len(x) >= 3 and x[-1][0] < len(case.search)]
    if not runs:
        return None
    run = rng.choice(runs)
    (i0, j0), (i1, j1) = run[1], run[-2]
    if any(ELISION.match(x) for x in case.search + case.replace):
        return None
    marker = indent_of(case.search[run[0][0]]) + rng.choice(["...", "# ... existing code ..."])
    s = case.search[:i0] + [marker] + case.search[i1 + 1 :]
    r = case.replace[:j0] + [marker] + case.replace[j1 + 1 :]
    return replace(case, search=s, replace=r)


def typo(case: Case, rng: random.Random) -> Case | None:
    """A SEARCH line the model misremembered (a word changed): the edit must be refused and
    the file left as it was, so `expected` is the file before."""
    lines = [k for k, x in enumerate(case.search) if len(x.strip()) > 3]
    if not lines:
        return None
    k = rng.choice(lines)
    line = case.search[k]
    cut = len(indent_of(line)) + rng.randrange(len(line.strip()))
    s = list(case.search)
    s[k] = line[:cut] + "zq" + line[cut + 1 :]
    return replace(case, search=s, expected=case.before)


def _file_line(case: Case, k: int) -> str | None:
    """Line k of the file as the workspace sees it (a final newline ends the last line, it
    starts no empty one); None outside the file."""
    lines = case.before.split("\n")
    if case.before.endswith("\n"):
        lines.pop()
    return lines[k] if 0 <= k < len(lines) else None


def lead_blank(case: Case, rng: random.Random) -> Case | None:
    """A blank line the model put at the start of SEARCH only, where the file has none (the
    line above is not blank, or SEARCH starts the file): REPLACE is the true one."""
    if case.at is None:
        return None
    above = _file_line(case, case.at - 1)
    if above is not None and not above.strip():
        return None  # a real blank line: SEARCH would name it, and REPLACE delete it
    return replace(case, search=["", *case.search])


def trail_blank(case: Case, rng: random.Random) -> Case | None:
    """A blank line at the end of SEARCH only, where the file has none below it."""
    if case.at is None:
        return None
    below = _file_line(case, case.at + len(case.search))
    if below is not None and not below.strip():
        return None
    return replace(case, search=[*case.search, ""])


KINDS = {
    "none": lambda case, rng: case,
    "tabs_vs_spaces": tabs,
    "trailing_whitespace": trailing_ws,
    "reindented": reindent,
    "blank_lines": blank_lines,
    "crlf": crlf,
    "elided_context": elided,
    "search_lead_blank": lead_blank,
    "search_trail_blank": trail_blank,
}
_BLANKS = re.compile(r"\n[ \t]*(?=\n)")
ALLOWED = {  # what a comparison may ignore, per kind
    "trailing_whitespace": lambda t: re.sub(r"[ \t]+(?=\r?\n|$)", "", t),
    "blank_lines": lambda t: _BLANKS.sub("", t.replace("\r\n", "\n")),
}
