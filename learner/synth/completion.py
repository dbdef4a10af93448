"""Inline-completion tasks mined from a repository's git history (issue 37).

    tasks = mine_completion_tasks("/path/to/repo", max_tasks=200, heldout_share=0.2)
    write_completion_tasks("completions.jsonl", tasks); read_completion_tasks(...)
    completion_reward(task, "return total")  # learner/synth/completion_reward.py

A task is a cursor in a file as a commit's author had it, and what they typed there. Each
hunk that adds lines to a source file (completion_git.py: merges, binary, non-code and
over-100-KB files skipped) is taken on its own: the file before the commit with that one
hunk applied, so nothing else of the commit leaks into the context. Categories:
- next_line: the cursor at the start of an added line (the editor's empty new line: the
  suffix starts with its line break); the answer is that line and the added lines after it,
  up to 3, up to a blank line (where the product's block stops end a suggestion).
  prefix + answer + suffix is the file after the commit whenever the commit changed that
  file in one hunk.
- rest_of_line: the cursor inside an added line, after a space or one of `.([{,=:` past its
  indentation (never inside `==` or `=>`); the prefix holds the line's start, the answer
  its rest (>= 2 characters).
- quiet: the cursor at the end of an unchanged, non-blank line of the file before the
  commit, 3 lines or more from anything the commit changed in it, with the next line
  already there. The author had the file open and wrote nothing there: anything suggested
  is wrong, and the right completion is none (answer "").
Per commit at most `per_commit` positions, drawn with a generator seeded by (seed, commit)
from each category in turn (next_line, rest_of_line, quiet); commits are visited in a
seeded order until `max_tasks` are found, so the splits keep their share of commits.
Split: `heldout-time` for the newest `heldout_share` of the listed commits (by committer
time, rounded up), else `heldout-file` for a path whose stable hash falls in
`heldout_file_share`, else `train`: a train task never comes from a held-out commit or file.
Same repository and arguments, same tasks. Tested in tests/learner/synth/test_completion_tasks.py.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, fields
from datetime import UTC, datetime
from pathlib import Path

import git

from learner.synth import gitrepo
from learner.synth.completion_git import (
    Hunk,
    SourceCommit,
    added_hunks,
    file_text,
    language_of,
    source_commits,
)
from learner.synth.gitrepo import MiningError
from learner.synth.records import write_tasks

__all__ = ["CompletionTask", "MineConfig", "mine_completion_tasks", "MiningError"]

CATEGORIES = ("next_line", "rest_of_line", "quiet")
SPLITS = ("train", "heldout-time", "heldout-file")
MAX_ANSWER_LINES = 3
MAX_LINE_CHARS = 200  # a longer line is data or generated, not typed
QUIET_DISTANCE = 3  # lines between a quiet cursor and anything the commit changed
BREAKS = " .([{,=:"  # a rest_of_line cursor sits right after one of these
Progress = Callable[[int, int, str], None]  # (commits done, commits to visit, message)
Lines = list[str]  # a file's lines, each with its line break


@dataclass(frozen=True)
class CompletionTask:
    id: str  # stable: a hash of commit, path, category, cursor offset and answer
    repo: str
    commit: str
    commit_time: str  # ISO 8601, UTC
    path: str
    language: str
    prefix: str  # the file before the cursor
    suffix: str  # the file after the cursor (the product's prompt decides how much is read)
    answer: str  # what the author typed ("" for quiet)
    category: str
    split: str

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


@dataclass(frozen=True)
class MineConfig:
    max_tasks: int = 200
    per_commit: int = 5
    heldout_share: float = 0.2  # newest commits held out
    heldout_file_share: float = 0.1  # files held out in every commit, by a hash of the path
    splits: tuple[str, ...] = SPLITS  # the splits to mine (`eval completions`: heldout-time)
    max_commits: int = 2000  # the newest commits that add source lines, listed and split
    rev: str = "HEAD"
    seed: int = 0

    def __post_init__(self) -> None:
        if self.max_tasks < 1 or self.per_commit < 1 or self.max_commits < 1:
            raise ValueError("max_tasks, per_commit and max_commits must be >= 1")
        for share in (self.heldout_share, self.heldout_file_share):
            if not 0.0 <= share < 1.0:
                raise ValueError(f"a held-out share is between 0 and 1 (not 1), not {share}")
        if not self.splits or not set(self.splits) <= set(SPLITS):
            raise ValueError(f"splits must be a non-empty subset of {SPLITS}, not {self.splits}")


def mine_completion_tasks(
    repo_path: str | os.PathLike[str], *, on_progress: Progress | None = None, **options: object
) -> list[CompletionTask]:
    """Completion tasks of the repository's history (MineConfig's fields as options);
    MiningError when it is not a repository or no commit adds lines to a source file."""
    config = MineConfig(**options)  # type: ignore[arg-type]
    repo = gitrepo.open_repo(repo_path, allow_dirty=True)  # only commits are read
    commits = source_commits(repo, config.rev, config.max_commits)
    if not commits:
        raise MiningError(f"{repo_path}: no commit adds lines to a source file")
    held = heldout_by_time(commits, config.heldout_share)
    others = bool({"train", "heldout-file"} & set(config.splits))  # from commits not held
    wanted = [c for c in commits if (c.sha in held and "heldout-time" in config.splits)
              or (c.sha not in held and others)]  # fmt: skip
    order = sorted(wanted, key=lambda c: c.sha)
    random.Random(config.seed).shuffle(order)
    say = on_progress or (lambda *_: None)
    label, tasks = gitrepo.repo_name(repo), []
    for number, commit in enumerate(order, 1):
        split = "heldout-time" if commit.sha in held else None
        tasks += _commit_tasks(repo, label, commit, split, config)
        say(number, len(order), f"{commit.sha[:7]}: {len(tasks)} tasks")
        if len(tasks) >= config.max_tasks:
            break
    if not tasks:
        raise MiningError(f"{repo_path}: no completion task in {len(order)} commits")
    tasks = sorted(tasks[: config.max_tasks], key=lambda t: (t.commit, t.path, len(t.prefix)))
    return sorted(tasks, key=lambda t: t.commit_time, reverse=True)  # newest first


def heldout_by_time(commits: list[SourceCommit], share: float) -> set[str]:
    """The newest `share` of the commits (rounded up), by committer time."""
    newest = sorted(commits, key=lambda c: (c.time, c.sha), reverse=True)
    return {c.sha for c in newest[: math.ceil(round(share * len(commits), 9))]}


def heldout_by_file(path: str, share: float) -> bool:
    """A stable hash of the path, below `share`: this file is held out in every commit."""
    return int(hashlib.sha256(path.encode()).hexdigest()[:8], 16) < share * 2**32


@dataclass(frozen=True)
class _Spot:
    """A cursor to make a task at: `line` of `lines`, `count` answer lines or a `cut`."""

    category: str
    path: str
    lines: Lines
    line: int
    count: int = 1
    cut: int | None = None  # rest_of_line: the answer starts at this column


def _commit_tasks(
    repo: git.Repo, label: str, commit: SourceCommit, split: str | None, config: MineConfig
) -> list[CompletionTask]:
    splits = {p: split or ("heldout-file" if heldout_by_file(p, config.heldout_file_share)
                           else "train") for p in commit.paths}  # fmt: skip
    paths = tuple(p for p in commit.paths if splits[p] in config.splits)
    spots: dict[str, list[_Spot]] = {c: [] for c in CATEGORIES}
    rng = random.Random(f"{config.seed}:{commit.sha}")
    for path, hunks in sorted(added_hunks(repo, commit.sha, paths).items()):
        old, new = file_text(repo, commit.parent, path), file_text(repo, commit.sha, path)
        if old is None or new is None:
            continue
        for spot in _spots(path, _lines(old), _lines(new), hunks, rng):
            spots[spot.category].append(spot)
    for found in spots.values():
        rng.shuffle(found)
    chosen: list[_Spot] = []
    while len(chosen) < config.per_commit and any(spots.values()):
        for category in CATEGORIES:
            if spots[category] and len(chosen) < config.per_commit:
                chosen.append(spots[category].pop())
    when = datetime.fromtimestamp(commit.time, tz=UTC).isoformat()
    return [_task(spot, label, commit.sha, when, splits[spot.path]) for spot in chosen]


def _spots(
    path: str, old: Lines, new: Lines, hunks: list[Hunk], rng: random.Random
) -> Iterable[_Spot]:
    for hunk in hunks:
        lines = old[: hunk.old_at] + new[hunk.new_at : hunk.new_at + hunk.added]
        lines += old[hunk.old_at + hunk.removed :]
        end = hunk.old_at + hunk.added
        for at in range(hunk.old_at, end):
            text = _body(lines[at])
            if not text.strip() or len(text) > MAX_LINE_CHARS:
                continue
            count = 1
            while at + count < end and count < MAX_ANSWER_LINES and _typed(lines[at + count]):
                count += 1
            yield _Spot("next_line", path, lines, at, count)
            indent = len(text) - len(text.lstrip())
            cuts = [c for c in range(indent + 1, len(text)) if text[c - 1] in BREAKS
                    and text[c] not in "=>" and len(text[c:].strip()) >= 2
                    and text[indent:c].strip()]  # fmt: skip
            if cuts:
                yield _Spot("rest_of_line", path, lines, at, cut=rng.choice(cuts))
    touched = [(h.old_at - QUIET_DISTANCE, h.old_at + h.removed + QUIET_DISTANCE) for h in hunks]
    for at in range(len(old) - 1):  # the next line must exist
        if _typed(old[at]) and not any(lo <= at < hi for lo, hi in touched):
            yield _Spot("quiet", path, old, at)


def _lines(text: str) -> Lines:
    """The lines as git counts them (split at "\n" only; str.splitlines splits at more)."""
    parts = text.split("\n")
    return [part + "\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def _typed(line: str) -> bool:
    """A non-blank line of ordinary length."""
    return bool(line.strip()) and len(_body(line)) <= MAX_LINE_CHARS


def _body(line: str) -> str:
    return line.rstrip("\r\n")


def _task(spot: _Spot, label: str, sha: str, when: str, split: str) -> CompletionTask:
    lines, at = spot.lines, spot.line
    before = "".join(lines[:at])
    if spot.category == "next_line":
        typed = "".join(lines[at : at + spot.count])
        answer = _body(typed)
        prefix, suffix = before, typed[len(answer) :] + "".join(lines[at + spot.count :])
    else:
        text = _body(lines[at])
        cut = len(text) if spot.cut is None else spot.cut  # quiet: the end of the line
        prefix, answer = before + text[:cut], text[cut:]
        suffix = lines[at][len(text) :] + "".join(lines[at + 1 :])
    key = f"{sha}\0{spot.path}\0{spot.category}\0{len(prefix)}\0{answer}"
    return CompletionTask(
        id="cmp-" + hashlib.sha256(key.encode()).hexdigest()[:16], repo=label, commit=sha,
        commit_time=when, path=spot.path, language=language_of(spot.path) or "",
        prefix=prefix, suffix=suffix, answer=answer, category=spot.category, split=split,
    )  # fmt: skip


def write_completion_tasks(path: str | os.PathLike[str], tasks: list[CompletionTask]) -> Path:
    """JSONL, atomically (records.write_tasks only asks each record for `to_dict()`)."""
    return write_tasks(path, tasks)  # type: ignore[arg-type]


def read_completion_tasks(path: str | os.PathLike[str]) -> list[CompletionTask]:
    """The tasks of a JSONL file; ValueError naming the line that is not a task."""
    names = {f.name for f in fields(CompletionTask)}
    tasks = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            if not isinstance(row, dict) or set(row) != names:
                raise ValueError(f"the fields must be {sorted(names)}")
            tasks.append(CompletionTask(**row))
        except ValueError as exc:  # json's errors are ValueErrors too
            raise ValueError(f"{path} line {number}: not a completion task ({exc})") from None
    return tasks


def summary(tasks: list[CompletionTask]) -> dict[str, object]:
    """Tasks per category, per split, and per split and category (what the CLI prints)."""
    count = {c: sum(t.category == c for t in tasks) for c in CATEGORIES}
    splits = {s: sum(t.split == s for t in tasks) for s in SPLITS}
    by_split = {s: {c: sum(t.split == s and t.category == c for t in tasks) for c in CATEGORIES}
                for s in SPLITS}  # fmt: skip
    return {"tasks": len(tasks), "categories": count, "splits": splits, "by_split": by_split}
