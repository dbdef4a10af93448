"""What a test file is, for mining and grading alike: one rule, `is_test_path`.

Mining (mine.py, gitrepo.split_commit) puts a commit's test paths in `test_patch` and the
rest in the reference `patch`, records their text as a task's `test_files`, and never mutates
them; grading (sandbox.Sandbox.restore_tests) undoes every edit to them before the tests run.
With one rule the two agree: a reference patch never holds a change grading would undo, and
what the agent may not edit is exactly what the task ships as tests.

A test path is any of: one of the task's own `test_files`; conftest.py; test_*.py; *_test.py;
a file under a test/, tests/ or testing/ folder; pytest's configuration at the top
(pytest.ini, .pytest.ini, tox.ini, setup.cfg, pyproject.toml); a top-level module or package
that would shadow pytest or run at start-up (pytest, _pytest, py, pluggy, sitecustomize,
usercustomize); a .pth file. Tested in tests/learner/synth/test_paths.py.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from pathlib import PurePosixPath

TEST_DIRS = frozenset({"test", "tests", "testing"})
TEST_CONFIGS = frozenset({"pytest.ini", ".pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml"})
SHADOWS = frozenset({"pytest", "_pytest", "py", "pluggy", "sitecustomize", "usercustomize"})
_TEST_MODULE = re.compile(r"test_.*\.py|.*_test\.py")


def is_test_path(path: str, test_files: Collection[str] = ()) -> bool:
    """True for a test path (the module docstring's rule); `test_files`: the task's own."""
    parts = PurePosixPath(path).parts
    if not parts:
        return False
    name, top = parts[-1], parts[0]
    return (
        path in test_files
        or name == "conftest.py"
        or bool(_TEST_MODULE.fullmatch(name))
        or any(part in TEST_DIRS for part in parts[:-1])
        or (len(parts) == 1 and name in TEST_CONFIGS)
        or PurePosixPath(top).stem in SHADOWS
        or name.endswith(".pth")
    )
