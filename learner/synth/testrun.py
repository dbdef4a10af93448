"""Run a repository's pytest suite in a child process and read back each test's outcome.

    run = run_tests(root, "python", ["tests/test_prices.py"], timeout_s=60)
    run.outcomes  # {"tests/test_prices.py::test_total": "passed" | "failed" | "error" | "skipped"}
    run.timed_out  # True when the wall clock ran out: the whole process group was killed

How: `python -m pytest -q -p no:cacheprovider --continue-on-collection-errors
-p apprentice_outcomes [tests]` in `root`, where
`apprentice_outcomes` is a tiny plugin written to a temp dir put on PYTHONPATH. It appends one
JSON line per outcome to the file named by $APPRENTICE_TEST_OUTCOMES as each test finishes, so
the tests that ran before a hang are still known. A failure in the call phase is "failed", in
setup or teardown "error"; an xfail counts as "skipped". A test module that cannot be
collected is recorded under its path as "error" (its tests then have no outcome: callers treat
a missing outcome as not passed). `root/src` is put on PYTHONPATH when it exists, so a src-
layout package imports from the checkout, not from wherever the interpreter has it installed.

Limits (`preexec_limits`, a learner.sandbox.Limits): its rlimits are set by a small runner in
the child before pytest starts (then it execs the interpreter), not in a preexec_fn, which is
unsafe in a parent with threads. The timeout is `timeout_s`: the child runs in its own session
and its process group is killed with SIGKILL when the time is up.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from learner.sandbox import Limits

OUTCOMES_ENV = "APPRENTICE_TEST_OUTCOMES"
PLUGIN = "apprentice_outcomes"
MAX_ARGS_CHARS = 64_000  # longer lists of node ids are run by file, and read back by node id
TAIL_CHARS = 6_000
# One broken test module must not stop the others from running.
PYTEST_FLAGS = ["-q", "-p", "no:cacheprovider", "--continue-on-collection-errors", "--rootdir=."]

_PLUGIN_SOURCE = r'''
"""Writes each test's outcome as one JSON line to $APPRENTICE_TEST_OUTCOMES (Apprentice)."""
import json, os

def _message(report):
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None:
        return str(crash.message)[:500]
    text = str(report.longrepr or "").strip().splitlines()
    return text[-1][:500] if text else ""

def _write(nodeid, outcome, report):
    path = os.environ.get("APPRENTICE_TEST_OUTCOMES")
    if path:
        message = _message(report) if outcome in ("failed", "error") else ""
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps([nodeid, outcome, message]) + "\n")

def pytest_runtest_logreport(report):
    if report.when == "call":
        outcome = report.outcome  # passed | failed | skipped (an xfail is skipped)
    elif report.failed:
        outcome = "error"  # setup or teardown
    elif report.when == "setup" and report.skipped:
        outcome = "skipped"
    else:
        return
    _write(report.nodeid, outcome, report)

def pytest_runtest_logstart(nodeid, location):
    _write(nodeid, "started", None)

def pytest_collectreport(report):
    if report.failed:
        _write(report.nodeid, "error", report)
