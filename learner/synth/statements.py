"""Problem statements for mined tasks, written from the failing tests, and difficulty tiers.

    precise_statement(failing, messages, fix_files)  # names the tests, what they expect, where
    vague_statement(failing, functions, key)  # "something is off with total(), ..."
    difficulty(patch)  # "easy" | "medium" | "hard", from the fix's changed lines and files

The precise text lists the failing tests with their assertion messages and the file(s) the
fix is expected in; the vague one is what a person would type: a function or topic and a
symptom, no node ids, no file. A task's `difficulty` is the tier with the precise text;
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
