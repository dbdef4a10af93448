"""A sealed workspace per rollout: a task's starting files in a new one-commit repository,
commands under limits, grading that restores the tests first.

    with Sandbox(files, SandboxConfig(python="/usr/bin/python3")) as box:
        agent = Agent(backend, box.workspace, AgentConfig(mode="autonomous"))
        ...
        grade = box.grade(record)      # grade.run.outcomes, grade.diff, grade.reverted

Layout (a fresh temporary folder, removed on close): `work/` is the workspace root, a new git
repository holding only the starting files in ONE commit: no remotes, no tags, no other
branches, no reflog (`core.logAllRefUpdates=false`, then `git reflog expire` and `gc`), so
`git log --all` shows that commit and nothing of the source repository's past or future;
`home/` and `tmp/` are the commands' HOME and TMPDIR; `bin/python` runs the task's
interpreter (config `python`), first on PATH.

What is enforced where:
- the agent's file tools (read, write, edit, list, search) go through `LocalWorkspace`,
  confined to `work/` (absolute paths, `..`, outward symlinks refused: workspace_fs.py);
- every command (`SandboxWorkspace.run_command`) runs with a wall-clock timeout that kills
  its whole process group (workspace_exec.py), a minimal environment (no server variables,
  no secrets, no user git config), and kernel rlimits set by a small runner in the child
  before it execs the command (not a preexec_fn: unsafe in a threaded parent): CPU seconds,
  address space, file size, no core files, and processes (RLIMIT_NPROC counts every process
  of the user, so it is set to the user's count now plus `processes`; root ignores it);
- no network: where the OS allows an unprivileged user + network namespace (`unshare -rn`,
  probed once), commands and test runs get an empty one (only loopback, down); elsewhere
  the network stays reachable (`SandboxConfig.isolate_network=True` makes that an error);
- grading (`grade`) first undoes every change to test paths (paths.is_test_path, the rule
  mining splits commits by: the record's test files, test_*.py, *_test.py, conftest.py,
  test(s)/testing folders, pytest/tox/setup.cfg/pyproject config, modules that would shadow
  pytest, sitecustomize, .pth files), then writes the record's
  `test_files`, then runs FAIL_TO_PASS + PASS_TO_PASS with testrun.run_tests under the same
  limits: editing a test earns nothing.
Not a security boundary against hostile code (no mount or PID namespace, same user): for
untrusted models run it in a container, as learner/sandbox.py says.
Tested in tests/learner/synth/test_sandbox.py.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from agent_server.agent.workspace import LocalWorkspace, LocalWorkspaceConfig
from agent_server.agent.workspace_exec import QUIET_ENV, run_process
from agent_server.agent.workspace_types import CommandResult
from learner.sandbox import Limits
from learner.synth.paths import is_test_path
from learner.synth.records import TaskRecord
from learner.synth.testrun import TestRun, run_tests

# Runs first in each command's child: limits, then exec of the command (PATH searched).
_RUNNER = (
    "import json, os, resource, sys\n"
    "for kind, value in json.loads(sys.argv[1]):\n"
    "    resource.setrlimit(getattr(resource, kind), (value, value))\n"
    "try:\n"
    "    os.execvp(sys.argv[2], sys.argv[2:])\n"
    "except OSError as e:\n"
    "    print(f'sandbox: cannot run {sys.argv[2]!r}: {e.strerror}', file=sys.stderr)\n"
    "    sys.exit(127)\n"
)
JUNK = (":(exclude,glob)**/__pycache__/**", ":(exclude,glob)**/*.pyc",
        ":(exclude,glob)**/.pytest_cache/**")  # fmt: skip
GIT_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_AUTHOR_NAME": "task",
    "GIT_AUTHOR_EMAIL": "task@apprentice", "GIT_COMMITTER_NAME": "task",
    "GIT_COMMITTER_EMAIL": "task@apprentice", "GIT_AUTHOR_DATE": "2000-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2000-01-01T00:00:00Z",
}  # fmt: skip


class SandboxError(RuntimeError):
    """The sandbox could not be built (git missing, a bad path, isolation impossible)."""


@dataclass(frozen=True)
class SandboxLimits(Limits):
    """Limits of each command and test run: `timeout_s` wall clock, `memory_mb` address
    space, `file_mb` largest file, `cpu_s` CPU seconds, `processes` new processes."""

    timeout_s: float = 120.0
    memory_mb: int = 4096
    file_mb: int = 64
    cpu_s: int = 300
    processes: int = 256

    def __post_init__(self) -> None:
        for name in ("timeout_s", "memory_mb", "file_mb", "cpu_s", "processes"):
            if getattr(self, name) <= 0:
                raise ValueError(f"SandboxLimits.{name} must be > 0, got {getattr(self, name)}")

    def rlimits(self) -> list[tuple[str, int]]:
        return [
            ("RLIMIT_CPU", self.cpu_s),
            ("RLIMIT_AS", self.memory_mb * 2**20),
            ("RLIMIT_FSIZE", self.file_mb * 2**20),
            ("RLIMIT_CORE", 0),
            ("RLIMIT_NPROC", _user_processes() + self.processes),
        ]


@dataclass(frozen=True)
class SandboxConfig:
    python: str | None = None
    """The interpreter that holds the repository's dependencies (`python` in commands and
    tests); None: the `python` on PATH, else this process's own."""
    limits: SandboxLimits = SandboxLimits()
    """Each command's limits (its timeout is the default; the agent passes its own)."""
    test_timeout_s: float = 120.0
    """Wall clock of the grading test run (a hung test is killed and recorded)."""
    isolate_network: bool | None = None
    """None: no network where the OS allows it; True: required (SandboxError where it
    cannot be had); False: leave the network on."""

    def __post_init__(self) -> None:
        if self.test_timeout_s <= 0:
            raise ValueError(f"test_timeout_s must be > 0, got {self.test_timeout_s}")

    def interpreter(self) -> str:
        found = self.python or shutil.which("python") or sys.executable
        path = shutil.which(found)
        if path is None:
            raise SandboxError(f"python interpreter {found!r} not found")
        return os.path.abspath(path)


