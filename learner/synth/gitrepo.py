"""Read-only git helpers for mining (gitpython): open and check a repository, walk commits,
split a commit's diff into test and non-test parts, and export a commit's files to a folder.

Nothing here writes to the person's repository or its working tree: trees are exported by
reading blobs, and patches are applied with `git apply` in the exported folder (outside any
repository). A diff between two texts of one file is agent_server.agent.edits.diff's
`unified_diff(before, after, path, git=True)`, the form `apply_patch` and `patch_files` read.

    repo = open_repo("/path/to/repo")  # MiningError: not a repository, no commits, dirty
    parts = split_commit(repo, commit)  # .code_patch, .test_patch, .code_files, .test_files
    export_tree(repo, commit.hexsha, dest); apply_patch(dest, parts.test_patch)
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import git

from learner.synth.paths import is_test_path


class MiningError(RuntimeError):
    """Bad input for mining or verification, with a message a person can act on."""


def open_repo(path: str | os.PathLike[str], *, allow_dirty: bool = False) -> git.Repo:
    """The repository at `path`, checked: a git repository, with commits, a clean tree."""
    path = Path(path).expanduser()
    if not path.is_dir():
        raise MiningError(f"{path}: no such directory")
    try:
        repo = git.Repo(path, search_parent_directories=False)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        message = f"{path}: not a git repository (run mining on a repository's root folder)"
        raise MiningError(message) from None
    if repo.bare:
        raise MiningError(f"{path}: a bare repository has no working tree to mine")
    if not repo.head.is_valid():
        raise MiningError(f"{path}: the repository has no commits yet (no history to mine)")
    if not allow_dirty and repo.is_dirty(index=True, working_tree=True, untracked_files=False):
        changed = sorted({d.a_path for d in repo.index.diff(None)} | _staged(repo))
        listed = ", ".join(changed[:5]) + (" ..." if len(changed) > 5 else "")
        raise MiningError(
            f"{path}: the working tree has uncommitted changes ({listed}); commit or stash "
            "them first: tasks are mined from commits, and a dirty tree says they may be stale"
        )
    return repo


def _staged(repo: git.Repo) -> set[str]:
    try:
        return {d.a_path for d in repo.index.diff("HEAD")}
    except git.GitCommandError:
        return set()


def repo_name(repo: git.Repo) -> str:
    """The remote URL of `origin` when there is one, else the folder's name."""
    try:
        return next(iter(repo.remote("origin").urls))
    except (ValueError, StopIteration, git.GitCommandError):
        return Path(repo.working_tree_dir or repo.git_dir).name


def resolve(repo: git.Repo, rev: str) -> git.Commit:
    try:
        return repo.commit(rev)
    except (git.BadName, ValueError, git.GitCommandError):
        raise MiningError(f"{rev!r}: no such revision in {repo.working_tree_dir}") from None


def commits(repo: git.Repo, rev: str = "HEAD", since: str | None = None) -> list[git.Commit]:
    """Non-merge commits reachable from `rev`, newest first; with `since`, only those after it."""
    head = resolve(repo, rev)
    spec = f"{resolve(repo, since).hexsha}..{head.hexsha}" if since else head.hexsha
    return list(repo.iter_commits(spec, no_merges=True))


@dataclass(frozen=True)
class CommitParts:
    code_patch: str  # the commit's diff on non-test files
    test_patch: str  # the commit's diff on test files
    code_files: tuple[str, ...]
    test_files: tuple[str, ...]
    binary: bool  # the diff touches a binary file (such a commit is not mined)


def split_commit(repo: git.Repo, commit: git.Commit) -> CommitParts | None:
    """The commit's diff against its first parent, split; None for a root commit."""
    if not commit.parents:
        return None
    parent = commit.parents[0]
    diffs = parent.diff(commit, create_patch=False)
    paths = sorted({p for d in diffs for p in (d.a_path, d.b_path) if p})
    tests = tuple(p for p in paths if is_test_path(p))
    code = tuple(p for p in paths if not is_test_path(p))
    binary = any(_is_binary_diff(repo, parent, commit, p) for p in paths)
    return CommitParts(
        code_patch=diff_paths(repo, parent.hexsha, commit.hexsha, code),
        test_patch=diff_paths(repo, parent.hexsha, commit.hexsha, tests),
        code_files=code,
        test_files=tests,
        binary=binary,
    )


def _is_binary_diff(repo: git.Repo, a: git.Commit, b: git.Commit, path: str) -> bool:
    numstat = repo.git.diff("--numstat", "--no-renames", a.hexsha, b.hexsha, "--", path)
    return numstat.startswith("-\t-\t")


def diff_paths(repo: git.Repo, a: str, b: str, paths: tuple[str, ...]) -> str:
    """`git diff a b -- paths` (git apply-able, with its final newline); "" without paths."""
    if not paths:
        return ""
    return repo.git.diff(
        "--no-color", "--no-ext-diff", "--no-renames", "--full-index", a, b, "--", *paths,
        strip_newline_in_stdout=False,
    )  # fmt: skip


def export_tree(repo: git.Repo, commit: str, dest: Path) -> None:
    """Write the files of `commit` under `dest` (regular files and symlinks; no submodules)."""
    for item in repo.commit(commit).tree.traverse():
        if item.type != "blob":
            continue
        target = dest / item.path
        target.parent.mkdir(parents=True, exist_ok=True)
        data = item.data_stream.read()
        if item.mode == 0o120000:
            os.symlink(data.decode("utf-8", "surrogateescape"), target)
            continue
        target.write_bytes(data)
        if item.mode & 0o111:
            target.chmod(0o755)


def apply_patch(root: Path, patch: str, *, reverse: bool = False) -> None:
    """`git apply` the patch in `root` (a plain folder, never the person's repository)."""
    if not patch:
        return
    command = ["git", "apply", "--whitespace=nowarn"] + (["--reverse"] if reverse else [])
    env = dict(os.environ, GIT_CEILING_DIRECTORIES=str(Path(root).resolve().parent))
    done = subprocess.run(
        command, cwd=root, input=patch.encode("utf-8"), capture_output=True, env=env, timeout=60
    )
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip()
        raise MiningError(f"a patch does not apply in {root}: {message}")


def read_text_files(root: Path) -> dict[str, str]:
    """Path -> text of every UTF-8 file under `root` (no .git, no symlinks)."""
    files = {}
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if ".git" in relative.parts or path.is_symlink() or not path.is_file():
            continue
        try:
            files[relative.as_posix()] = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
    return files


def build_tree(
    repo_path: str | os.PathLike[str], commit: str, patches: list[str]
) -> dict[str, str]:
    """Path -> text of `commit`'s files with `patches` applied in order."""
    repo = open_repo(repo_path, allow_dirty=True)  # only commits are read
    with tempfile.TemporaryDirectory(prefix="apprentice-tree-") as scratch:
        root = Path(scratch) / "tree"
        root.mkdir()
        export_tree(repo, commit, root)
        for patch in patches:
            apply_patch(root, patch)
        return read_text_files(root)


def changed_lines(patch: str) -> int:
    """Lines added plus lines removed in a unified diff."""
    count, in_hunk = 0, False
    for line in patch.splitlines():
        if line.startswith("diff --git"):
            in_hunk = False
        elif line.startswith("@@"):
            in_hunk = True
        elif in_hunk and line.startswith(("+", "-")):
            count += 1
    return count


def patch_files(patch: str) -> list[str]:
    """The paths a git-style diff touches."""
    return [line.split(" b/", 1)[1] for line in patch.splitlines() if line.startswith("diff --git")]
