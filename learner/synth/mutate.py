"""Procedural mutations of the functions in a Python file, as minimal text edits.

    for mutation in mutations("shop/prices.py", text, seed=0):
        mutation.source  # the whole file with one bug in it; mutation.function: "Cart.total"

Kinds (SWE-smith's procedural ones): `operator` (+ -> -, * -> /, ...), `comparison` (< -> <=,
== -> !=, ...), `boolean` (and <-> or), `constant` (1 -> 2, True -> False), `negate` (an if /
while condition becomes `not (...)`), `swap_args` (the first two positional arguments of a
call trade places), `remove_statement` (a statement of the body deleted, `pass` left when it
was alone) and `remove_branch` (an `if` without else, or an `elif` clause, deleted). Each edit
touches only the tokens it changes, so the diff reads like a real slip, not a reformatting;
every result is parsed again and kept only when it compiles and its AST differs.
"""

from __future__ import annotations

import ast
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass

OPERATORS = {
    ast.Add: ("+", "-"), ast.Sub: ("-", "+"), ast.Mult: ("*", "+"), ast.Div: ("/", "*"),
    ast.FloorDiv: ("//", "/"), ast.Mod: ("%", "//"), ast.Pow: ("**", "*"),
}  # fmt: skip
COMPARISONS = {
    ast.Lt: ("<", "<="), ast.LtE: ("<=", "<"), ast.Gt: (">", ">="), ast.GtE: (">=", ">"),
    ast.Eq: ("==", "!="), ast.NotEq: ("!=", "=="),
}  # fmt: skip
BOOLEANS = {ast.And: ("and", "or"), ast.Or: ("or", "and")}


@dataclass(frozen=True)
class Mutation:
    path: str
    function: str  # qualified name, e.g. "Cart.total"
    kind: str
    line: int  # 1-based line of the edit in the original file
    description: str
    source: str  # the mutated file


@dataclass(frozen=True)
class _Edit:
    start: tuple[int, int]  # (line, col) 1-based line, 0-based col; UTF-8 offsets as in ast
    end: tuple[int, int]
    text: str


def mutations(path: str, text: str, *, seed: int = 0) -> list[Mutation]:
    """Every mutation found in the file's functions, in a shuffled (seeded) order."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    original = ast.dump(tree)
    lines = text.splitlines(keepends=True)
    found: dict[str, Mutation] = {}
    for qualname, function in _functions(tree):
        for kind, node, edits, description in _candidates(function, lines):
            source = _apply(lines, edits)
            if source in found or not _changed(source, original):
                continue
            found[source] = Mutation(
                path, qualname, kind, node.lineno, f"{description} in {qualname}()", source
            )
    result = list(found.values())
    random.Random(seed).shuffle(result)
    return result


def _functions(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, ast.AST]]:
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield prefix + node.name, node
            yield from _functions(node, f"{prefix}{node.name}.")
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, f"{prefix}{node.name}.")


def _own_nodes(function: ast.AST) -> Iterator[ast.AST]:
    """The nodes of a function's body, not those of functions or classes nested in it."""
    stack = list(function.body)
    while stack:
        node = stack.pop()
        yield node
        stack.extend(
            child
            for child in ast.iter_child_nodes(node)
            if not isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        )


def _candidates(function: ast.AST, lines: list[str]) -> Iterator[tuple[str, ast.AST, list, str]]:
    for node in _own_nodes(function):
        if isinstance(node, ast.BinOp) and type(node.op) in OPERATORS:
            old, new = OPERATORS[type(node.op)]
            edit = _gap_edit(lines, node.left, node.right, old, new)
            if edit:
                yield "operator", node, [edit], f"`{old}` became `{new}`"
        elif isinstance(node, ast.Compare):
            values = [node.left, *node.comparators]
            for index, op in enumerate(node.ops):
                if type(op) in COMPARISONS:
                    old, new = COMPARISONS[type(op)]
                    edit = _gap_edit(lines, values[index], values[index + 1], old, new)
                    if edit:
                        yield "comparison", node, [edit], f"`{old}` became `{new}`"
        elif isinstance(node, ast.BoolOp):
            old, new = BOOLEANS[type(node.op)]
            edit = _gap_edit(lines, node.values[0], node.values[1], old, new)
            if edit:
                yield "boolean", node, [edit], f"`{old}` became `{new}`"
        elif isinstance(node, ast.Constant) and _new_constant(node.value) is not None:
            new_value = _new_constant(node.value)
            edit = _Edit(*_span(node), new_value)
            yield "constant", node, [edit], f"a constant became {new_value}"
        elif isinstance(node, ast.If | ast.While):
            test = _segment(lines, node.test)
            yield "negate", node, [_Edit(*_span(node.test), f"not ({test})")], "a negated test"
        elif isinstance(node, ast.Call) and len(node.args) >= 2:
            first, second = node.args[0], node.args[1]
            if ast.Starred in (type(first), type(second)):
                continue
            a, b = _segment(lines, first), _segment(lines, second)
            if a != b:
                edits = [_Edit(*_span(second), a), _Edit(*_span(first), b)]
                yield "swap_args", node, edits, "swapped arguments"
        yield from _removals(node, lines)


