"""One whole Apprentice installation for bench/online_learning.py, in a temporary home.

    system = System(home, model_dir, backend="vllm" | "embedded", database_url="", broker_url="")
    system.start()      # vLLM (or not), `apprentice serve`, `apprentice worker`, a migrated DB
    ...                 # talk to system.port (WebSocket) and system.http (admin API)
    system.stop()

The processes are started in order, logged to home/logs/NAME.log, and stopped together
(SIGTERM to each process group, SIGKILL after 30 s). Not a test; run the bench.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
TOKEN, ADMIN = "bench-token-0123456789abcdef", "bench-admin-0123456789abcdef"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class System:
    """The processes of one Apprentice installation, started in order, stopped together."""

    def __init__(
        self, home: Path, model: Path, *, backend: str, database_url: str = "",
        broker_url: str = "",
    ) -> None:  # fmt: skip
        self.home, self.model, self.backend = home, model, backend
        self.database_url = database_url or f"sqlite:///{home / 'apprentice.db'}"
        self.procs: list[subprocess.Popen[bytes]] = []
        self.names: dict[str, subprocess.Popen[bytes]] = {}
        self.logs = home / "logs"
        self.logs.mkdir(parents=True)
        self.port = free_port()
        self.env = {
            "APPRENTICE_HOME": str(home), "APPRENTICE_TOKEN": TOKEN,
            "APPRENTICE_ADMIN_TOKEN": ADMIN, "APPRENTICE_PORT": str(self.port),
            "APPRENTICE_LEARNER_INTERVAL_S": "0", "OMP_WAIT_POLICY": "PASSIVE",
            "APPRENTICE_LOG_LEVEL": "WARNING", "APPRENTICE_MODEL_NAME": str(model),
        }  # fmt: skip
        if database_url:
            self.env["APPRENTICE_DATABASE_URL"] = database_url
        if broker_url:
            self.env |= {"APPRENTICE_BROKER_URL": broker_url,
                         "APPRENTICE_RESULT_BACKEND": broker_url,
                         "APPRENTICE_LEARNER_QUEUE": f"bench-{uuid.uuid4().hex[:8]}"}  # fmt: skip

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws(self) -> str:
        return f"ws://127.0.0.1:{self.port}/v1/ws"

    def spawn(self, name: str, argv: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        with (self.logs / f"{name}.log").open("wb") as log:
            proc = subprocess.Popen(argv, cwd=REPO, env={**os.environ, **env}, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
        self.procs.append(proc)
        self.names[name] = proc
        return proc

    def wait_http(self, url: str, proc: subprocess.Popen[bytes], name: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                tail = (self.logs / f"{name}.log").read_text(errors="replace")[-3000:]
                raise RuntimeError(f"{name} exited {proc.returncode}:\n{tail}")
            try:
                if httpx.get(url, timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.5)
        raise TimeoutError(f"{name} not up at {url} after {timeout:.0f} s")

    def start(self) -> None:
        from feedback.migrate import upgrade

        upgrade(self.database_url)
        if self.backend == "vllm":
            from agent_server.models.vllm_command import server_command, server_env

            vport = free_port()
            vllm = self.spawn("vllm", server_command(self.model, vport), server_env())
            self.wait_http(f"http://127.0.0.1:{vport}/health", vllm, "vllm", 900)
            self.env |= {"APPRENTICE_MODEL_BACKEND": "openai",
                         "APPRENTICE_MODEL_URL": f"http://127.0.0.1:{vport}/v1"}  # fmt: skip
        cli = [sys.executable, "-m", "apprentice.cli"]
        server = self.spawn("server", [*cli, "serve"], self.env)
        self.wait_http(f"{self.http}/healthz", server, "server", 300)
        self.spawn("worker", [*cli, "worker"], self.env | {"APPRENTICE_LOG_LEVEL": "INFO"})

    def check_alive(self) -> None:
        """Raise, with the end of its log, if any process of the system has exited (a worker
        killed for memory would otherwise leave the bench waiting on a run that never ends)."""
        for proc in self.procs:
            if proc.poll() is not None:
                name = next((n for n, p in self.names.items() if p is proc), "?")
                tail = (self.logs / f"{name}.log").read_text(errors="replace")[-3000:]
                raise RuntimeError(f"{name} exited {proc.returncode} (signal -N: killed):\n{tail}")

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
