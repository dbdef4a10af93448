"""Verify mined tasks: the reference patch must score 1.0 and the empty patch 0.0, every task.

    report = verify_tasks("tasks.jsonl", "/path/to/repo", python="/path/to/venv/bin/python")
    report["ok"]  # True only when every task passed both checks
    report["failed"]  # one entry per task that did not, with the reason: never silently kept

Each task is rebuilt in a temporary folder exactly as a rollout starts (`base_commit`'s
files, then `test_patch`, then `bug_patch`), its test files restored from the record as
grading does, and its FAIL_TO_PASS + PASS_TO_PASS run twice: as they are (the empty patch:
must score 0.0) and with `patch` applied (the reference: must score 1.0). A score is 1.0
when every one of those tests passes, else 0.0. The report is plain JSON-able data.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from learner.synth import gitrepo
from learner.synth.gitrepo import MiningError
from learner.synth.records import TaskRecord, read_tasks
from learner.synth.testrun import TestRun, run_tests

__all__ = ["MiningError", "score", "verify_tasks"]


def score(record: TaskRecord, run: TestRun) -> float:
    """1.0 when every FAIL_TO_PASS and PASS_TO_PASS test passed in the run, else 0.0."""
    return float(run.all_passed(record.FAIL_TO_PASS + record.PASS_TO_PASS))


def verify_tasks(
    tasks: str | os.PathLike[str] | Sequence[TaskRecord],
    repo_path: str | os.PathLike[str],
    python: str = "python",
    *,
    timeout_s: float = 300.0,
    on_progress: Callable[[int, int, str], None] | None = None,
) -> dict[str, Any]:
    """Check every task; a JSON-able report (`ok`, counts, `failed`, per-task `results`)."""
    records = read_tasks(tasks) if isinstance(tasks, str | os.PathLike) else list(tasks)
    repo = gitrepo.open_repo(repo_path, allow_dirty=True)  # only commits are read
    progress = on_progress or (lambda *_: None)
    results = []
    for done, record in enumerate(records):
        progress(done, len(records), f"verifying {record.instance_id}")
        results.append(_verify_one(repo, record, python, timeout_s))
    progress(len(records), len(records), "done")
    failed = [r for r in results if not r["ok"]]
    return {
        "repo": str(Path(repo_path)),
        "tasks": len(results),
        "passed": len(results) - len(failed),
        "ok": not failed,
        "failed": failed,
        "results": results,
    }


def _verify_one(repo: Any, record: TaskRecord, python: str, timeout_s: float) -> dict[str, Any]:
    result: dict[str, Any] = {"instance_id": record.instance_id, "kind": record.kind}
    scratch = Path(tempfile.mkdtemp(prefix="apprentice-verify-"))
    try:
        root = scratch / "task"
        root.mkdir()
        try:
            gitrepo.export_tree(repo, gitrepo.resolve(repo, record.base_commit).hexsha, root)
            for patch in (record.test_patch, record.bug_patch):
                gitrepo.apply_patch(root, patch)
        except (MiningError, ValueError) as error:
            return {**result, "ok": False, "reference": None, "empty": None,
                    "reason": f"cannot rebuild the starting files: {error}"}  # fmt: skip
        _restore_tests(root, record)
        tests = record.FAIL_TO_PASS + record.PASS_TO_PASS
        empty = _run(root, python, tests, timeout_s)
        try:
            gitrepo.apply_patch(root, record.patch)
        except MiningError as error:
            return {**result, "ok": False, "reference": None, "empty": score(record, empty),
                    "reason": f"the reference patch does not apply: {error}"}  # fmt: skip
        _restore_tests(root, record)
        reference = _run(root, python, tests, timeout_s)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    result.update(reference=score(record, reference), empty=score(record, empty))
    reasons = []
    if reference.timed_out or empty.timed_out:
        hung = reference.hung or empty.hung
        reasons.append(f"a test run ran past {timeout_s:g} s" + (f" ({hung})" if hung else ""))
    if result["reference"] != 1.0:
        failing = [t for t in tests if not reference.passed(t)]
        reasons.append(f"the reference patch scores 0.0: {_listed(failing, reference)}")
    if result["empty"] != 0.0:
        reasons.append("the empty patch scores 1.0: every FAIL_TO_PASS test already passes")
    result.update(ok=not reasons, reason="; ".join(reasons))
    return result


def _restore_tests(root: Path, record: TaskRecord) -> None:
    for path, text in record.test_files.items():
        target = root / path
        if not target.resolve().is_relative_to(root.resolve()):
            raise MiningError(f"task {record.instance_id}: test file {path!r} escapes the tree")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


def _run(root: Path, python: str, tests: list[str], timeout_s: float) -> TestRun:
    try:
        return run_tests(root, python, tests, timeout_s=timeout_s)
    except FileNotFoundError as error:
        raise MiningError(str(error)) from None


def _listed(failing: list[str], run: TestRun) -> str:
    shown = [f"{t} ({run.outcomes.get(t, 'not run')})" for t in failing[:5]]
    return ", ".join(shown) + (f" and {len(failing) - 5} more" if len(failing) > 5 else "")
