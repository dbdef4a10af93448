"""Indentation arithmetic for the tolerant strategy (tolerant.py): measuring leading
whitespace and mapping a SEARCH block's indentation onto the file's (tab width, column
offset, indent-unit scaling).

Nothing to run here; tests/agent/test_edits.py covers it through apply_edits.
"""

from __future__ import annotations

from dataclasses import dataclass, field


def indent_of(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def columns(ws: str, tab: int) -> int:
    col = 0
    for ch in ws:
        col = (col // tab + 1) * tab if ch == "\t" else col + 1
    return col


def detect_unit(widths: list[int], prefer: int | None = None) -> int:
    """The indent unit (in columns) most of `widths` are multiples of."""
    ws = [w for w in widths if w > 0]
    if not ws:
        return prefer or 4
    for unit in ([prefer] if prefer else []) + [4, 2, 3, 8]:
        if sum(w % unit == 0 for w in ws) >= 0.9 * len(ws):
            return unit
    return 1


@dataclass
class IndentMap:
    """col_file = col_search * num // den + offset, columns measured with tab width `tab`."""

    tab: int
    offset: int = 0
    num: int = 1
    den: int = 1
    file_tabs: bool = False
    pairs: dict[str, str] = field(default_factory=dict)  # seen SEARCH indent -> file indent

    def col(self, ws: str) -> int:
        return columns(ws, self.tab) * self.num // self.den + self.offset

    def render(self, ws: str) -> str:
        if ws in self.pairs:
            return self.pairs[ws]
        col = max(self.col(ws), 0)
        if self.file_tabs:
            return "\t" * (col // self.tab) + " " * (col % self.tab)
        return " " * col


def find_indent_map(
    pairs: list[tuple[str, str]], unit_f: int, file_tabs: bool, block: list[str]
) -> tuple[int, IndentMap] | None:
    """How SEARCH indentation maps onto the file's, from matched (SEARCH, file) indent pairs.
    `unit_f`: the file's indent unit; `block`: SEARCH + REPLACE lines. Score 3: identical
    columns; 2: a uniform offset or indent-unit scaling; None when no single mapping explains
    every matched line."""
    tabs = list(dict.fromkeys([unit_f, 4, 8, 2]))
    found: tuple[int, IndentMap] | None = None
    for tab in tabs:
        offs = {columns(f, tab) - columns(s, tab) for s, f in pairs}
        if offs == {0}:
            found = (3, IndentMap(tab, file_tabs=file_tabs))
            break
        if len(offs) == 1 and found is None:
            found = (2, IndentMap(tab, offset=offs.pop(), file_tabs=file_tabs))
    if found is None:  # a block written with another indent unit (e.g. 4 spaces for 2)
        widths = [columns(indent_of(x), 4) for x in block if x.strip()]
        for unit_b in dict.fromkeys([detect_unit(widths), 4, 2, 8, 3]):
            offs = {columns(f, 4) - columns(s, 4) * unit_f // unit_b for s, f in pairs}
            if unit_b != unit_f and len(offs) == 1:
                found = (2, IndentMap(4, offs.pop(), unit_f, unit_b, file_tabs))
                break
    if found is None:
        return None  # inconsistent indentation: more likely the wrong place than a typo
    score, imap = found
    for s, f in pairs:  # exact indents for the ones the mapping agrees on (keeps alignment)
        if imap.col(s) == columns(f, imap.tab):
            imap.pairs.setdefault(s, f)
    return score, imap