def _removals(node: ast.AST, lines: list[str]) -> Iterator[tuple[str, ast.AST, list, str]]:
    for field in ("body", "orelse", "finalbody"):
        block = getattr(node, field, None)
        if not isinstance(block, list) or not block or not isinstance(block[0], ast.stmt):
            continue
        for statement in block:
            if _is_docstring(statement) or not _whole_lines(lines, statement):
                continue
            if lines[statement.lineno - 1].lstrip().startswith("elif"):
                continue  # an elif clause: removed below, as a clause
            if isinstance(statement, ast.If) and not statement.orelse:
                kind, description = "remove_branch", "an `if` branch removed"
            elif isinstance(statement, ast.Assign | ast.AugAssign | ast.Expr | ast.Return):
                kind, description = "remove_statement", "a statement removed"
            else:
                continue
            yield kind, statement, [_delete(lines, statement, alone=len(block) == 1)], description
    if isinstance(node, ast.If) and len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If):
        elif_ = node.orelse[0]
        if not elif_.orelse and lines[elif_.lineno - 1].lstrip().startswith("elif"):
            end = (elif_.end_lineno + 1, 0)
            yield "remove_branch", elif_, [_Edit((elif_.lineno, 0), end, "")], "an elif removed"


def _is_docstring(statement: ast.stmt) -> bool:
    return isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)


def _whole_lines(lines: list[str], statement: ast.stmt) -> bool:
    """The statement alone on its lines (nothing before it, nothing after but a comment)."""
    first = lines[statement.lineno - 1].encode("utf-8")[: statement.col_offset]
    last = lines[statement.end_lineno - 1].encode("utf-8")[statement.end_col_offset :]
    rest = last.decode("utf-8", "replace").strip()
    return not first.strip() and (not rest or rest.startswith("#"))


def _delete(lines: list[str], statement: ast.stmt, *, alone: bool) -> _Edit:
    indent = lines[statement.lineno - 1][: len(lines[statement.lineno - 1]) - len(
        lines[statement.lineno - 1].lstrip())]  # fmt: skip
    text = f"{indent}pass\n" if alone else ""
    return _Edit((statement.lineno, 0), (statement.end_lineno + 1, 0), text)


def _new_constant(value: object) -> str | None:
    if isinstance(value, bool):
        return repr(not value)
    if isinstance(value, int):
        return repr({0: 1, 1: 0}.get(value, value + 1))
    if isinstance(value, float):
        return repr(value + 1.0)
    return None  # strings, bytes, None, Ellipsis: left alone


def _span(node: ast.AST) -> tuple[tuple[int, int], tuple[int, int]]:
    return (node.lineno, node.col_offset), (node.end_lineno, node.end_col_offset)


def _segment(lines: list[str], node: ast.AST) -> str:
    return _text_between(lines, *_span(node))


def _text_between(lines: list[str], start: tuple[int, int], end: tuple[int, int]) -> str:
    if start[0] == end[0]:
        return lines[start[0] - 1].encode("utf-8")[start[1] : end[1]].decode("utf-8")
    chunks = [lines[start[0] - 1].encode("utf-8")[start[1] :].decode("utf-8")]
    chunks += lines[start[0] : end[0] - 1]
    chunks.append(lines[end[0] - 1].encode("utf-8")[: end[1]].decode("utf-8"))
    return "".join(chunks)


def _gap_edit(lines: list[str], left: ast.AST, right: ast.AST, old: str, new: str) -> _Edit | None:
    """Replace the operator `old` in the text between two operands by `new`."""
    start, end = (left.end_lineno, left.end_col_offset), (right.lineno, right.col_offset)
    gap = _text_between(lines, start, end)
    word = r"\b" if old.isalpha() else ""
    pattern = rf"(?<![=<>!*/]){word}{re.escape(old)}{word}(?![=*/])"
    if "#" in gap or len(re.findall(pattern, gap)) != 1:
        return None  # a comment or an ambiguous gap: not worth the risk
    return _Edit(start, end, re.sub(pattern, new, gap, count=1))


def _apply(lines: list[str], edits: list[_Edit]) -> str:
    """The file with the edits (non-overlapping) applied, the last one first."""
    data = [line.encode("utf-8") for line in lines] + [b""]
    for edit in sorted(edits, key=lambda e: e.start, reverse=True):
        (sl, sc), (el, ec) = edit.start, edit.end
        head = data[sl - 1][:sc]
        tail = data[el - 1][ec:] if el - 1 < len(data) else b""
        data[sl - 1 : el] = [head + edit.text.encode("utf-8") + tail]
    return b"".join(data).decode("utf-8")


def _changed(source: str, original: str) -> bool:
    try:
        return ast.dump(ast.parse(source)) != original
    except (SyntaxError, ValueError):
        return False