'''

# Sets the rlimits, then replaces itself with `python <rest of argv>`.
_RUNNER = (
    "import json, os, resource, sys\n"
    "for kind, value in json.loads(sys.argv[1]):\n"
    "    resource.setrlimit(getattr(resource, kind), (value, value))\n"
    "os.execv(sys.executable, [sys.executable] + sys.argv[2:])\n"
)


@dataclass(frozen=True)
class TestRun:
    __test__ = False  # not a pytest test class

    outcomes: dict[str, str]  # pytest node id -> "passed" | "failed" | "error" | "skipped"
    returncode: int
    timed_out: bool
    output: str  # tail of stdout+stderr (for messages)
    messages: dict[str, str] = field(default_factory=dict)  # node id -> failure message
    hung: str | None = None  # on a timeout: the test that started and never finished

    def passed(self, nodeid: str) -> bool:
        return self.outcomes.get(nodeid) == "passed"

    def all_passed(self, nodeids: Sequence[str]) -> bool:
        return all(self.passed(n) for n in nodeids)


def pytest_args(tests: Sequence[str] | None) -> list[str]:
    """The command-line selection for `tests`: node ids, or their files when they are many."""
    if not tests:
        return []
    selection = list(dict.fromkeys(tests))
    if sum(len(t) + 1 for t in selection) > MAX_ARGS_CHARS:
        selection = list(dict.fromkeys(t.split("::", 1)[0] for t in selection))
    return selection


def run_tests(
    root: Path,
    python: str,
    tests: Sequence[str] | None = None,
    *,
    timeout_s: float = 120,
    env: Mapping[str, str] | None = None,
    preexec_limits: Limits | None = None,
) -> TestRun:
    """Run pytest on `tests` (node ids or paths; None = the whole suite) in `root`."""
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"{root}: no such directory to run tests in")
    with tempfile.TemporaryDirectory(prefix="apprentice-testrun-") as scratch:
        scratch_dir = Path(scratch)
        (scratch_dir / f"{PLUGIN}.py").write_text(_PLUGIN_SOURCE, encoding="utf-8")
        results = scratch_dir / "outcomes.jsonl"
        log = scratch_dir / "output.log"
        child_env = _child_env(root, scratch_dir, results, env)
        command = [resolve_python(python)]
        if preexec_limits is not None:
            command += ["-c", _RUNNER, json.dumps(preexec_limits.rlimits())]
        command += ["-m", "pytest", *PYTEST_FLAGS, "-p", PLUGIN]
        command += pytest_args(tests)
        returncode, timed_out = _run(command, root, child_env, log, timeout_s)
        output = log.read_text(encoding="utf-8", errors="replace")[-TAIL_CHARS:]
        outcomes, messages, started = _read_outcomes(results)
    for prefix in {str(root.absolute()) + os.sep, str(root.resolve()) + os.sep}:
        messages = {n: m.replace(prefix, "") for n, m in messages.items()}  # paths as in the repo
        output = output.replace(prefix, "")
    hung = next((n for n in reversed(started) if n not in outcomes), None) if timed_out else None
    if timed_out:
        output += f"\n[apprentice] the tests ran past {timeout_s:g} s and were killed"
        output += f" (still running: {hung})" if hung else ""
    return TestRun(outcomes, returncode, timed_out, output, messages, hung)


def resolve_python(python: str) -> str:
    """The interpreter as an absolute path (the tests run in another directory)."""
    if os.sep in python or (os.altsep and os.altsep in python):
        found = Path(python).expanduser().absolute()
        if not found.exists():
            raise FileNotFoundError(f"{python}: no such Python interpreter")
        return str(found)
    located = shutil.which(python)
    if located is None:
        raise FileNotFoundError(f"{python!r}: not found on PATH (name the interpreter with a path)")
    return located


def _child_env(
    root: Path, scratch: Path, results: Path, env: Mapping[str, str] | None
) -> dict[str, str]:
    child = dict(os.environ if env is None else env)
    paths = [str(scratch)]
    if (root / "src").is_dir():
        paths.append(str((root / "src").resolve()))
    if child.get("PYTHONPATH"):
        paths.append(child["PYTHONPATH"])
    child["PYTHONPATH"] = os.pathsep.join(paths)
    child["PYTHONDONTWRITEBYTECODE"] = "1"
    child[OUTCOMES_ENV] = str(results)
    return child


def _run(
    command: list[str], cwd: Path, env: dict[str, str], log: Path, timeout_s: float
) -> tuple[int, bool]:
    # Output goes to a file, not a pipe: a grandchild that keeps a pipe open cannot hang us.
    with open(log, "wb") as out:
        try:
            process = subprocess.Popen(
                command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        except OSError as error:
            raise FileNotFoundError(f"cannot run {command[0]!r}: {error}") from None
        try:
            return process.wait(timeout=timeout_s), False
        except subprocess.TimeoutExpired:
            return _kill(process), True
        finally:
            if process.returncode is None:  # interrupted (KeyboardInterrupt): leave nothing
                _kill(process)


def _kill(process: subprocess.Popen[bytes]) -> int:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    return process.wait()


def _read_outcomes(path: Path) -> tuple[dict[str, str], dict[str, str], list[str]]:
    outcomes: dict[str, str] = {}
    messages: dict[str, str] = {}
    started: list[str] = []
    if not path.exists():
        return outcomes, messages, started
    rank = {"passed": 0, "skipped": 1, "failed": 2, "error": 3}  # the worst phase wins
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            nodeid, outcome, message = json.loads(line)
        except (ValueError, TypeError):
            continue  # a line cut by the kill
        if outcome == "started":
            started.append(nodeid)
            continue
        if rank.get(outcome, 0) >= rank.get(outcomes.get(nodeid, "passed"), 0):
            outcomes[nodeid] = outcome
            if message:
                messages[nodeid] = message
    return outcomes, messages, started
