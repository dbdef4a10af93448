"""Mining on a repository the test builds: revert and mutate tasks with the right
FAIL_TO_PASS / PASS_TO_PASS, the person's repository untouched, clear errors for bad input.

    .venv/bin/python -m pytest tests/learner/synth/test_mine.py -q
"""

from __future__ import annotations

import sys
from pathlib import Path

import git
import pytest

from learner.synth.gitrepo import apply_patch, export_tree, patch_files
from learner.synth.mine import MineConfig, MiningError, mine_tasks
from learner.synth.records import read_tasks, starting_tree, write_tasks
from tests.learner.synth.synth_repo import commit, make_repo

TOTAL = ["tests/test_prices.py::test_total", "tests/test_prices.py::test_total_empty"]
DISCOUNT = "tests/test_prices.py::test_discount"


@pytest.fixture(autouse=True, scope="module")
def _fast_pytest():
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")  # the children start faster
        yield


@pytest.fixture(scope="module")
def mined(tmp_path_factory: pytest.TempPathFactory):
    repo = make_repo(tmp_path_factory.mktemp("mine") / "shop")
    head = repo.head.commit.hexsha
    seen = []
    tasks = mine_tasks(repo.working_tree_dir, max_tasks=4, python=sys.executable, timeout_s=60,
                       on_progress=lambda *args: seen.append(args))  # fmt: skip
    return repo, head, tasks, seen


def test_a_revert_task_from_the_commit_that_added_discount(mined) -> None:
    repo, _, tasks, _ = mined
    reverts = [t for t in tasks if t.kind == "revert"]
    assert len(reverts) == 1
    task = reverts[0]
    fix = repo.head.commit.parents[0]
    assert task.instance_id == f"shop__revert-{fix.hexsha[:7]}-0"
    assert task.base_commit == fix.parents[0].hexsha and task.repo == "shop"
    assert task.FAIL_TO_PASS == [DISCOUNT] and task.PASS_TO_PASS == TOTAL
    assert "+def discount(amount, percent):" in task.patch and "tests/" not in task.patch
    assert "+def test_discount():" in task.test_patch and "shop/prices.py" not in task.test_patch
    assert DISCOUNT in task.problem_statement and "shop/prices.py" in task.problem_statement
    assert "cannot import name 'discount'" in task.problem_statement
    vague = task.problem_statement_vague  # one of a few phrasings, picked by the instance id
    assert "::" not in vague and ("discount()" in vague or "prices" in vague)
    assert task.difficulty == "medium" and set(task.test_files) == {"tests/test_prices.py"}


def test_mutate_tasks_on_head(mined, tmp_path: Path) -> None:
    repo, head, tasks, _ = mined
    mutants = [t for t in tasks if t.kind == "mutate"]
    assert len(mutants) == 3 and len(tasks) == 4
    for task in mutants:
        assert task.base_commit == head and task.test_patch == ""
        assert task.FAIL_TO_PASS and set(task.FAIL_TO_PASS).isdisjoint(task.PASS_TO_PASS)
        assert set(task.FAIL_TO_PASS) | set(task.PASS_TO_PASS) == {DISCOUNT, *TOTAL}
        assert task.difficulty == "easy"  # one line changed
        # bug_patch breaks HEAD; patch restores it exactly
        root = tmp_path / task.instance_id
        root.mkdir()
        export_tree(repo, head, root)
        original = (root / "shop/prices.py").read_text()
        apply_patch(root, task.bug_patch)
        assert (root / "shop/prices.py").read_text() != original
        apply_patch(root, task.patch)
        assert (root / "shop/prices.py").read_text() == original


def test_the_repository_is_left_as_it_was(mined, tmp_path: Path) -> None:
    repo, head, tasks, seen = mined
    assert repo.head.commit.hexsha == head and not repo.is_dirty(untracked_files=True)
    assert len(list(repo.iter_commits("--all"))) == 3 and not repo.git.stash("list")
    assert seen[-1] == (4, 4, "done: 4 tasks")
    assert read_tasks(write_tasks(tmp_path / "tasks.jsonl", tasks)) == tasks


def test_kinds_since_and_max(mined) -> None:
    repo = mined[0]
    only = mine_tasks(repo.working_tree_dir, kinds=["revert"], python=sys.executable,
                      since="HEAD~1", timeout_s=60)  # fmt: skip
    assert only == []  # the README commit after HEAD~1 is no task
    with pytest.raises(ValueError, match="kinds"):
        MineConfig(kinds=("delete",))


def test_not_a_repository_and_no_commits(tmp_path: Path) -> None:
    with pytest.raises(MiningError, match="not a git repository"):
        mine_tasks(tmp_path, python=sys.executable)
    git.Repo.init(tmp_path / "empty")
    with pytest.raises(MiningError, match="no commits"):
        mine_tasks(tmp_path / "empty", python=sys.executable)


def test_a_dirty_tree_is_refused(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "shop")
    (tmp_path / "shop" / "shop" / "prices.py").write_text("broken = True\n")
    with pytest.raises(MiningError, match=r"uncommitted changes \(shop/prices.py\)"):
        mine_tasks(repo.working_tree_dir, python=sys.executable)


def test_no_tests(tmp_path: Path) -> None:
    repo = git.Repo.init(tmp_path / "plain")
    commit(repo, {"plain.py": "x = 1\n"}, "one")
    with pytest.raises(MiningError, match="no tests"):
        mine_tasks(repo.working_tree_dir, python=sys.executable)


def test_a_hung_test_is_named(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "shop")
    hang = "import time\n\n\ndef test_forever():\n    time.sleep(60)\n"
    commit(repo, {"tests/test_hang.py": hang}, "a test that hangs")
    with pytest.raises(MiningError, match=r"ran past 3 s.*tests/test_hang.py::test_forever"):
        mine_tasks(repo.working_tree_dir, python=sys.executable, timeout_s=3)


def test_an_interpreter_without_the_dependencies(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "shop")
    with pytest.raises(MiningError, match="no such Python interpreter"):
        mine_tasks(repo.working_tree_dir, python=str(tmp_path / "nopython"))


def test_the_located_statement_quotes_the_line_the_fix_changes(mined) -> None:
    repo, _, tasks, _ = mined
    for task in tasks:
        text = task.statement("located")
        assert text.startswith(task.problem_statement + "\n\n")
        if task.kind == "revert":  # the fix only adds discount(): the line it goes after
            assert text.endswith("A line is missing after: `return result`")
            continue
        assert "The faulty line: `" in text
        quoted = text.rpartition("The faulty line: `")[2].removesuffix("`")
        start = starting_tree(task, repo.working_tree_dir)
        path = patch_files(task.patch)[0]
        assert quoted in [line.strip() for line in start[path].splitlines()]
        removed = [line[1:].strip() for line in task.patch.splitlines() if line[:1] == "-"]
        assert quoted in removed


def test_the_dictated_statement_adds_what_a_one_line_fix_writes(mined) -> None:
    _, _, tasks, _ = mined
    dictated = 0
    for task in tasks:
        text, located = task.statement("dictated"), task.statement("located")
        added = [line[1:].strip() for line in task.patch.splitlines() if line[:2] == "+ "]
        removed = [line for line in task.patch.splitlines() if line[:2] == "- "]
        if len(added) == 1 and len(removed) == 1:
            assert text == f"{located}\nIt should read: `{added[0]}`"
            dictated += 1
        else:  # the revert task adds a whole function: nothing one line could dictate
            assert text == located
    assert dictated >= 1
