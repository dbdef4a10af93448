"""Mine tasks from a local git repository with a pytest suite: revert and mutate tasks,
each kept only when the tests show it (>= 1 FAIL_TO_PASS), in the SWE-bench record format.

    tasks = mine_tasks("/path/to/repo", max_tasks=20, python="/path/to/venv/bin/python")
    write_tasks("tasks.jsonl", tasks)

- revert: a commit that changes code (a non-test .py file) and tests. The task starts from
  the commit's parent with the commit's test changes applied (`test_patch`); the reference
  `patch` is the commit's non-test diff.
- mutate: a procedural mutation (learner/synth/mutate.py) of a function in a non-test file of
  `rev` (default HEAD), functions the tests name first. `bug_patch` introduces it, `patch`
  reverts it.

Validation runs the whole suite in the starting state and in the fixed state (the fixed state
of mutate tasks is `rev` itself, run once): FAIL_TO_PASS pass only when fixed, PASS_TO_PASS
pass in both. A run that times out drops the candidate. Everything happens in temporary
folders exported from git blobs: the person's repository and working tree are only read.
Bad input raises MiningError: not a repository, no commits, a dirty tree, no tests, tests
that do not run at all, a suite that hangs at `rev` (the message names the hung test).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import git

from agent_server.agent.edits.diff import unified_diff
from learner.synth import gitrepo, statements
from learner.synth.gitrepo import MiningError
from learner.synth.mutate import Mutation, mutations
from learner.synth.paths import is_test_path
from learner.synth.records import KINDS, TEST_COMMAND, TaskRecord
from learner.synth.testrun import TestRun, run_tests

__all__ = ["MiningError", "MineConfig", "mine_tasks"]

Progress = Callable[[int, int, str], None]  # (tasks kept, tasks wanted, what happens now)
MAX_FIX_LINES = 200  # a revert commit with a larger non-test diff is not a task
MAX_PER_FUNCTION = 2


@dataclass(frozen=True)
class MineConfig:
    kinds: tuple[str, ...] = KINDS
    max_tasks: int = 20
    since: str | None = None  # revert: only commits after this revision
    rev: str = "HEAD"  # revert: commits reachable from it; mutate: the commit mutated
    python: str = "python"  # the interpreter that runs the repository's tests
    timeout_s: float = 300.0  # per test-suite run; a run past it is killed
    seed: int = 0

    def __post_init__(self) -> None:
        unknown = [k for k in self.kinds if k not in KINDS]
        if unknown or not self.kinds:
            raise ValueError(f"kinds must be a non-empty subset of {KINDS}, not {self.kinds}")
        if self.max_tasks < 1:
            raise ValueError(f"max_tasks must be >= 1, not {self.max_tasks}")
        if self.timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0, not {self.timeout_s}")


def mine_tasks(
    repo_path: str | os.PathLike[str],
    *,
    kinds: tuple[str, ...] | list[str] = KINDS,
    max_tasks: int = 20,
    since: str | None = None,
    rev: str = "HEAD",
    python: str = "python",
    timeout_s: float = 300.0,
    seed: int = 0,
    on_progress: Progress | None = None,
) -> list[TaskRecord]:
    """Validated tasks from the repository's history (revert) and mutations (mutate)."""
    config = MineConfig(tuple(kinds), max_tasks, since, rev, python, timeout_s, seed)
    return _Miner(Path(repo_path), config, on_progress or (lambda *_: None)).run()


