"""The 20 small bugs of bench/agent_bugs.py: each a tiny project with one bug and its tests.

    for bug in BUGS: bug.files()        # {path: buggy text, test file: text}
    passed, output = run_tests(folder)  # every test_*.py of the folder, in a subprocess

Each bug is one to three lines wrong in a small Python file, with a precise task statement
(what is wrong and what is right, as a good bug report says it, naming the file), a test
file holding the test that fails on the bug and tests of the file's other functions (so
"fixed" also means nothing else broke), and the reference fix `(old, new)`: `old` appears
exactly once in the buggy text and the fix replaces it. tests/agent/test_agent_bugs_set.py
checks the set itself (every test fails on the bug and passes on the fix), fast, no model.
The tests are plain `test_*` functions run by a tiny runner (no pytest start-up per run).
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Bug:
    name: str
    task: str
    path: str  # the file with the bug
    code: str  # its buggy text
    fix: tuple[str, str]  # the reference fix: `old` (once in `code`) -> `new`
    tests: str  # the test file's text

    @property
    def test_path(self) -> str:
        return f"test_{Path(self.path).stem}.py"

    @property
    def fixed(self) -> str:
        old, new = self.fix
        return self.code.replace(old, new, 1)

    def files(self, fixed: bool = False) -> dict[str, str]:
        return {self.path: self.fixed if fixed else self.code, self.test_path: self.tests}


def _bug(name: str, task: str, path: str, code: str, fix: tuple[str, str], tests: str) -> Bug:
    return Bug(name, task, path, code, fix, tests)


BUGS: list[Bug] = [
    _bug(
        "add", "Fix the bug in calc.py: add should return a + b.",
        "calc.py", "def add(a, b):\n    return a - b\n",
        ("a - b", "a + b"),
        "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
        "    assert add(-1, 1) == 0\n",
    ),
    _bug(
        "is_even", "Fix the bug in parity.py: is_even(n) returns True for odd numbers; it must "
        "return True exactly when n is even.",
        "parity.py", "def is_even(n):\n    return n % 2 == 1\n",
        ("== 1", "== 0"),
        "from parity import is_even\n\n\ndef test_is_even():\n    assert is_even(4)\n"
        "    assert not is_even(7)\n",
    ),
    _bug(
        "largest", "Fix the bug in stats.py: largest(xs) should return the largest item of xs, "
        "but it returns the smallest.",
        "stats.py",
        "def largest(xs):\n    return min(xs)\n\n\ndef total(xs):\n    return sum(xs)\n"
        "",
        ("min(xs)", "max(xs)"),
        "from stats import largest, total\n\n\ndef test_largest():\n"
        "    assert largest([3, 9, 2]) == 9\n"
        "\n\ndef test_total():\n    assert total([1, 2, 3]) == 6\n",
    ),
    _bug(
        "greet", "Fix the bug in greet.py: greet('Ann') should return 'Hello, Ann!' (a comma "
        "after Hello and an exclamation mark at the end).",
        "greet.py", 'def greet(name):\n    return "Hello " + name\n',
        ('"Hello " + name', '"Hello, " + name + "!"'),
        "from greet import greet\n\n\ndef test_greet():\n    assert greet('Ann') == 'Hello, Ann!'\n"
        "",
    ),
    _bug(
        "count_to", "Fix the bug in counting.py: count_to(n) should return the list [1, 2, ..., n] "
        "including n; today it stops at n - 1.",
        "counting.py", "def count_to(n):\n    return list(range(1, n))\n",
        ("range(1, n)", "range(1, n + 1)"),
        "from counting import count_to\n\n\ndef test_count_to():\n"
        "    assert count_to(3) == [1, 2, 3]\n",
    ),
    _bug(
        "area", "Fix the bug in geometry.py: area(width, height) should return width * height.",
        "geometry.py", "def area(width, height):\n    return width + height\n\n\n"
        "def is_square(width, height):\n    return width == height\n",
        ("width + height", "width * height"),
        "from geometry import area, is_square\n\n\ndef test_area():\n    assert area(3, 4) == 12\n"
        "\n\n"
        "def test_is_square():\n    assert is_square(2, 2) and not is_square(2, 3)\n",
    ),
    _bug(
        "fahrenheit", "Fix the bug in temperature.py: to_fahrenheit(celsius) should return "
        "celsius * 9 / 5 + 32 (to_fahrenheit(100) == 212).",
        "temperature.py", "def to_fahrenheit(celsius):\n    return celsius * 9 / 5 - 32\n",
        ("- 32", "+ 32"),
        "from temperature import to_fahrenheit\n\n\ndef test_to_fahrenheit():\n"
        "    assert to_fahrenheit(100) == 212\n    assert to_fahrenheit(0) == 32\n",
    ),
    _bug(
        "last", "Fix the bug in lists.py: last(xs) should return the last item of xs; it returns "
        "the first.",
        "lists.py", "def first(xs):\n    return xs[0]\n\n\ndef last(xs):\n    return xs[0]\n",
        ("def last(xs):\n    return xs[0]", "def last(xs):\n    return xs[-1]"),
        "from lists import first, last\n\n\ndef test_last():\n    assert last([1, 2, 3]) == 3\n\n\n"
        "def test_first():\n    assert first([1, 2, 3]) == 1\n",
    ),
    _bug(
        "reverse", "Fix the bug in text.py: reverse(s) should return s reversed, e.g. "
        "reverse('abc') == 'cba'.",
        "text.py", "def reverse(s):\n    return s[1:]\n",
        ("s[1:]", "s[::-1]"),
        "from text import reverse\n\n\ndef test_reverse():\n    assert reverse('abc') == 'cba'\n",
    ),
    _bug(
        "with_tax", "Fix the bug in shop/prices.py: with_tax(price, rate) should return the price "
        "plus tax, price * (1 + rate), so with_tax(100, 0.2) is 120.",
        "shop/prices.py", "def with_tax(price, rate):\n    return price * rate\n",
        ("price * rate", "price * (1 + rate)"),
        "from shop.prices import with_tax\n\n\ndef test_with_tax():\n"
        "    assert abs(with_tax(100, 0.2) - 120) < 1e-9\n",
    ),
    _bug(
        "mean", "Fix the bug in average.py: mean(xs) divides by 2 instead of by the number of "
        "items; it should return sum(xs) / len(xs).",
        "average.py", "def mean(xs):\n    return sum(xs) / 2\n",
        ("/ 2", "/ len(xs)"),
        "from average import mean\n\n\ndef test_mean():\n    assert mean([1, 2, 3]) == 2\n",
    ),
    _bug(
        "absolute", "Fix the bug in absolute.py: absolute(x) should return the absolute value of "
        "x (absolute(-3) == 3 and absolute(3) == 3).",
        "absolute.py", "def absolute(x):\n    if x > 0:\n        return -x\n    return x\n",
        ("x > 0", "x < 0"),
        "from absolute import absolute\n\n\ndef test_absolute():\n    assert absolute(-3) == 3\n"
        "    assert absolute(3) == 3\n",
    ),
    _bug(
        "square", "Fix the bug in power.py: square(x) should return x * x; it returns x * 2.",
        "power.py", "def square(x):\n    return x * 2\n\n\ndef cube(x):\n    return x * x * x\n",
        ("x * 2", "x * x"),
        "from power import cube, square\n\n\ndef test_square():\n    assert square(5) == 25\n\n\n"
        "def test_cube():\n    assert cube(2) == 8\n",
    ),
    _bug(
        "clamp", "Fix the bug in clamp.py: clamp(x, lo, hi) should limit x to the range lo..hi, "
        "that is return max(lo, min(x, hi)).",
        "clamp.py", "def clamp(x, lo, hi):\n    return max(lo, min(x, lo))\n",
        ("min(x, lo)", "min(x, hi)"),
        "from clamp import clamp\n\n\ndef test_clamp():\n    assert clamp(5, 0, 10) == 5\n"
        "    assert clamp(15, 0, 10) == 10\n    assert clamp(-1, 0, 10) == 0\n",
    ),
    _bug(
        "vowels", "Fix the bug in vowels.py: count_vowels('tune') returns 1 but should return 2, "
        "because VOWELS is missing the letter u.",
        "vowels.py", 'VOWELS = "aeio"\n\n\ndef count_vowels(s):\n'
        "    return sum(1 for c in s.lower() if c in VOWELS)\n",
        ('"aeio"', '"aeiou"'),
        "from vowels import count_vowels\n\n\ndef test_count_vowels():\n"
        "    assert count_vowels('tune') == 2\n    assert count_vowels('sky') == 0\n",
    ),
    _bug(
        "shout", "Fix the bug in shout.py: shout(s) should return s in upper case "
        "(shout('hi') == 'HI').",
        "shout.py", "def shout(s):\n    return s.lower()\n",
        ("s.lower()", "s.upper()"),
        "from shout import shout\n\n\ndef test_shout():\n    assert shout('hi') == 'HI'\n",
    ),
    _bug(
        "get_count", "Fix the bug in words.py: get_count(counts, word) raises KeyError for a word "
        "that is not in counts; it should return 0 for a missing word (use counts.get).",
        "words.py", "def get_count(counts, word):\n    return counts[word]\n",
        ("counts[word]", "counts.get(word, 0)"),
        "from words import get_count\n\n\ndef test_get_count():\n"
        "    assert get_count({'a': 2}, 'a') == 2\n    assert get_count({}, 'b') == 0\n",
    ),
    _bug(
        "increment", "Fix the bug in counter.py: Counter.increment() should add 1 to self.value; "
        "it subtracts 1.",
        "counter.py", "class Counter:\n    def __init__(self):\n        self.value = 0\n\n"
        "    def increment(self):\n        self.value -= 1\n",
        ("self.value -= 1", "self.value += 1"),
        "from counter import Counter\n\n\ndef test_increment():\n    c = Counter()\n"
        "    c.increment()\n    c.increment()\n    assert c.value == 2\n",
    ),
    _bug(
        "factorial", "Fix the bug in factorial.py: factorial(n) always returns 0 because result "
        "starts at 0; it should start at 1 (factorial(4) == 24, factorial(0) == 1).",
        "factorial.py", "def factorial(n):\n    result = 0\n    for i in range(2, n + 1):\n"
        "        result *= i\n    return result\n",
        ("result = 0", "result = 1"),
        "from factorial import factorial\n\n\ndef test_factorial():\n"
        "    assert factorial(4) == 24\n"
        "    assert factorial(0) == 1\n",
    ),
    _bug(
        "is_positive", "Fix the bug in sign.py: is_positive(0) returns True, but 0 is not "
        "positive: is_positive(x) should return True only when x > 0.",
        "sign.py",
        "def is_positive(x):\n    return x >= 0\n\n\ndef is_negative(x):\n"
        "    return x < 0\n",
        ("x >= 0", "x > 0"),
        "from sign import is_negative, is_positive\n\n\ndef test_is_positive():\n"
        "    assert is_positive(2) and not is_positive(0)\n\n\n"
        "def test_is_negative():\n    assert is_negative(-1) and not is_negative(0)\n",
    ),
]  # fmt: skip

# Imports every test_*.py of the working directory and calls its test_* functions; exit 0
# when at least one ran and none failed. Run with `python -c` (tests print what failed).
RUNNER = """\
import importlib, pathlib, sys, traceback
sys.path.insert(0, ".")
ran = failed = 0
for f in sorted(pathlib.Path(".").glob("test_*.py")):
    try:
        mod = importlib.import_module(f.stem)
    except BaseException:
        failed += 1; print(f"{f}: import failed"); traceback.print_exc(limit=2); continue
    for name in sorted(dir(mod)):
        fn = getattr(mod, name)
        if name.startswith("test_") and callable(fn):
            ran += 1
            try:
                fn()
            except BaseException:
                failed += 1; print(f"{f}::{name} failed"); traceback.print_exc(limit=2)
print(f"{ran} ran, {failed} failed")
sys.exit(0 if ran and not failed else 1)
"""


def write(folder: Path, files: dict[str, str]) -> None:
    for path, text in files.items():
        target = folder / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)


def run_tests(folder: Path, timeout_s: float = 20.0) -> tuple[bool, str]:
    """Run every test of `folder` in a fresh interpreter; (all passed, output)."""
    try:
        r = subprocess.run(
            [sys.executable, "-B", "-c", RUNNER],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env={"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"},
        )
    except subprocess.TimeoutExpired:
        return False, f"the tests timed out after {timeout_s}s"
    return r.returncode == 0, (r.stdout + r.stderr)[-2000:]