@dataclass(frozen=True)
class Grade:
    run: TestRun  # outcomes of FAIL_TO_PASS + PASS_TO_PASS after the tests were restored
    diff: str  # the graded diff against the starting commit (test-path edits undone)
    reverted: tuple[str, ...]  # test-like paths whose edits were undone before grading


@functools.cache
def network_isolation() -> bool:
    """True when `unshare -rn` works here (an unprivileged user + network namespace)."""
    if shutil.which("unshare") is None:
        return False
    try:
        probe = subprocess.run(["unshare", "-rn", "true"], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


def _user_processes() -> int:
    uid = os.getuid()
    count = 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                count += entry.stat().st_uid == uid
            except OSError:
                continue
    return count


class SandboxWorkspace(LocalWorkspace):
    """A LocalWorkspace whose commands run under `SandboxLimits`, in the sandbox's
    environment and, where possible, without network (see the module docstring)."""

    def __init__(self, root: Path, env: Mapping[str, str], limits: SandboxLimits, net: bool):
        config = LocalWorkspaceConfig(command_timeout_s=limits.timeout_s)
        super().__init__(root, config)
        self.env, self.limits, self.isolated = dict(env), limits, net

    def wrap(self, argv: Sequence[str]) -> list[str]:
        """`argv` run through the limits runner (and a new network namespace)."""
        runner = [sys.executable, "-I", "-S", "-c", _RUNNER, json.dumps(self.limits.rlimits())]
        return (["unshare", "-rn"] if self.isolated else []) + runner + list(argv)

    async def run_command(
        self,
        command: str | Sequence[str],
        *,
        shell: bool = False,
        timeout_s: float | None = None,
        output_cap_bytes: int | None = None,
    ) -> CommandResult:
        if shell:
            text = command if isinstance(command, str) else " ".join(command)
            argv = ["/bin/sh", "-c", text]
        else:  # split (and refused when empty) exactly as LocalWorkspace does
            import shlex

            argv = shlex.split(command) if isinstance(command, str) else list(command)
            if not argv:
                return await super().run_command(argv)
        return await run_process(
            self.wrap(argv), shell=False, cwd=self.root, env=self.env,
            timeout_s=timeout_s if timeout_s and timeout_s > 0 else self.limits.timeout_s,
            output_cap_bytes=output_cap_bytes or self.config.command_output_cap_bytes,
        )  # fmt: skip


class Sandbox:
    """A temporary one-commit repository of `files` (path -> text); see the module doc."""

    def __init__(self, files: Mapping[str, str], config: SandboxConfig | None = None) -> None:
        self.config = cfg = config or SandboxConfig()
        net = network_isolation() if cfg.isolate_network is not False else False
        if cfg.isolate_network and not net:
            raise SandboxError("network isolation was required, but `unshare -rn` fails here")
        self.python = cfg.interpreter()
        self.base = Path(tempfile.mkdtemp(prefix="apprentice-rollout-"))
        try:
            self.root = self.base / "work"
            for sub in ("work", "home", "tmp", "bin"):
                (self.base / sub).mkdir()
            self._script("python", self.python)
            self._script("grade-python", self.python, unshare=net)
            self.env = self._env()
            _write_files(self.root, files)
            self.start = self._commit()
            self.workspace = SandboxWorkspace(self.root, self.env, cfg.limits, net)
        except BaseException:
            shutil.rmtree(self.base, ignore_errors=True)
            raise

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        shutil.rmtree(self.base, ignore_errors=True)

    def _script(self, name: str, python: str, *, unshare: bool = False) -> None:
        path = self.base / "bin" / name
        prefix = "unshare -rn " if unshare else ""
        path.write_text(f'#!/bin/sh\nexec {prefix}"{python}" "$@"\n', encoding="utf-8")
        path.chmod(0o755)

    def _env(self) -> dict[str, str]:
        path = os.pathsep.join([str(self.base / "bin"), "/usr/local/bin", "/usr/bin", "/bin"])
        home, tmp = str(self.base / "home"), str(self.base / "tmp")
        base = {"PATH": path, "HOME": home, "TMPDIR": tmp, "LANG": "C.UTF-8"}
        return base | QUIET_ENV | GIT_ENV | {"PYTHONDONTWRITEBYTECODE": "1"}

    def git(self, *args: str, pristine: bool = False) -> str:
        """git in the workspace; `pristine`: on the copy of the starting repository kept
        outside it (base/start.git, own index), which nothing the agent does to work/.git
        can change."""
        env = self.env
        if pristine:
            env = env | {"GIT_DIR": str(self.base / "start.git"), "GIT_WORK_TREE": str(self.root)}
        try:
            done = subprocess.run(
                ["git", *args], cwd=self.root, env=env, capture_output=True, text=True,
                timeout=120, check=True,
            )  # fmt: skip
        except FileNotFoundError:
            raise SandboxError("git is not installed: the sandbox needs it") from None
        except subprocess.CalledProcessError as e:
            raise SandboxError(f"git {' '.join(args)} failed: {e.stderr.strip()}") from None
        return done.stdout

    def _commit(self) -> str:
        self.git("init", "-q", "-b", "main")
        self.git("config", "core.logAllRefUpdates", "false")
        self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "--no-verify", "-m", "task")
        self.git("reflog", "expire", "--expire=now", "--all")
        self.git("gc", "-q", "--prune=now")
        shutil.rmtree(self.root / ".git" / "logs", ignore_errors=True)
        shutil.copytree(self.root / ".git", self.base / "start.git")
        return self.git("rev-parse", "HEAD").strip()

    def _stage(self) -> None:
        """The pristine index := the work tree, ignored files too (a .gitignore the agent
        writes hides nothing), bytecode and caches left out."""
        self.git("read-tree", self.start, pristine=True)
        self.git("-c", "core.excludesFile=" + os.devnull, "add", "-A", "-f", "--", ".",
                 *JUNK, pristine=True)  # fmt: skip

    def changed(self) -> list[str]:
        """Paths that differ from the starting commit (edited, added or removed)."""
        self._stage()
        out = self.git("diff", "--cached", "--name-only", "-z", self.start, pristine=True)
        return [p for p in out.split("\0") if p]

    def diff(self) -> str:
        """The workspace against the starting commit: every change, new files included."""
        self._stage()
        return self.git("diff", "--cached", "--binary", self.start, pristine=True)

    def restore_tests(self, record: TaskRecord) -> list[str]:
        """Undo edits of test-like paths, then write the record's test files."""
        reverted = [p for p in self.changed() if is_test_path(p, record.test_files)]
        listing = self.git("ls-tree", "-r", "--name-only", "-z", self.start, pristine=True)
        tracked = set(listing.split("\0"))
        for path in reverted:
            target = self.root / path
            if path in tracked:
                self.git("checkout", self.start, "--", path, pristine=True)
            elif target.is_symlink() or target.is_file():
                target.unlink()
        _write_files(self.root, record.test_files)
        return reverted

    def grade(self, record: TaskRecord) -> Grade:
        """Restore the tests, then run FAIL_TO_PASS + PASS_TO_PASS under the limits."""
        reverted = self.restore_tests(record)
        diff = self.diff()
        tests = list(dict.fromkeys(record.FAIL_TO_PASS + record.PASS_TO_PASS))
        run = run_tests(
            self.root, str(self.base / "bin" / "grade-python"), tests,
            timeout_s=self.config.test_timeout_s, env=self.env,
            preexec_limits=self.config.limits,
        )  # fmt: skip
        return Grade(run, diff, tuple(reverted))


def _write_files(root: Path, files: Mapping[str, str]) -> None:
    for rel, text in files.items():
        p = PurePosixPath(rel)
        if p.is_absolute() or ".." in p.parts or not p.parts or p.parts[0] == ".git":
            raise SandboxError(f"task file path {rel!r} is not a relative path inside the task")
        target = root.joinpath(*p.parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_symlink():
            target.unlink()
        target.write_text(text, encoding="utf-8")