class _Miner:
    def __init__(self, path: Path, config: MineConfig, progress: Progress) -> None:
        self.repo = gitrepo.open_repo(path)
        self.config = config
        self.progress = progress
        self.name = Path(self.repo.working_tree_dir or path).name
        self.label = gitrepo.repo_name(self.repo)
        self.head = gitrepo.resolve(self.repo, config.rev)
        self.tasks: list[TaskRecord] = []
        self.scratch = Path(tempfile.mkdtemp(prefix="apprentice-mine-"))

    def run(self) -> list[TaskRecord]:
        try:
            self._say("running the test suite at " + self.head.hexsha[:7])
            baseline = self._baseline()
            wanted = self.config.max_tasks
            if "revert" in self.config.kinds:
                quota = -(-wanted // len(self.config.kinds))
                self._mine_reverts(quota)
            if "mutate" in self.config.kinds:
                self._mine_mutations(wanted - len(self.tasks), baseline)
        finally:
            _remove(self.scratch)
        self._say(f"done: {len(self.tasks)} tasks")
        return self.tasks

    # --- the suite at `rev` ------------------------------------------------------------------

    def _baseline(self) -> TestRun:
        files = [b.path for b in self.head.tree.traverse() if b.type == "blob"]
        if not any(is_test_path(f) and f.endswith(".py") for f in files):
            raise MiningError(
                f"{self.repo.working_tree_dir}: no tests at {self.head.hexsha[:7]} (mining needs "
                "a pytest suite: test_*.py / *_test.py files or a tests/ folder)"
            )
        root = self._export(self.head.hexsha, "baseline")
        run = self._run(root)
        where = f"at {self.head.hexsha[:7]} with {self.config.python}"
        if run.timed_out:
            hung = f": {run.hung} never finished" if run.hung else ""
            raise MiningError(
                f"the test suite {where} ran past {self.config.timeout_s:g} s and was killed"
                f"{hung}. Fix or skip the hung test, or raise the timeout."
            )
        if not any(outcome == "passed" for outcome in run.outcomes.values()):
            raise MiningError(
                f"no test passes {where} (exit code {run.returncode}); does that interpreter "
                f"have pytest and the repository's dependencies? Last output:\n{run.output[-1500:]}"
            )
        return run

    # --- revert ------------------------------------------------------------------------------

    def _mine_reverts(self, quota: int) -> None:
        found, attempts = 0, 3 * quota + 10
        for commit in gitrepo.commits(self.repo, self.config.rev, self.config.since):
            if found >= quota or attempts <= 0:
                return
            parts = gitrepo.split_commit(self.repo, commit)
            if parts is None or parts.binary or not parts.test_files:
                continue
            if not any(f.endswith(".py") for f in parts.code_files):
                continue
            if gitrepo.changed_lines(parts.code_patch) > MAX_FIX_LINES:
                continue
            self._say(f"revert {commit.hexsha[:7]}: running the tests before and after")
            attempts -= 1
            found += self._check_revert(commit, parts)

    def _check_revert(self, commit: git.Commit, parts: gitrepo.CommitParts) -> int:
        parent = commit.parents[0].hexsha
        root = self._export(parent, f"revert-{commit.hexsha[:7]}")
        try:
            gitrepo.apply_patch(root, parts.test_patch)
            before = self._run(root)
            gitrepo.apply_patch(root, parts.code_patch)
            after = self._run(root)
            test_files = _test_files(root)
        except MiningError as error:  # a patch that does not apply in isolation
            self._say(f"revert {commit.hexsha[:7]} skipped: {error}")
            return 0
        finally:
            _remove(root)
        record = self._record("revert", parent, commit.hexsha, before, after, test_files,
                              patch=parts.code_patch, test_patch=parts.test_patch,
                              functions=statements.patch_functions(parts.code_patch))  # fmt: skip
        return record is not None

    # --- mutate ------------------------------------------------------------------------------

    def _mine_mutations(self, quota: int, baseline: TestRun) -> None:
        if quota <= 0:
            return
        root = self._export(self.head.hexsha, "mutate")
        candidates = self._mutation_candidates(root)
        per_function: dict[tuple[str, str], int] = {}
        attempts = 4 * quota + 8
        for mutation in candidates:
            if quota <= 0 or attempts <= 0:
                break
            key = (mutation.path, mutation.function)
            if per_function.get(key, 0) >= MAX_PER_FUNCTION:
                continue
            attempts -= 1
            self._say(f"mutate {mutation.path}: {mutation.description}")
            target = root / mutation.path
            original = target.read_text(encoding="utf-8")
            target.write_text(mutation.source, encoding="utf-8")
            try:
                before = self._run(root)
            finally:
                target.write_text(original, encoding="utf-8")
            kept = self._record_mutation(mutation, original, before, baseline, root)
            per_function[key] = per_function.get(key, 0) + kept
            quota -= kept
        _remove(root)

    def _mutation_candidates(self, root: Path) -> list[Mutation]:
        files = gitrepo.read_text_files(root)
        tests_text = "\n".join(t for p, t in files.items() if is_test_path(p))
        named, others = [], []
        for path, text in sorted(files.items()):
            if not path.endswith(".py") or is_test_path(path):
                continue
            for mutation in mutations(path, text, seed=self.config.seed):
                short = mutation.function.rpartition(".")[2]
                named_in_tests = re.search(rf"\b{re.escape(short)}\b", tests_text)
                (named if named_in_tests else others).append(mutation)
        return _interleave(named) + _interleave(others)

    def _record_mutation(
        self, mutation: Mutation, original: str, before: TestRun, after: TestRun, root: Path
    ) -> int:
        bug_patch = unified_diff(original, mutation.source, mutation.path, git=True)
        patch = unified_diff(mutation.source, original, mutation.path, git=True)
        record = self._record("mutate", self.head.hexsha, self.head.hexsha, before, after,
                              _test_files(root), patch=patch, test_patch="",
                              functions=[mutation.function], bug_patch=bug_patch)  # fmt: skip
        return record is not None

    # --- shared ------------------------------------------------------------------------------

    def _record(self, kind: str, base: str, source: str, before: TestRun, after: TestRun,
                test_files: dict[str, str], *, patch: str, test_patch: str,
                functions: list[str], bug_patch: str = "") -> TaskRecord | None:  # fmt: skip
        if before.timed_out or after.timed_out:
            self._say(f"{kind} {source[:7]} skipped: a test run timed out")
            return None
        passed_after = [n for n, o in after.outcomes.items() if o == "passed"]
        fail_to_pass = sorted(n for n in passed_after if before.outcomes.get(n) != "passed")
        pass_to_pass = sorted(n for n in passed_after if before.outcomes.get(n) == "passed")
        if not fail_to_pass:
            self._say(f"{kind} {source[:7]} skipped: no test fails before and passes after")
            return None
        number = sum(t.instance_id.startswith(f"{self.name}__{kind}-{source[:7]}-")
                     for t in self.tasks)  # fmt: skip
        instance_id = f"{self.name}__{kind}-{source[:7]}-{number}"
        messages = {n: before.messages.get(n, "") for n in fail_to_pass}
        for nodeid in fail_to_pass:  # a test whose module failed to import: that message
            module = nodeid.partition("::")[0]
            messages[nodeid] = messages[nodeid] or before.messages.get(module, "")
        record = TaskRecord(
            instance_id=instance_id,
            repo=self.label,
            base_commit=base,
            patch=patch,
            test_patch=test_patch,
            FAIL_TO_PASS=fail_to_pass,
            PASS_TO_PASS=pass_to_pass,
            problem_statement=statements.precise_statement(
                fail_to_pass, messages, gitrepo.patch_files(patch)
            ),
            problem_statement_vague=statements.vague_statement(
                fail_to_pass, functions, instance_id
            ),
            kind=kind,
            difficulty=statements.difficulty(patch),
            test_command=list(TEST_COMMAND),
            bug_patch=bug_patch,
            test_files=test_files,
        )
        self.tasks.append(record)
        self._say(f"kept {instance_id} ({len(fail_to_pass)} FAIL_TO_PASS)")
        return record

    def _export(self, commit: str, label: str) -> Path:
        root = self.scratch / label
        _remove(root)
        root.mkdir(parents=True)
        gitrepo.export_tree(self.repo, commit, root)
        return root

    def _run(self, root: Path) -> TestRun:
        try:
            return run_tests(root, self.config.python, timeout_s=self.config.timeout_s)
        except FileNotFoundError as error:
            raise MiningError(str(error)) from None

    def _say(self, message: str) -> None:
        self.progress(len(self.tasks), self.config.max_tasks, message)


def _test_files(root: Path) -> dict[str, str]:
    """The text of every test file in the (fixed) tree: what grading restores."""
    files = gitrepo.read_text_files(root)
    return {path: text for path, text in files.items() if is_test_path(path)}


def _interleave(found: list[Mutation]) -> list[Mutation]:
    """Round-robin over functions, so the first tasks touch different functions."""
    groups: dict[tuple[str, str], list[Mutation]] = {}
    for mutation in found:
        groups.setdefault((mutation.path, mutation.function), []).append(mutation)
    ordered, queues = [], list(groups.values())
    while queues:
        ordered += [queue.pop(0) for queue in queues]
        queues = [queue for queue in queues if queue]
    return ordered


def _remove(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
