"""The sealed sandbox (learner/synth/sandbox.py): one commit and no history, commands under a
timeout and rlimits without network (where the OS allows), grading that restores the tests,
a hung test killed.

Run: .venv/bin/python -m pytest tests/learner/synth/test_sandbox.py -q
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from learner.synth.records import TaskRecord
from learner.synth.sandbox import (
    Sandbox,
    SandboxConfig,
    SandboxError,
    SandboxLimits,
    network_isolation,
)

TEST = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n" \
       "def test_zero():\n    assert add(0, 0) == 0\n"  # fmt: skip
FILES = {"calc.py": "def add(a, b):\n    return a - b\n", "tests/test_calc.py": TEST}
TASK = TaskRecord(
    instance_id="calc__revert-0000000-0", repo="calc", base_commit="0" * 40,
    patch="", test_patch="", FAIL_TO_PASS=["tests/test_calc.py::test_add"],
    PASS_TO_PASS=["tests/test_calc.py::test_zero"], problem_statement="add is wrong",
    problem_statement_vague="adding is broken", kind="revert", difficulty="easy",
    test_command=["python", "-m", "pytest"], test_files={"tests/test_calc.py": TEST},
)  # fmt: skip
CONFIG = SandboxConfig(python=sys.executable, limits=SandboxLimits(timeout_s=20))


def git(box: Sandbox, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=box.root, env=box.env, capture_output=True,
                          text=True, check=True)  # fmt: skip
    return done.stdout


async def test_workspace_holds_one_commit_and_no_history() -> None:
    with Sandbox(FILES, CONFIG) as box:
        assert len(git(box, "log", "--all", "--oneline").splitlines()) == 1
        assert git(box, "remote") == git(box, "tag") == git(box, "reflog") == ""
        assert git(box, "branch", "--all").split() == ["*", "main"]
        assert not (box.root / ".git" / "logs").exists()
        # The agent sees the same through its own commands.
        seen = await box.workspace.run_command("git log --all --format=%s", shell=True)
        assert seen.output.strip() == "task" and seen.exit_code == 0
        assert box.diff() == "" and box.changed() == []
    assert not box.base.exists()


async def test_commands_run_with_a_timeout_and_limits() -> None:
    limits = SandboxLimits(timeout_s=20, memory_mb=512, file_mb=1, cpu_s=5)
    with Sandbox(FILES, SandboxConfig(python=sys.executable, limits=limits)) as box:
        ws = box.workspace
        hung = await ws.run_command("sleep 30", shell=True, timeout_s=1)
        assert hung.timed_out and hung.exit_code is None
        big = await ws.run_command("head -c 3000000 /dev/zero > big.bin", shell=True)
        assert big.exit_code != 0 and (box.root / "big.bin").stat().st_size <= 2**20
        hog = await ws.run_command(["python", "-c", "x = bytearray(2 * 1024**3)"])
        assert hog.exit_code != 0 and "MemoryError" in hog.output
        spin = await ws.run_command(["python", "-c", "while True: pass"])
        assert spin.exit_code != 0 and not spin.timed_out  # the CPU limit, not the clock
        where = await ws.run_command(["python", "-c", "import sys; print(sys.executable)"])
        assert where.output.strip() == sys.executable
        missing = await ws.run_command(["no-such-program-x"])
        assert missing.exit_code == 127 and "cannot run" in missing.output
        env = await ws.run_command("env", shell=True)
        assert "APPRENTICE_" not in env.output and str(box.base / "home") in env.output


@pytest.mark.skipif(not network_isolation(), reason="no user+network namespace here")
async def test_commands_have_no_network_where_the_os_allows() -> None:
    with Sandbox(FILES, CONFIG) as box:
        code = "import socket; socket.create_connection(('1.1.1.1', 53), timeout=3)"
        out = await box.workspace.run_command(["python", "-c", code])
        assert out.exit_code != 0 and "unreachable" in out.output.lower()


def test_network_isolation_can_be_required_or_refused() -> None:
    if network_isolation():
        Sandbox(FILES, SandboxConfig(python=sys.executable, isolate_network=True)).close()
    else:
        with pytest.raises(SandboxError, match="network isolation"):
            Sandbox(FILES, SandboxConfig(python=sys.executable, isolate_network=True))


def test_grading_restores_tests_so_editing_them_earns_nothing() -> None:
    with Sandbox(FILES, CONFIG) as box:
        (box.root / "tests" / "test_calc.py").write_text("def test_add():\n    pass\n")
        (box.root / "conftest.py").write_text("import pytest\n")
        (box.root / ".gitignore").write_text("conftest.py\n")  # hides nothing from grading
        grade = box.grade(TASK)
        assert set(grade.reverted) == {"tests/test_calc.py", "conftest.py"}
        assert grade.run.outcomes == {
            "tests/test_calc.py::test_add": "failed", "tests/test_calc.py::test_zero": "passed"
        }  # fmt: skip
        assert "test_calc" not in grade.diff and ".gitignore" in grade.diff
        # A real fix passes; the agent's own git history cannot hide it.
        (box.root / "calc.py").write_text("def add(a, b):\n    return a + b\n")
        git(box, "commit", "-qam", "fix")
        fixed = box.grade(TASK)
        assert fixed.run.all_passed(TASK.FAIL_TO_PASS + TASK.PASS_TO_PASS)
        assert "+    return a + b" in fixed.diff


def test_a_hung_test_is_killed_and_recorded() -> None:
    config = SandboxConfig(python=sys.executable, test_timeout_s=3)
    with Sandbox(FILES, config) as box:
        (box.root / "calc.py").write_text("def add(a, b):\n    while True:\n        pass\n")
        grade = box.grade(TASK)
        assert grade.run.timed_out and not grade.run.passed("tests/test_calc.py::test_add")


def test_bad_input() -> None:  # which paths grading restores: tests/learner/synth/test_paths.py
    with pytest.raises(SandboxError, match="not a relative path"):
        Sandbox({"../evil.py": "x"}, CONFIG)
    with pytest.raises(SandboxError, match="not found"):
        Sandbox(FILES, SandboxConfig(python="/no/such/python"))
    with pytest.raises(ValueError, match="memory_mb"):
        SandboxLimits(memory_mb=0)
