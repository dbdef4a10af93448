"""A real learner worker for tests: `apprentice worker` as a subprocess, and run polling.

The worker runs in its own session (process group), logs to a file that failures print,
and is stopped with SIGTERM (or killed with SIGKILL by the redelivery test).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.fixtures.settings import REPO


@dataclass
class Worker:
    process: subprocess.Popen[bytes]
    log_path: Path

    def log(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def wait_for_log(self, text: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.log(10_000):
            if self.process.poll() is not None:
                raise RuntimeError(f"worker exited {self.process.returncode}:\n{self.log()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{text!r} not in the worker log:\n{self.log()}")
            time.sleep(0.2)

    def kill(self) -> None:
        """SIGKILL the whole worker: no cleanup, no ack, as a crashed machine would."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process.poll() is not None:
            return
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.kill()
        except ProcessLookupError:
            pass


def start_worker(env: dict[str, str], log_path: Path, *, args: list[str] | None = None) -> Worker:
    """`apprentice worker [args]` with `env` added to this process's environment."""
    full = {**os.environ, "OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE", **env}
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "apprentice.cli", "worker", *(args or [])],
            cwd=REPO, env=full, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    worker = Worker(process, log_path)
    worker.wait_for_log("ready.", timeout=120)
    return worker


def wait_for(
    probe: Callable[[], Any], *, timeout: float, what: str, worker: Worker | None = None
) -> Any:
    """Call `probe` until it returns something truthy; that value is returned."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            log = worker.log() if worker is not None else ""
            raise TimeoutError(f"timed out waiting for {what}\n{log}")
        time.sleep(0.25)
