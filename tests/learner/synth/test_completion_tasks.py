"""Completion tasks from git history (learner/synth/completion.py) and their reward
(completion_reward.py), on a repository made here with `git` and fixed commit dates.

    .venv/bin/python -m pytest tests/learner/synth/test_completion_tasks.py -q

`make_history(path)` (the CLI tests use it too): six days, oldest first; every commit
changes each file it touches in one hunk, so a next_line task's prefix + answer + suffix is
the file after its commit.
1. kept.py (total, mean), HELD (a file the path hash holds out), README.md;
2. kept.py: `rounded` appended;      3. kept.py: a line in `total`; HELD: a function;
4. README.md only (no source line);  5. kept.py: `clamp` appended, and a binary file;
6. HELD: a line changed; util.js, new.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from learner.synth.completion import CompletionTask, heldout_by_file, mine_completion_tasks
from learner.synth.completion_reward import (
    NEAR,
    breaks_parse,
    completion_reward,
    edit_similarity,
    repeats,
    similarity,
)
from learner.synth.gitrepo import MiningError

FILE_SHARE = 0.3
# A file name the path hash holds out at FILE_SHARE (found, not hard-coded: the rule decides).
HELD = next(f"held{i}.py" for i in range(100) if heldout_by_file(f"held{i}.py", FILE_SHARE))
KEPT_1 = '''"""Prices."""

import math


def total(items):
    """The sum of price * quantity."""
    result = 0
    for price, quantity in items:
        result += price * quantity
    return result


def mean(values):
    """The average of the values."""
    if not values:
        return 0.0
    return sum(values) / len(values)
'''
ROUNDED = '''

def rounded(amount, places=2):
    """The amount rounded to `places` decimals."""
    scale = 10 ** places
    return math.floor(amount * scale + 0.5) / scale
'''
KEPT_2 = KEPT_1 + ROUNDED
KEPT_3 = KEPT_2.replace("    return result\n", "    result = round(result, 2)\n    return result\n")
KEPT_5 = (
    KEPT_3
    + '''

def clamp(value, low, high):
    """The value, kept between low and high."""
    return max(low, min(value, high))
'''
)
HELD_1 = '"""Names."""\n\n\ndef greet(name):\n    return "hello " + name\n'
HELD_3 = HELD_1 + '\n\ndef shout(text):\n    return text.upper() + "!"\n'
HELD_6 = HELD_3.replace('"hello " + name', 'f"hello {name}"')
UTIL_JS = "export function add(a, b) {\n  const sum = a + b;\n  return sum;\n}\n"


def git(root: Path, *args: str, day: int | None = None) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "Test", "GIT_AUTHOR_EMAIL": "test@example.com",
           "GIT_COMMITTER_NAME": "Test", "GIT_COMMITTER_EMAIL": "test@example.com",
           "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}  # fmt: skip
    if day is not None:
        when = f"2024-03-{day:02d}T12:00:00+00:00"
        env |= {"GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when}
    done = subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True)
    return done.stdout.decode()


def commit(root: Path, files: dict[str, str | bytes], day: int) -> str:
    for name, content in files.items():
        target = root / name
        target.write_bytes(content if isinstance(content, bytes) else content.encode())
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", f"day {day}", day=day)
    return git(root, "rev-parse", "HEAD").strip()


def make_history(path: Path) -> list[str]:
    """The repository above; its commits' shas, oldest first."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q")
    return [
        commit(path, {"kept.py": KEPT_1, HELD: HELD_1, "README.md": "Prices.\n"}, 1),
        commit(path, {"kept.py": KEPT_2}, 2),
        commit(path, {"kept.py": KEPT_3, HELD: HELD_3}, 3),
        commit(path, {"README.md": "Prices and names.\n"}, 4),
        commit(path, {"kept.py": KEPT_5, "logo.png": b"\x89PNG\r\n\x1a\n\x00\x00"}, 5),
        commit(path, {HELD: HELD_6, "util.js": UTIL_JS}, 6),
    ]


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    root = tmp_path_factory.mktemp("completion") / "shop"
    return root, make_history(root)


def mine(root: Path, **options: object) -> list[CompletionTask]:
    defaults: dict[str, object] = {"max_tasks": 500, "per_commit": 12, "heldout_share": 0.4,
                                   "heldout_file_share": FILE_SHARE}  # fmt: skip
    return mine_completion_tasks(root, **(defaults | options))


def test_every_category_from_source_files_only(history: tuple[Path, list[str]]) -> None:
    root, shas = history
    tasks = mine(root)
    assert {t.category for t in tasks} == {"next_line", "rest_of_line", "quiet"}
    assert {t.path for t in tasks} == {"kept.py", HELD, "util.js"}  # no README, no binary
    assert {t.language for t in tasks if t.path == "util.js"} == {"javascript"}
    assert shas[3] not in {t.commit for t in tasks}  # the README-only commit
    assert any(t.commit == shas[4] for t in tasks)  # the binary file skipped, not the commit
    assert len({t.id for t in tasks}) == len(tasks)
    assert tasks == mine(root)  # deterministic
    assert len(mine(root, max_tasks=3)) == 3


