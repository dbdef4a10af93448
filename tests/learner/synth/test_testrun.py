"""run_tests: per-test outcomes and messages, a broken module, limits, a hung test killed.

.venv/bin/python -m pytest tests/learner/synth/test_testrun.py -q
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from learner.sandbox import Limits
from learner.synth.testrun import pytest_args, run_tests

SUITE = """import pytest


def test_ok():
    assert 1 + 1 == 2


def test_bad():
    assert 1 == 2, "one is not two"


@pytest.fixture
def broken():
    raise RuntimeError("fixture broke")


def test_error(broken):
    pass


@pytest.mark.skip
def test_skipped():
    pass
"""


@pytest.fixture(autouse=True)
def _fast_pytest(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")  # the child starts faster


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root


def test_outcomes_and_messages_per_test(tmp_path: Path) -> None:
    root = write(tmp_path, {"tests/test_a.py": SUITE, "tests/test_b.py": "import nowhere\n"})
    run = run_tests(root, sys.executable, timeout_s=60)
    assert run.outcomes == {
        "tests/test_a.py::test_ok": "passed",
        "tests/test_a.py::test_bad": "failed",
        "tests/test_a.py::test_error": "error",
        "tests/test_a.py::test_skipped": "skipped",
        "tests/test_b.py": "error",  # cannot be collected; the others still ran
    }
    assert "one is not two" in run.messages["tests/test_a.py::test_bad"]
    assert "nowhere" in run.messages["tests/test_b.py"]
    assert not run.timed_out and run.returncode == 1 and run.hung is None
    assert str(tmp_path) not in "".join(run.messages.values())
    assert run.passed("tests/test_a.py::test_ok") and not run.passed("tests/test_b.py::test_x")


def test_selected_node_ids_under_limits(tmp_path: Path) -> None:
    root = write(tmp_path, {"tests/test_a.py": SUITE})
    selection = ["tests/test_a.py::test_ok", "tests/test_a.py::test_bad"]
    run = run_tests(root, sys.executable, selection, timeout_s=60,
                    preexec_limits=Limits(timeout_s=60, memory_mb=2048))  # fmt: skip
    assert run.outcomes == {"tests/test_a.py::test_ok": "passed",
                            "tests/test_a.py::test_bad": "failed"}  # fmt: skip
    assert not run.all_passed(selection)


def test_a_hung_test_is_killed_with_its_children(tmp_path: Path) -> None:
    hang = (
        "import subprocess, sys, time\n\n"
        "def test_fast():\n    pass\n\n"
        "def test_hangs(tmp_path):\n"
        "    subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "    time.sleep(60)\n"
    )
    root = write(tmp_path, {"test_hang.py": hang})
    started = time.monotonic()
    run = run_tests(root, sys.executable, timeout_s=4)
    assert time.monotonic() - started < 20
    assert run.timed_out and run.hung == "test_hang.py::test_hangs"
    assert run.outcomes == {"test_hang.py::test_fast": "passed"}
    assert "ran past 4 s" in run.output and "test_hangs" in run.output


def test_interpreter_errors_are_clear(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no such Python interpreter"):
        run_tests(tmp_path, str(tmp_path / "bin" / "python"))
    with pytest.raises(FileNotFoundError, match="not found on PATH"):
        run_tests(tmp_path, "no-such-python-3.99")


def test_long_selections_run_by_file() -> None:
    ids = [f"tests/test_a.py::test_{i:05}" for i in range(20_000)]
    assert pytest_args(ids) == ["tests/test_a.py"]
    assert pytest_args(ids[:2]) == ids[:2] and pytest_args(None) == []
