"""Git reading for completion tasks (learner/synth/completion.py): which commits add lines to
source files, each added hunk's line numbers, and a file's text at a commit.

    found = source_commits(repo, "HEAD", max_commits=2000)  # newest first, merges skipped
    spans = added_hunks(repo, found[0].sha, found[0].paths)  # path -> [Hunk, ...]
    text = file_text(repo, found[0].parent, "shop/prices.py")  # None: missing, binary, huge

One `git log --numstat` lists the commits (cheap on a long history); the hunks come from
`git diff-tree -U0` against the commit's parent (`--root`: a root commit adds whole files).
Only commits are read, never the working tree. A source file is one whose suffix names a
language (feedback.queries.stats.LANGUAGES, the dashboard's list, prose left out).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath

import git

from feedback.queries.stats import LANGUAGES

# Suffix -> language id (the editor's languageId, which the inline prompt's header reads).
LANGUAGE_OF = {s: lang for lang, found in LANGUAGES.items() if lang != "markdown" for s in found}
MAX_FILE_BYTES = 100_000  # a larger file is generated or data, not code a person types
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


@dataclass(frozen=True)
class SourceCommit:
    sha: str
    time: int  # committer time, seconds since the epoch (the time split orders by it)
    parent: str | None  # None: a root commit (its files are new)
    paths: tuple[str, ...]  # source files it adds lines to


@dataclass(frozen=True)
class Hunk:
    """One change of a file, 0-based: old lines [old_at, old_at + removed) were replaced by
    new lines [new_at, new_at + added)."""

    old_at: int
    removed: int
    new_at: int
    added: int


def language_of(path: str) -> str | None:
    return LANGUAGE_OF.get(PurePosixPath(path).suffix.lower())


def source_commits(repo: git.Repo, rev: str, max_commits: int) -> list[SourceCommit]:
    """The newest `max_commits` non-merge commits reachable from `rev` that add lines to a
    source file (not binary), newest first."""
    out = repo.git.log(
        "--no-merges", "--no-renames", "--numstat", "--format=%x01%H %ct %P",
        f"--max-count={max_commits}", rev, "--",
    )  # fmt: skip
    found = []
    for block in out.split("\x01")[1:]:
        header, *rows = block.strip("\n").split("\n")
        sha, time, *parents = header.split()
        paths = []
        for row in rows:
            added, _, path = (row.split("\t", 2) + ["", ""])[:3]
            # "-": binary; a quoted path has characters git escapes (left out, rare)
            adds = added.isdigit() and int(added) > 0 and not path.startswith('"')
            if adds and language_of(path) is not None:
                paths.append(path)
        if paths:
            found.append(SourceCommit(sha, int(time), parents[0] if parents else None,
                                      tuple(sorted(paths))))  # fmt: skip
    return found


def added_hunks(repo: git.Repo, sha: str, paths: tuple[str, ...]) -> dict[str, list[Hunk]]:
    """Path -> the hunks of `sha` against its parent that add lines (zero context lines)."""
    if not paths:
        return {}
    out = repo.git.diff_tree(
        "-p", "-r", "-U0", "--root", "--no-commit-id", "--no-renames", "--no-color",
        "--no-ext-diff", sha, "--", *paths,
    )  # fmt: skip
    found: dict[str, list[Hunk]] = {}
    path, in_header = None, False
    for line in out.split("\n"):
        if line.startswith("diff --git "):
            path, in_header = None, True
        elif in_header and line.startswith("+++ "):
            target = line[4:]
            path = target[2:] if target.startswith("b/") else None  # /dev/null: deleted
        elif line.startswith("@@ ") and (match := _HUNK.match(line)) is not None:
            in_header = False
            old, removed, new, added = (int(g) if g is not None else 1 for g in match.groups())
            if path is not None and added > 0:
                old_at = old if removed == 0 else old - 1  # -U0 names the line before an insert
                found.setdefault(path, []).append(Hunk(old_at, removed, new - 1, added))
    return found


def file_text(repo: git.Repo, sha: str | None, path: str) -> str | None:
    """The file's UTF-8 text at `sha` ("" when `sha` is None or lacks it: a new file), None
    when it is binary, not UTF-8 or over MAX_FILE_BYTES."""
    if sha is None:
        return ""
    try:
        blob = repo.commit(sha).tree / path
    except KeyError:
        return ""
    if blob.type != "blob" or blob.size > MAX_FILE_BYTES:
        return None
    try:
        text = blob.data_stream.read().decode("utf-8")
    except UnicodeDecodeError:
        return None
    return None if "\x00" in text else text
