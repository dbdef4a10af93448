"""A wider shop repository for bench/task_rl.py: the test suite's two-module shop
(tests/learner/synth/synth_repo.py) and eight more small modules, each added with its tests
in a commit of its own, three of them later fixed by a one-line commit with a new test.

    repo = make_wide_shop(Path("/tmp/wide"))   # git.Repo; `bench/task_rl.py --shop wide`

Why: with two source files, a task cycle holds one out, and the held-out split is two one-line
tasks: 16 rollouts per adapter cannot show a rise from 0.125 to 0.19 (docs/tasks.md). Ten
small files give tens of one-line mutations, a few held out by file, and real-history
one-line fixes (revert tasks of the easy tier). Every function is a line or two, like the
shop's, so the dev-sized agent model can read the whole file in one step.
"""

from __future__ import annotations

from pathlib import Path

import git

from tests.learner.synth.synth_repo import commit, make_task_repo

# name -> (source, tests): each module and its tests, added in one commit.
MODULES: dict[str, tuple[str, str]] = {
    "stock": (
        '''"""Stock counts."""


def restock(count, amount):
    """The count after `amount` more arrive."""
    return count + amount


def is_low(count, limit):
    """Whether fewer than `limit` are left."""
    return count < limit
''',
        """from shop.stock import is_low, restock


def test_restock():
    assert restock(3, 4) == 7


def test_is_low():
    assert is_low(2, 5)
    assert not is_low(5, 5)
""",
    ),
    "tax": (
        '''"""Taxes and fees."""


def with_tax(amount, rate):
    """The amount with a tax of `rate` added."""
    return amount + amount * rate


def net(amount, fee):
    """The amount less a fee."""
    return amount - fee
''',
        """from shop.tax import net, with_tax


def test_with_tax():
    assert with_tax(100, 0.5) == 150


def test_net():
    assert net(10, 3) == 7
""",
    ),
    "units": (
        '''"""Units."""


def to_cents(amount):
    """Whole units in cents."""
    return amount * 100


def to_grams(kilos):
    """Kilograms in grams."""
    return kilos * 1000
''',
        """from shop.units import to_cents, to_grams


def test_to_cents():
    assert to_cents(3) == 300


def test_to_grams():
    assert to_grams(2) == 2000
""",
    ),
    "cart": (
        '''"""A cart of (price, quantity) items."""


def count_items(items):
    """How many things are in the cart."""
    return sum(quantity for price, quantity in items)


def is_empty(items):
    """Whether the cart holds nothing."""
    return len(items) == 0
''',
        """from shop.cart import count_items, is_empty


def test_count_items():
    assert count_items([(2, 3), (1, 4)]) == 7


def test_is_empty():
    assert is_empty([])
    assert not is_empty([(1, 1)])
""",
    ),
    "scores": (
        '''"""Scores."""


def best(scores):
    """The highest score."""
    return max(scores)


def spread(scores):
    """The highest score less the lowest."""
    return max(scores) - min(scores)
''',
        """from shop.scores import best, spread


def test_best():
    assert best([3, 9, 4]) == 9


def test_spread():
    assert spread([3, 9, 4]) == 6
""",
    ),
    "days": (
        '''"""Days of the week, 0 for Monday."""


def is_weekend(day):
    """Saturday or Sunday."""
    return day >= 5


def next_day(day):
    """The day after `day`."""
    return day + 1
''',
        """from shop.days import is_weekend, next_day


def test_is_weekend():
    assert is_weekend(6)
    assert not is_weekend(4)


def test_next_day():
    assert next_day(2) == 3
""",
    ),
    "points": (
        '''"""Loyalty points."""


def points(amount):
    """One point for every ten spent."""
    return amount // 10


def bonus(points, level):
    """Points times the member's level."""
    return points * level
''',
        """from shop.points import bonus, points


def test_points():
    assert points(95) == 9


def test_bonus():
    assert bonus(4, 3) == 12
""",
    ),
    "labels": (
        '''"""Labels."""


def label(name, price):
    """A shelf label."""
    return name + ": " + str(price)


def tag(code):
    """A code in a tag."""
    return "[" + code + "]"
''',
        """from shop.labels import label, tag


def test_label():
    assert label("tea", 3) == "tea: 3"


def test_tag():
    assert tag("a1") == "[a1]"
""",
    ),
}

# module -> (the buggy line, the fixed line, a test the fix adds): one-line fix commits.
FIXES: dict[str, tuple[str, str, str]] = {
    "days": (
        "    return day + 1\n",
        "    return (day + 1) % 7\n",
        "\n\ndef test_next_day_wraps():\n    assert next_day(6) == 0\n",
    ),
    "scores": (
        "    return max(scores)\n",
        "    return max(scores, default=0)\n",
        "\n\ndef test_best_empty():\n    assert best([]) == 0\n",
    ),
    "stock": (
        "    return count + amount\n",
        "    return max(count + amount, 0)\n",
        "\n\ndef test_restock_never_negative():\n    assert restock(2, -5) == 0\n",
    ),
}


def make_wide_shop(path: Path) -> git.Repo:
    """make_task_repo's history, then each of MODULES in a commit with its tests (the buggy
    line of a FIXES module as it first was), then each fix with its new test."""
    repo = make_task_repo(path)
    for name, (source, tests) in MODULES.items():
        commit(repo, {f"shop/{name}.py": source, f"tests/test_{name}.py": tests}, name)
    for name, (buggy, fixed, test) in FIXES.items():
        source, tests = MODULES[name]
        commit(
            repo,
            {f"shop/{name}.py": source.replace(buggy, fixed),
             f"tests/test_{name}.py": tests + test},
            f"{name}: fix an edge case",
        )  # fmt: skip
    return repo
