"""One rule for what a test file is (learner/synth/paths.py): mining splits commits by it and
grading undoes edits by it, so the two agree on every path of the table below.

Run: .venv/bin/python -m pytest tests/learner/synth/test_paths.py -q
"""

from __future__ import annotations

import sys

import git
import pytest

from learner.synth import gitrepo, mine, paths, sandbox
from learner.synth.paths import is_test_path
from learner.synth.records import TaskRecord
from learner.synth.sandbox import Sandbox, SandboxConfig, SandboxLimits

TABLE = [  # (path, a test path?)
    ("tests/test_x.py", True),
    ("test_x.py", True),
    ("x_test.py", True),
    ("pkg/test_y.py", True),
    ("conftest.py", True),
    ("pkg/conftest.py", True),
    ("pkg/tests/helpers.py", True),
    ("test/data.json", True),
    ("testing/util.py", True),
    ("src/testing/fixtures.txt", True),
    ("pytest.ini", True),
    (".pytest.ini", True),
    ("tox.ini", True),
    ("setup.cfg", True),
    ("pyproject.toml", True),
    ("pytest/__init__.py", True),
    ("_pytest/hooks.py", True),
    ("py.py", True),
    ("pluggy.py", True),
    ("sitecustomize.py", True),
    ("usercustomize.py", True),
    ("x.pth", True),
    ("lib/extra.pth", True),
    ("src/calc.py", False),
    ("calc.py", False),
    ("contest.py", False),
    ("attest.py", False),
    ("testsuite/run.py", False),
    ("src/pytest.py", False),
    ("docs/pyproject.toml", False),
    ("pkg/setup.cfg", False),
    ("pkg/tox.ini", False),
    ("README.md", False),
]


def test_mining_and_grading_use_the_one_rule() -> None:
    assert gitrepo.is_test_path is paths.is_test_path  # split_commit
    assert mine.is_test_path is paths.is_test_path  # test files, mutation targets
    assert sandbox.is_test_path is paths.is_test_path  # grading's restore_tests


@pytest.mark.parametrize(("path", "expected"), TABLE)
def test_the_table(path: str, expected: bool) -> None:
    assert is_test_path(path) is expected


def test_a_tasks_own_test_files_count_too() -> None:
    assert is_test_path("data/expected.txt", {"data/expected.txt"})
    assert not is_test_path("data/expected.txt")
    assert not is_test_path("src/calc.py", {"data/expected.txt"})
    assert not is_test_path("")


def test_a_commit_splits_as_grading_restores(tmp_path) -> None:
    """Every path of the table in one commit: mining's test side of the commit is exactly
    what grading undoes after the agent edited every file."""
    files = {path: f"# {path}\n" for path, _ in TABLE}
    expected = {path for path, is_test in TABLE if is_test}
    repo = git.Repo.init(tmp_path / "repo")
    (tmp_path / "repo" / "README.md").write_text("start\n")
    repo.index.add(["README.md"])
    repo.index.commit("start")
    for path, text in files.items():
        target = tmp_path / "repo" / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    repo.index.add(list(files))
    commit = repo.index.commit("everything")
    parts = gitrepo.split_commit(repo, commit)
    assert parts is not None
    assert set(parts.test_files) == expected
    assert set(parts.code_files) == set(files) - expected

    task = TaskRecord(
        instance_id="t__revert-0000000-0", repo="t", base_commit="0" * 40, patch="",
        test_patch="", FAIL_TO_PASS=["tests/test_x.py::test_x"], PASS_TO_PASS=[],
        problem_statement="p", problem_statement_vague="v", kind="revert", difficulty="easy",
        test_command=["python", "-m", "pytest"], test_files={},
    )  # fmt: skip
    config = SandboxConfig(python=sys.executable, limits=SandboxLimits(timeout_s=20))
    with Sandbox(files, config) as box:
        for path in files:
            (box.root / path).write_text("edited\n")
        assert set(box.restore_tests(task)) == expected
        assert all((box.root / p).read_text() == files[p] for p in expected)
        assert all((box.root / p).read_text() == "edited\n" for p in set(files) - expected)
