"""The reward of an answer to a completion task (learner/synth/completion.py), in [-1, 1].

    completion_reward(task, "return total")  # 1.0: the first line is the author's
    completion_reward(task, "return totl")   # 0.8 x similarity: a near miss

- quiet task: 1 for an empty answer (only whitespace counts as empty), 0 for anything else.
- otherwise an empty answer is 0; an answer whose first line equals the author's (both
  stripped of surrounding whitespace) is 1; any other is NEAR (0.8) x `similarity`: the
  normalized edit similarity (1 - Levenshtein distance / the longer length) of the answer's
  first n lines with the author's n lines, each line stripped (n: the author's lines).
- penalties, PENALTY (0.5) off each, floored at -1, so a harmful suggestion scores below
  saying nothing (0):
  - it breaks the parse: Python only, `ast.parse(prefix + answer + suffix)` fails where
    `ast.parse(prefix + author's answer + suffix)` succeeds, the author's answer cut to as
    many lines as this one has: a right first line of a block that needs its next lines
    leaves the file unparsable for the author too, and is not penalised for it;
  - it repeats itself: two lines in a row that are the same (stripped, with a letter or a
    digit: two closing brackets are fine) among the line before the cursor's, the lines the
    answer makes and the line after them, when the author's answer makes no such pair.
Plain Python, no dependency; tested in tests/learner/synth/test_completion_tasks.py.
"""

from __future__ import annotations

import ast
import warnings

from learner.synth.completion import CompletionTask

NEAR = 0.8  # the most a non-exact answer earns
PENALTY = 0.5


def completion_reward(task: CompletionTask, answer: str) -> float:
    if task.category == "quiet":
        return 0.0 if answer.strip() else 1.0
    if not answer.strip():
        return 0.0
    base = 1.0 if exact_line(task, answer) else NEAR * similarity(task, answer)
    penalties = breaks_parse(task, answer) + repeats(task, answer)
    return max(-1.0, base - PENALTY * penalties)


def first_line(text: str) -> str:
    return text.split("\n", 1)[0].strip()


def exact_line(task: CompletionTask, answer: str) -> bool:
    """A non-empty answer whose first line is the author's (surrounding whitespace aside)."""
    return bool(answer.strip()) and first_line(answer) == first_line(task.answer)


def similarity(task: CompletionTask, answer: str) -> float:
    """Edit similarity of the answer's first lines with the author's, as many as theirs."""
    theirs = [line.strip() for line in task.answer.split("\n")]
    ours = [line.strip() for line in answer.split("\n")[: len(theirs)]]
    return edit_similarity("\n".join(ours), "\n".join(theirs))


def edit_similarity(a: str, b: str) -> float:
    """1 - Levenshtein(a, b) / max(len(a), len(b)); 1.0 for two empty strings."""
    if not a and not b:
        return 1.0
    previous = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        current = [i]
        for j, y in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (x != y)))
        previous = current
    return 1.0 - previous[-1] / max(len(a), len(b))


def breaks_parse(task: CompletionTask, answer: str) -> bool:
    """Python: the file parses with the author's text (as many lines of it as the answer
    has) and not with this answer."""
    if task.language != "python":
        return False
    theirs = "\n".join(task.answer.split("\n")[: len(answer.split("\n"))])
    return _parses(task.prefix + theirs + task.suffix) and not _parses(
        task.prefix + answer + task.suffix
    )


def _parses(source: str) -> bool:
    with warnings.catch_warnings():  # invalid escapes and the like: warnings, not errors
        warnings.simplefilter("ignore")
        try:
            ast.parse(source)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return False
    return True


def repeats(task: CompletionTask, answer: str) -> bool:
    """The answer makes two same lines in a row that the author's answer does not."""
    return _has_pair(task, answer) and not _has_pair(task, task.answer)


def _has_pair(task: CompletionTask, answer: str) -> bool:
    # The line before the cursor's, the cursor's line with the answer in it (and any lines
    # the answer adds), the line after them.
    before = "\n".join(task.prefix.split("\n")[-2:])
    after = "\n".join(task.suffix.split("\n")[:2])
    lines = [line.strip() for line in (before + answer + after).split("\n")]
    return any(
        a == b and any(ch.isalnum() for ch in a) for a, b in zip(lines, lines[1:], strict=False)
    )
