"""Problem statements for mined tasks, written from the failing tests, and difficulty tiers.

    precise_statement(failing, messages, fix_files)  # names the tests, what they expect, where
    vague_statement(failing, functions, key)  # "something is off with total(), ..."
    located_statement(precise, patch)  # the precise text + the faulty line(s) of the fix
    dictated_statement(precise, patch)  # located + what a one-line fix's line should read
    difficulty(patch)  # "easy" | "medium" | "hard", from the fix's changed lines and files

The precise text lists the failing tests with their assertion messages and the file(s) the
fix is expected in; the vague one is what a person would type: a function or topic and a
symptom, no node ids, no file. The located text is the curriculum's easiest rung: the
precise text plus the line(s) the reference fix changes, as they read in the starting file
(or, for a fix that only adds lines, the line they go after) -- where to look, not what to
write. The dictated text is the rung below it, the request a person makes who knows the fix
("the faulty line: `x < 0`, it should read: `x <= 0`"): for a fix that rewrites one line, the
located text plus that line as the fix writes it; for any other fix, the located text. A
task's `difficulty` is the tier with the precise (or located) text;
`TaskRecord.tier("vague")` is one tier harder.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from pathlib import PurePosixPath

from learner.synth.gitrepo import changed_lines, patch_files

MAX_LISTED = 8
_VAGUE = (
    "something is off with {thing}, the {topic} test fails",
    "{thing} doesn't do what it should anymore, the {topic} tests are red",
    "can you look at {thing}? {topic} is broken",
    "the {topic} test fails and I'm not sure why, probably something in {thing}",
    "{topic} stopped working, fix it please",
)
_HUNK_FUNCTION = re.compile(r"^@@ [^@]* @@\s*(?:async\s+)?def\s+(\w+)", re.MULTILINE)
_ADDED_DEF = re.compile(r"^\+\s*(?:async\s+)?def\s+(\w+)", re.MULTILINE)
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def precise_statement(
    failing: Sequence[str], messages: Mapping[str, str], fix_files: Sequence[str]
) -> str:
    lines = ["These tests fail and should pass (without breaking the tests that pass now):", ""]
    for nodeid in failing[:MAX_LISTED]:
        message = _short(messages.get(nodeid, ""))
        lines.append(f"- {nodeid}" + (f": {message}" if message else ""))
    if len(failing) > MAX_LISTED:
        lines.append(f"- ... and {len(failing) - MAX_LISTED} more")
    if fix_files:
        lines += ["", f"The fix belongs in {', '.join(fix_files)} (not in the tests)."]
    return "\n".join(lines)


def located_statement(precise: str, patch: str) -> str:
    """`precise` plus where the bug is: the lines the fix `patch` removes (at most 3)."""
    removed, anchor = [], ""
    for line in patch.splitlines():
        if line.startswith(("---", "+++")):
            continue
        if line.startswith("-") and line[1:].strip():
            removed.append(line[1:].strip())
        elif line.startswith(" ") and line.strip() and not removed:
            anchor = line[1:].strip()  # the last context line before the change
        elif line.startswith("+") and not removed and anchor:
            return f"{precise}\n\nA line is missing after: `{anchor}`"
    if not removed:
        return precise
    if len(removed) == 1:
        return f"{precise}\n\nThe faulty line: `{removed[0]}`"
    shown = "\n".join(f"- `{line}`" for line in removed[:3])
    return f"{precise}\n\nThe faulty lines:\n{shown}"


def dictated_statement(precise: str, patch: str) -> str:
    """The located text plus, when `patch` rewrites exactly one line, what it should read."""
    located = located_statement(precise, patch)
    body = [ln for ln in patch.splitlines() if not ln.startswith(("---", "+++"))]
    removed = [ln[1:].strip() for ln in body if ln.startswith("-")]
    added = [ln[1:].strip() for ln in body if ln.startswith("+")]
    if len(removed) != 1 or len(added) != 1 or not removed[0] or not added[0]:
        return located
    return f"{located}\nIt should read: `{added[0]}`"


# The statements written from a task's fix, by style (one home for the choice).
FROM_PATCH = {"dictated": dictated_statement, "located": located_statement}


def vague_statement(failing: Sequence[str], functions: Sequence[str], key: str) -> str:
    topic = test_topic(failing[0]) if failing else "the tests"
    thing = f"{functions[0].rpartition('.')[2]}()" if functions else topic
    index = int(hashlib.sha256(key.encode("utf-8")).hexdigest(), 16) % len(_VAGUE)
    return _VAGUE[index].format(thing=thing, topic=topic)


def test_topic(nodeid: str) -> str:
    """'tests/test_prices.py::test_total' -> 'prices'; falls back on the test's name."""
    path, _, name = nodeid.partition("::")
    stem = PurePosixPath(path).stem
    for affix in ("test_", "_test", "tests_"):
        stem = stem.removeprefix(affix) if affix.endswith("_") else stem.removesuffix(affix)
    if stem and stem not in {"test", "tests"}:
        return stem.replace("_", " ")
    name = name.split("::")[-1].split("[")[0].removeprefix("test_")
    return name.replace("_", " ") or "the tests"


def patch_functions(patch: str) -> list[str]:
    """Functions a diff adds, then those it changes (as git names them in hunk headers)."""
    names = _ADDED_DEF.findall(patch) + _HUNK_FUNCTION.findall(patch)
    return list(dict.fromkeys(n for n in names if not n.startswith("test")))


def difficulty(patch: str) -> str:
    """easy: <= 2 changed lines in one file; medium: <= 12 lines in <= 2 files; else hard."""
    lines, files = changed_lines(patch), len(patch_files(patch))
    if lines <= 2 and files <= 1:
        return "easy"
    if lines <= 12 and files <= 2:
        return "medium"
    return "hard"


def _short(message: str) -> str:
    message = _ADDRESS.sub("", message)
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    text = " | ".join(lines[:3])
    return text if len(text) <= 240 else text[:237] + "..."
