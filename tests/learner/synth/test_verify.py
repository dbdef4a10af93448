"""verify_tasks: mined tasks score 1.0 with the reference patch and 0.0 with the empty patch;
a broken task is reported with its reason, never silently kept.

    .venv/bin/python -m pytest tests/learner/synth/test_verify.py -q
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest

from agent_server.agent.edits.diff import unified_diff
from learner.synth.mine import mine_tasks
from learner.synth.records import write_tasks
from learner.synth.verify import MiningError, verify_tasks
from tests.learner.synth.synth_repo import make_repo


@pytest.fixture(autouse=True, scope="module")
def _fast_pytest():
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")  # the children start faster
        yield


@pytest.fixture(scope="module")
def mined(tmp_path_factory: pytest.TempPathFactory):
    repo = make_repo(tmp_path_factory.mktemp("verify") / "shop")
    tasks = mine_tasks(repo.working_tree_dir, max_tasks=2, python=sys.executable, timeout_s=60)
    assert {t.kind for t in tasks} == {"revert", "mutate"}
    return repo, tasks


def test_reference_scores_one_and_empty_scores_zero(mined, tmp_path) -> None:
    repo, tasks = mined
    path = write_tasks(tmp_path / "tasks.jsonl", tasks)
    seen = []
    report = verify_tasks(path, repo.working_tree_dir, sys.executable, timeout_s=60,
                          on_progress=lambda *args: seen.append(args))  # fmt: skip
    assert report["ok"] and report["failed"] == [] and report["passed"] == report["tasks"] == 2
    assert [(r["reference"], r["empty"]) for r in report["results"]] == [(1.0, 0.0)] * 2
    assert seen[-1] == (2, 2, "done")
    json.dumps(report)  # plain data


def test_broken_tasks_are_reported(mined) -> None:
    repo, tasks = mined
    mutate, revert = sorted(tasks, key=lambda t: t.kind)
    no_fix = dataclasses.replace(revert, instance_id="no-fix", patch="")
    already = dataclasses.replace(mutate, instance_id="already-fixed", bug_patch=mutate.patch)
    gone = dataclasses.replace(revert, instance_id="gone", base_commit="f" * 40)
    report = verify_tasks([no_fix, already, gone], repo.working_tree_dir, sys.executable,
                          timeout_s=60)  # fmt: skip
    assert not report["ok"] and report["passed"] == 0
    reasons = {r["instance_id"]: r["reason"] for r in report["failed"]}
    assert "reference patch scores 0.0" in reasons["no-fix"]
    assert "test_discount" in reasons["no-fix"]
    assert "cannot rebuild the starting files" in reasons["already-fixed"]  # patch won't apply
    assert "no such revision" in reasons["gone"]


def test_the_empty_patch_passing_is_reported(mined) -> None:
    repo, tasks = mined
    mutate = next(t for t in tasks if t.kind == "mutate")
    # the "bug" touches only a comment: nothing fails, so the empty patch scores 1.0
    path = mutate.patch.splitlines()[0].split(" b/")[1]
    original = (Path(repo.working_tree_dir) / path).read_text(encoding="utf-8")
    harmless = unified_diff(original, original + "# a comment\n", path, git=True)
    fixed = unified_diff(original + "# a comment\n", original, path, git=True)
    task = dataclasses.replace(mutate, instance_id="harmless", bug_patch=harmless, patch=fixed)
    report = verify_tasks([task], repo.working_tree_dir, sys.executable, timeout_s=60)
    (result,) = report["failed"]
    assert (result["reference"], result["empty"]) == (1.0, 1.0)
    assert "empty patch scores 1.0" in result["reason"]


def test_not_a_repository(tmp_path, mined) -> None:
    with pytest.raises(MiningError, match="not a git repository"):
        verify_tasks(mined[1], tmp_path, sys.executable)
