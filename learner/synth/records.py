"""Task records in the SWE-bench format, and their JSONL files.

    records = read_tasks("tasks.jsonl")
    write_tasks("tasks.jsonl", records)  # atomic: a temp file, then os.replace
    files = starting_tree(records[0], "/path/to/repo")  # path -> text of the starting files

A task starts from `base_commit` + `test_patch` (+ `bug_patch` for a mutate task, the diff that
introduces the mutation); `patch` is the reference fix on those files. `FAIL_TO_PASS` fail
there and pass with `patch`; `PASS_TO_PASS` pass both ways. `test_files` holds the text of
every test file the tests need (as in the fixed state), restored before grading so that editing
a test cannot earn reward. The starting tree is not stored: `starting_tree` rebuilds it from
the source repository (git blobs of `base_commit`, then the patches applied with `git apply`).
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterable
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

KINDS = ("revert", "mutate")
DIFFICULTIES = ("easy", "medium", "hard")
STYLES = ("dictated", "located", "precise", "vague")  # easiest first
TEST_COMMAND = [
    "python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "--continue-on-collection-errors",
    "--rootdir=.",
]  # fmt: skip


class RecordError(ValueError):
    """A task file or record that cannot be read: the message names the file, line and field."""


@dataclass(frozen=True)
class TaskRecord:
    instance_id: str  # "<repo-name>__<kind>-<short sha>-<n>"
    repo: str  # the repository's folder name (or its remote URL when it has one)
    base_commit: str  # sha
    patch: str  # the reference fix (unified diff, git apply-able) on the starting files
    test_patch: str  # diff adding/changing test files (applied to base_commit)
    FAIL_TO_PASS: list[str]  # pytest node ids
    PASS_TO_PASS: list[str]
    problem_statement: str  # precise style
    problem_statement_vague: str
    kind: str  # "revert" | "mutate"
    difficulty: str  # "easy" | "medium" | "hard"
    test_command: list[str]  # node ids are appended; "python" is replaced by the interpreter
    bug_patch: str = ""  # mutate only: the diff that introduces the mutation
    test_files: dict[str, str] = field(default_factory=dict)  # path -> text, restored to grade

    def __post_init__(self) -> None:
        problems = []
        if self.kind not in KINDS:
            problems.append(f"kind must be one of {KINDS}, not {self.kind!r}")
        if self.difficulty not in DIFFICULTIES:
            problems.append(f"difficulty must be one of {DIFFICULTIES}, not {self.difficulty!r}")
        if not self.instance_id:
            problems.append("instance_id is empty")
        if not self.FAIL_TO_PASS:
            problems.append("FAIL_TO_PASS is empty: a task needs at least one failing test")
        if not self.test_command:
            problems.append("test_command is empty")
        if self.kind == "mutate" and not self.bug_patch:
            problems.append("a mutate task needs its bug_patch")
        if problems:
            raise RecordError(f"task {self.instance_id!r}: " + "; ".join(problems))

    def statement(self, style: str = "precise") -> str:
        """The problem statement in a style: "dictated", "located", "precise" or "vague"
        (statements.py)."""
        if style not in STYLES:
            raise ValueError(f"style must be one of {STYLES}, not {style!r}")
        if style in ("dictated", "located"):
            from learner.synth.statements import FROM_PATCH

            return FROM_PATCH[style](self.problem_statement, self.patch)
        return self.problem_statement if style == "precise" else self.problem_statement_vague

    def tier(self, style: str = "precise") -> str:
        """The difficulty when the task is given in `style`: a vague text is one tier harder."""
        if style not in STYLES:
            raise ValueError(f"style must be one of {STYLES}, not {style!r}")
        index = DIFFICULTIES.index(self.difficulty) + (style == "vague")
        return DIFFICULTIES[min(index, len(DIFFICULTIES) - 1)]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TaskRecord:
        if not isinstance(data, dict):
            raise RecordError(f"a task record is a JSON object, not {type(data).__name__}")
        names = {f.name for f in fields(cls)}
        required = {
            f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING
        }
        missing = sorted(required - data.keys())
        if missing:
            raise RecordError(f"task {data.get('instance_id', '?')!r} lacks {', '.join(missing)}")
        kwargs = {k: v for k, v in data.items() if k in names}  # unknown keys are ignored
        for name in ("FAIL_TO_PASS", "PASS_TO_PASS", "test_command"):
            value = kwargs[name]
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise RecordError(f"task {kwargs['instance_id']!r}: {name} must be a list of str")
        test_files = kwargs.get("test_files", {})
        if not isinstance(test_files, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in test_files.items()
        ):
            raise RecordError(f"task {kwargs['instance_id']!r}: test_files must map str to str")
        return cls(**kwargs)


def read_tasks(path: str | os.PathLike[str]) -> list[TaskRecord]:
    """The records of a JSONL file (blank lines skipped); RecordError names the bad line."""
    path = Path(path)
    if not path.is_file():
        raise RecordError(f"{path}: no such task file")
    records = []
    seen: set[str] = set()
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = TaskRecord.from_dict(json.loads(line))
        except (json.JSONDecodeError, RecordError, TypeError) as error:
            raise RecordError(f"{path}:{number}: {error}") from None
        if record.instance_id in seen:
            raise RecordError(f"{path}:{number}: duplicate instance_id {record.instance_id!r}")
        seen.add(record.instance_id)
        records.append(record)
    return records


def write_tasks(path: str | os.PathLike[str], records: Iterable[TaskRecord]) -> Path:
    """Write the records as JSONL, atomically (a temp file beside it, then os.replace)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(r.to_dict(), ensure_ascii=False) + "\n" for r in records)
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise
    return path


def starting_tree(record: TaskRecord, repo_path: str | os.PathLike[str]) -> dict[str, str]:
    """Path -> text of the task's starting files (text files only, no .git), rebuilt from the
    source repository: `base_commit`'s tree, then `test_patch`, then `bug_patch` applied."""
    from learner.synth.gitrepo import build_tree  # git stays out of plain record reading

    patches = [record.test_patch, record.bug_patch]
    return build_tree(repo_path, record.base_commit, [p for p in patches if p])
