"""Run model-written Python in a child process that cannot run forever or take the machine.

    outcome = run_python(program, Limits(timeout_s=5))
    outcome.status  # "passed" (exit 0) | "failed" (an exception, a refused call) | "timeout"

What `run_python` enforces, and how:
- its own process (`python -I -S -B`: no user site, no site-packages, no PYTHON* variables,
  no bytecode written) in its own session, in a fresh temporary directory (its cwd and HOME),
  removed afterwards; a wall-clock timeout, after which the whole process group is killed;
- kernel resource limits (`resource.setrlimit`, soft = hard, so the program cannot raise
  them): CPU seconds, address space (a memory bomb gets MemoryError), file size (its stdout
  and stderr go to files in the directory, so a print loop is stopped too), no core files,
  and no new processes (RLIMIT_NPROC; not enforced for root, see below);
- a PEP 578 audit hook that refuses, with PermissionError, writes (open for writing, remove,
  rename, mkdir, chmod, ...) to any path outside the temporary directory, new processes
  (subprocess, os.system, fork, exec, spawn), sockets, signals to other processes, ctypes and
  changing resource limits.

The limits are set by a small runner inside the child before the untrusted code is compiled,
not in a `preexec_fn`: Python documents preexec_fn as unsafe when the parent has threads, and
the parent here does (the embedded backend's worker thread, torch's threads). The effect is
the same: nothing the program runs happens before the limits are in place.

What it does NOT enforce: audit hooks are a guard against a model's mistakes, not a security
boundary against hostile code (C extensions or interpreter bugs can step around them), and
there is no network namespace: cutting the network off at the kernel needs privileges (a
user or network namespace), which is not cheap or portable. As root, RLIMIT_NPROC is ignored
by the kernel and file permissions protect nothing, so only the audit hook stops forks and
writes. For untrusted code, run the evaluation in a container without network (the Docker
image) as an unprivileged user. Tested in tests/learner/test_codegen.py.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Status = Literal["passed", "failed", "timeout"]

# Runs first in the child: limits, then the audit hook, then the program (solution.py).
_RUNNER = r"""
import os, resource, sys
ROOT = os.path.realpath(os.getcwd())
for kind, value in LIMITS:
    resource.setrlimit(getattr(resource, kind), (value, value))
with open("solution.py", encoding="utf-8") as f:
    code = compile(f.read(), "solution.py", "exec")
WRITE = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
REFUSED = {
    "subprocess.Popen", "os.system", "os.exec", "os.spawn", "os.posix_spawn", "os.fork",
    "os.forkpty", "os.kill", "os.killpg", "pty.spawn", "socket.__new__", "socket.connect",
    "socket.bind", "socket.getaddrinfo", "ctypes.dlopen", "resource.setrlimit",
    "resource.prlimit", "os.chroot", "os.setuid",
}
PATHS = {
    "os.remove", "os.rename", "os.rmdir", "os.mkdir", "os.truncate", "os.chmod", "os.chown",
    "os.link", "os.symlink", "os.utime", "os.setxattr", "os.removexattr", "shutil.rmtree",
    "shutil.move", "shutil.copyfile", "shutil.copytree", "os.chflags",
}
realpath, fspath, sep = os.path.realpath, os.fspath, os.sep

def inside(path):
    if isinstance(path, int) or path is None:
        return True
    if not isinstance(path, (str, bytes, os.PathLike)):
        return True
    path = fspath(path)
    if isinstance(path, bytes):
        path = path.decode("utf-8", "surrogateescape")
    full = realpath(path)
    return full == ROOT or full.startswith(ROOT + sep)

def hook(event, args):
    if event in REFUSED:
        raise PermissionError(f"sandbox: {event} is not allowed")
    if event == "open":
        path, mode, flags = args
        writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
            isinstance(flags, int) and flags & WRITE)
        if writes and not inside(path):
            raise PermissionError(f"sandbox: writing {path!r} (outside its directory)")
    elif event in PATHS and not all(inside(a) for a in args if not isinstance(a, int)):
        raise PermissionError(f"sandbox: {event}{args!r} outside its directory")

sys.addaudithook(hook)
exec(code, {"__name__": "__main__", "__builtins__": __builtins__})
"""


@dataclass(frozen=True)
class Limits:
    """What one sandboxed run may use."""

    timeout_s: float = 5.0  # wall clock; the process group is killed after it
    memory_mb: int = 1024  # address space (RLIMIT_AS)
    file_mb: int = 16  # largest file it may write, stdout and stderr included (RLIMIT_FSIZE)

    def rlimits(self) -> list[tuple[str, int]]:
        cpu = max(1, int(self.timeout_s) + 1)  # a backstop: the wall clock usually ends it
        return [
            ("RLIMIT_CPU", cpu),
            ("RLIMIT_AS", self.memory_mb * 2**20),
            ("RLIMIT_FSIZE", self.file_mb * 2**20),
            ("RLIMIT_CORE", 0),
            ("RLIMIT_NPROC", 1),  # itself: no fork, no threads (ignored for root)
        ]


@dataclass(frozen=True)
class RunOutcome:
    """How one `run_python` ended (feedback's `Outcome` is what became of a suggestion)."""

    status: Status
    detail: str  # the last line of stderr when it failed ("" when it passed)
    seconds: float

    @property
    def passed(self) -> bool:
        return self.status == "passed"


DEFAULT_LIMITS = Limits()


def run_python(program: str, limits: Limits = DEFAULT_LIMITS) -> RunOutcome:
    """Run `program` (Python source) under `limits`; see the module docstring."""
    import time

    with tempfile.TemporaryDirectory(prefix="apprentice-sandbox-") as tmp:
        folder = Path(tmp)
        (folder / "solution.py").write_text(program, encoding="utf-8")
        runner = _RUNNER.replace("LIMITS", repr(limits.rlimits()), 1)
        (folder / "runner.py").write_text(runner, encoding="utf-8")
        env = {"PATH": "/usr/bin:/bin", "HOME": tmp, "TMPDIR": tmp, "LANG": "C.UTF-8"}
        start = time.monotonic()
        with open(folder / "stdout.txt", "wb") as out, open(folder / "stderr.txt", "wb") as err:
            proc = subprocess.Popen(
                [sys.executable, "-I", "-S", "-B", "runner.py"],
                cwd=tmp,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
                close_fds=True,
            )
            try:
                code = proc.wait(timeout=limits.timeout_s)
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                detail = f"timed out after {limits.timeout_s:g}s"
                return RunOutcome("timeout", detail, _since(start))
        seconds = _since(start)
        if code == 0:
            return RunOutcome("passed", "", seconds)
        if code in (-signal.SIGXCPU, -signal.SIGKILL):
            return RunOutcome("timeout", f"CPU limit ({limits.rlimits()[0][1]}s)", seconds)
        return RunOutcome("failed", _last_line(folder / "stderr.txt", code), seconds)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """Kill its session (it is the group leader: start_new_session), then reap it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _since(start: float) -> float:
    import time

    return round(time.monotonic() - start, 3)


def _last_line(path: Path, code: int) -> str:
    lines = path.read_bytes()[-4000:].decode("utf-8", "replace").strip().splitlines()
    if lines:
        return lines[-1][:300]
    if code < 0:
        return f"killed by {signal.Signals(-code).name}"
    return f"exit status {code}"
