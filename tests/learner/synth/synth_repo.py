"""A tiny git repository with a pytest suite and a history, built with gitpython, for the
mining tests: `make_repo(path)`; `make_task_repo(path)` adds a second module (task cycles).

History (oldest first):
1. shop/prices.py with `total(items)`, tests/test_prices.py testing it;
2. `discount(amount, percent)` added with its test (a revert task: test_discount fails on the
   parent with the new test applied, and passes with the commit's code);
3. a README change only (no task).
"""

from __future__ import annotations

from pathlib import Path

import git

PRICES_1 = '''"""Prices."""


def total(items):
    """The sum of price * quantity."""
    result = 0
    for price, quantity in items:
        result += price * quantity
    return result
'''

PRICES_2 = (
    PRICES_1
    + '''

def discount(amount, percent):
    """The amount less `percent` per cent, never below zero."""
    if percent > 100:
        return 0
    return amount - amount * percent / 100
'''
)

TESTS_1 = """from shop.prices import total


def test_total():
    assert total([(2, 3), (1, 4)]) == 10, "two items, 2 x 3 and 1 x 4, cost 10"


def test_total_empty():
    assert total([]) == 0
"""

TESTS_2 = (
    TESTS_1
    + """

def test_discount():
    from shop.prices import discount

    assert discount(200, 10) == 180
    assert discount(50, 150) == 0
"""
)


def commit(repo: git.Repo, files: dict[str, str], message: str) -> git.Commit:
    root = Path(repo.working_tree_dir)
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    repo.index.add(list(files))
    author = git.Actor("Test", "test@example.com")
    return repo.index.commit(message, author=author, committer=author)


def make_repo(path: Path) -> git.Repo:
    path.mkdir(parents=True, exist_ok=True)
    repo = git.Repo.init(path)
    commit(
        repo,
        {"shop/__init__.py": "", "shop/prices.py": PRICES_1, "tests/test_prices.py": TESTS_1},
        "prices",
    )
    commit(repo, {"shop/prices.py": PRICES_2, "tests/test_prices.py": TESTS_2}, "discount")
    commit(repo, {"README.md": "A shop.\n"}, "readme")
    return repo


NAMES = '''"""Names."""


def greet(name):
    """A greeting for `name`."""
    return "hello " + name


def shout(text):
    """`text` in capitals, with an exclamation mark."""
    return text.upper() + "!"
'''

NAMES_TESTS = """from shop.names import greet, shout


def test_greet():
    assert greet("ann") == "hello ann"


def test_shout():
    assert shout("hi") == "HI!"
"""


def make_task_repo(path: Path) -> git.Repo:
    """make_repo's history and a second module (shop/names.py, tested): two source files,
    so that task cycles can hold one out by file."""
    repo = make_repo(path)
    commit(repo, {"shop/names.py": NAMES, "tests/test_names.py": NAMES_TESTS}, "names")
    return repo
