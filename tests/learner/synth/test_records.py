"""Task records: JSONL round trip (atomic), clear errors for bad files, tiers, starting trees.

.venv/bin/python -m pytest tests/learner/synth/test_records.py -q
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from learner.synth.gitrepo import split_commit
from learner.synth.records import RecordError, TaskRecord, read_tasks, starting_tree, write_tasks
from tests.learner.synth.synth_repo import TESTS_2, make_repo


def record(**changes) -> TaskRecord:
    fields = dict(
        instance_id="shop__revert-abc1234-0", repo="shop", base_commit="abc1234",
        patch="diff --git a/x b/x\n", test_patch="", FAIL_TO_PASS=["tests/test_x.py::test_a"],
        PASS_TO_PASS=[], problem_statement="test_a fails", problem_statement_vague="x is off",
        kind="revert", difficulty="easy", test_command=["python", "-m", "pytest"],
    )  # fmt: skip
    return TaskRecord(**{**fields, **changes})


def test_round_trip_is_atomic(tmp_path: Path) -> None:
    mutate = record(instance_id="shop__mutate-abc1234-0", kind="mutate", bug_patch="diff",
                    test_files={"tests/test_x.py": "ü\n"})  # fmt: skip
    records = [record(), mutate]
    path = write_tasks(tmp_path / "out" / "tasks.jsonl", records)
    assert read_tasks(path) == records
    assert [p.name for p in path.parent.iterdir()] == ["tasks.jsonl"]  # no temp file left


def test_a_failed_write_leaves_the_old_file(tmp_path: Path) -> None:
    path = write_tasks(tmp_path / "tasks.jsonl", [record()])

    def broken():
        yield record()
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError):
        write_tasks(path, broken())
    assert read_tasks(path) == [record()]
    assert len(list(tmp_path.iterdir())) == 1


def test_bad_files_name_the_line(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    good = json.dumps(record().to_dict())
    path.write_text(good + "\n\n{not json\n", encoding="utf-8")
    with pytest.raises(RecordError, match=r"tasks.jsonl:3"):
        read_tasks(path)
    path.write_text(good + "\n" + good + "\n", encoding="utf-8")
    with pytest.raises(RecordError, match="duplicate instance_id"):
        read_tasks(path)
    data = record().to_dict()
    del data["patch"]
    path.write_text(json.dumps(data) + "\n", encoding="utf-8")
    with pytest.raises(RecordError, match="lacks patch"):
        read_tasks(path)
    with pytest.raises(RecordError, match="no such task file"):
        read_tasks(tmp_path / "missing.jsonl")


def test_records_are_validated() -> None:
    with pytest.raises(RecordError, match="kind"):
        record(kind="other")
    with pytest.raises(RecordError, match="FAIL_TO_PASS is empty"):
        record(FAIL_TO_PASS=[])
    with pytest.raises(RecordError, match="bug_patch"):
        record(kind="mutate")


def test_tiers_and_statements() -> None:
    task = record(difficulty="medium")
    assert (task.tier("precise"), task.tier("vague")) == ("medium", "hard")
    assert record(difficulty="hard").tier("vague") == "hard"
    assert task.statement("vague") == "x is off"
    with pytest.raises(ValueError, match="style"):
        task.statement("loud")


def test_starting_tree_is_the_parent_with_the_tests(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "shop")
    fix = repo.head.commit.parents[0]  # "discount"
    parts = split_commit(repo, fix)
    assert parts.code_files == ("shop/prices.py",) and parts.test_files == ("tests/test_prices.py",)
    task = record(base_commit=fix.parents[0].hexsha, patch=parts.code_patch,
                  test_patch=parts.test_patch)  # fmt: skip
    tree = starting_tree(task, repo.working_tree_dir)
    assert tree["tests/test_prices.py"] == TESTS_2
    assert "def discount" not in tree["shop/prices.py"]
    assert "README.md" not in tree and not any(p.startswith(".git") for p in tree)
