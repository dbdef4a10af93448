"""`apprentice up` runs the whole loop from one command: the server, the learner's worker and
its schedule on the embedded broker. Feedback arrives; the schedule starts a cycle by
itself; the server then serves the new adapter; Ctrl-C stops all three."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_server.protocol import messages as p
from agent_server.protocol.client import ProtocolClient
from feedback.db import make_engine, make_sessionmaker
from tests.fixtures.settings import REPO
from tests.learner.conftest import FAST
from tests.learner.synthetic_feedback import seed_feedback
from tests.learner.worker import wait_for

TOKEN, ADMIN = "up-token-0123456789abcdef", "up-admin-0123456789abcdef"


async def test_up_learns_on_schedule_and_stops_everything(
    tmp_path: Path, dev_model_dir: Path, dev_tokenizer: Any
) -> None:
    home = tmp_path / "home"
    (home / "models").mkdir(parents=True)
    (home / "models" / "dev").symlink_to(dev_model_dir)
    port = _free_port()
    env = {**os.environ, "APPRENTICE_HOME": str(home), "APPRENTICE_PORT": str(port),
           "APPRENTICE_MODEL_NAME": str(home / "models" / "dev"),  # the default installs one
           "APPRENTICE_TOKEN": TOKEN, "APPRENTICE_ADMIN_TOKEN": ADMIN,
           "APPRENTICE_LEARNER_INTERVAL_S": "2", "APPRENTICE_LEARNER_MIN_FEEDBACK": "20",
           # The learner settings of the cycle tests (half held out, 3 of each kind, 12 steps):
           # with the defaults' 6 short steps on 32 outcomes the gate deferred 1 run in 6.
           "APPRENTICE_LEARNER": json.dumps(FAST),
           "OMP_WAIT_POLICY": "PASSIVE"}  # fmt: skip
    up = [sys.executable, "-m", "apprentice.cli", "up"]
    proc = subprocess.Popen(up, cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)  # fmt: skip
    try:
        base = f"http://127.0.0.1:{port}"
        wait_for(lambda: _healthy(base), timeout=180, what="apprentice up")
        engine = make_engine(f"sqlite:///{home / 'apprentice.db'}")  # migrated by `up`
        seed_feedback(make_sessionmaker(engine), dev_tokenizer, dev_model_dir, 32)
        engine.dispose()

        api = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {ADMIN}"})

        def scheduled_run_done() -> dict[str, Any] | None:
            runs = api.get("/v1/admin/runs").json()
            ended = ("succeeded", "failed", "skipped", "deferred")
            done = [r for r in runs if r["status"] in ended]
            return done[0] if done else None

        run = wait_for(scheduled_run_done, timeout=300, what="a scheduled learning cycle")
        logs = "\n".join(f.read_text()[-2000:] for f in (home / "logs").glob("*.log"))
        assert run["status"] == "succeeded" and run["trigger"] == "schedule", (
            run["status"],
            run.get("error"),
            logs,
        )
        assert len(api.get("/v1/admin/runs").json()) == 1, "one cycle for one batch of feedback"

        deadline = time.monotonic() + 10
        while (adapter := await served_by(port)) != "policy-v1":
            assert time.monotonic() < deadline, f"still served by {adapter}"
    finally:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
    pids = {name: int(pid) for name, pid in re.findall(r"(worker|beat) \(pid (\d+)\)", out)}
    assert pids.keys() == {"worker", "beat"}, out
    for pid in pids.values():  # stopped and reaped by `up`
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _healthy(base: str) -> bool:
    try:
        return httpx.get(f"{base}/healthz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


async def served_by(port: int) -> str | None:
    client = await ProtocolClient.connect(f"ws://127.0.0.1:{port}/v1/ws", TOKEN)
    try:
        await client.send(p.CompletionRequest(id="c", path="a.py", prefix="x = ", max_tokens=2))
        return (await client.expect(p.CompletionSuggestion)).adapter
    finally:
        await client.close()