def test_the_newest_commits_and_the_hashed_file_are_held_out(
    history: tuple[Path, list[str]],
) -> None:
    root, shas = history
    tasks = mine(root)
    newest = set(shas[4:])  # 5 commits add source lines; 40 % rounded up: days 5 and 6
    assert {t.commit for t in tasks if t.split == "heldout-time"} == newest
    assert all(t.split == "heldout-time" for t in tasks if t.commit in newest)
    train = [t for t in tasks if t.split == "train"]
    assert train and all(t.commit not in newest and t.path != HELD for t in train)
    assert {t.path for t in tasks if t.split == "heldout-file"} == {HELD}
    assert all(a.commit_time >= b.commit_time for a, b in zip(tasks, tasks[1:], strict=False))
    only = mine(root, splits=("heldout-time",))
    assert only and {t.split for t in only} == {"heldout-time"}


def test_a_task_is_the_file_at_its_commit_around_the_cursor(
    history: tuple[Path, list[str]],
) -> None:
    root, _ = history
    tasks = mine(root)
    for task in tasks:
        after = git(root, "show", f"{task.commit}:{task.path}")
        if task.category == "next_line":
            assert task.prefix + task.answer + task.suffix == after
            assert task.prefix.endswith("\n") or not task.prefix
            assert task.suffix.startswith("\n") and task.answer.strip()
            assert len(task.answer.split("\n")) <= 3
        elif task.category == "rest_of_line":
            line = task.prefix.rsplit("\n", 1)[-1] + task.answer
            assert line in after.split("\n") and len(task.answer.strip()) >= 2
        else:  # quiet: the untouched file before the commit, cursor at a line's end
            before = git(root, "show", f"{task.commit}~1:{task.path}")
            assert task.answer == "" and task.prefix + task.suffix == before
            assert task.suffix.startswith("\n") and task.prefix.rsplit("\n", 1)[-1].strip()


def test_bad_repositories_are_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(MiningError, match="not a git repository"):
        mine_completion_tasks(tmp_path)
    git(tmp_path, "init", "-q")
    commit(tmp_path, {"README.md": "Only prose.\n"}, 1)
    with pytest.raises(MiningError, match="no commit adds lines to a source file"):
        mine_completion_tasks(tmp_path)


def task(answer: str, category: str = "next_line") -> CompletionTask:
    return CompletionTask(
        id="t", repo="r", commit="c", commit_time="", path="a.py", language="python",
        prefix="def f(x):\n    y = x + 1\n", suffix="\n", answer=answer, category=category,
        split="train",
    )  # fmt: skip


def test_rewards_of_known_answers() -> None:
    right = task("    return y")
    assert completion_reward(right, "    return y") == 1.0
    assert completion_reward(right, "return y  ") == 1.0  # surrounding whitespace aside
    near = completion_reward(right, "    return y + 1")
    assert 0.5 < near < 1.0 and near == NEAR * similarity(right, "    return y + 1")
    assert completion_reward(right, "print('hello, world')") < 0.3
    assert completion_reward(right, "") == completion_reward(right, "  \n") == 0.0
    quiet = task("", "quiet")
    assert completion_reward(quiet, "") == 1.0 and completion_reward(quiet, "    z = 2") == 0.0


def test_breaking_the_parse_and_repeating_are_penalised() -> None:
    right = task("    return y")
    broken = "    return (y"
    assert breaks_parse(right, broken) and not breaks_parse(right, "    return y + 1")
    assert completion_reward(right, broken) == pytest.approx(NEAR * similarity(right, broken) - 0.5)
    again = "    y = x + 1"  # the line before the cursor, once more
    assert repeats(right, again) and not breaks_parse(right, again)
    assert completion_reward(right, again) == pytest.approx(NEAR * similarity(right, again) - 0.5)
    assert completion_reward(right, "    return y\n    return y") == 0.5  # exact, then twice
    block = task("    if y:\n        return y")  # its first line alone does not parse
    assert completion_reward(block, "    if y:") == 1.0 and not breaks_parse(block, "    if y:")
    assert breaks_parse(block, "    if y:\n    return y")  # the author's two lines parse
    closing = task("    }\n}")
    assert not repeats(closing, "    )\n)")  # brackets closing in a row are no repetition


def test_edit_similarity() -> None:
    assert edit_similarity("abc", "abc") == edit_similarity("", "") == 1.0
    assert edit_similarity("abc", "") == 0.0
    assert edit_similarity("kitten", "sitting") == pytest.approx(1 - 3 / 7)
