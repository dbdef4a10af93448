"""The 20-bug set of bench/agent_bugs.py, checked without a model: every bug's tests fail on
the buggy code and pass on the reference fix, and each fix is one to three changed lines.

Run: .venv/bin/python -m pytest tests/agent/test_agent_bugs_set.py -q
"""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest

from bench.agent_bugs_data import BUGS, Bug, run_tests, write


def test_the_set_has_twenty_distinct_bugs() -> None:
    assert len(BUGS) == 20
    assert len({b.name for b in BUGS}) == 20 and len({b.path for b in BUGS}) == 20
    for bug in BUGS:
        assert bug.code.count(bug.fix[0]) == 1, bug.name  # the fix names one place
        assert bug.path in bug.task, bug.name  # the statement names the file
        changed = [
            line
            for line in difflib.ndiff(bug.code.splitlines(), bug.fixed.splitlines())
            if line.startswith("- ")
        ]
        assert 1 <= len(changed) <= 3, bug.name


@pytest.mark.parametrize("bug", BUGS, ids=lambda b: b.name)
def test_tests_fail_on_the_bug_and_pass_on_the_fix(bug: Bug, tmp_path: Path) -> None:
    buggy, fixed = tmp_path / "buggy", tmp_path / "fixed"
    write(buggy, bug.files())
    write(fixed, bug.files(fixed=True))
    passed, output = run_tests(buggy)
    assert not passed and "1 failed" in output, output
    passed, output = run_tests(fixed)
    assert passed, output
