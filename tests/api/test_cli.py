"""`apprentice serve`, `up` and `chat` as real subprocesses.

serve/up: start, answer /healthz, keep the token private, stop promptly and cleanly on
SIGINT (exit 0), also with a WebSocket open. chat: a terminal session against a running
server (scripted model), the person accepting the diff on stdin. Run:
    .venv/bin/python -m pytest tests/api/test_cli.py -q
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from agent_server.agent.scripted import ScriptedModel
from agent_server.protocol.client import ProtocolClient
from feedback.db import make_engine
from tests.api.server import TOKEN
from tests.fixtures.settings import REPO


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "apprentice.cli", *args],
        cwd=REPO, env={**os.environ, **env}, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip


def _wait_healthy(proc: subprocess.Popen[str], port: int, timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"exited {proc.returncode}:\n{proc.stdout.read()}")  # type: ignore[union-attr]
        try:
            return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).json()
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise AssertionError(f"no /healthz within {timeout}s:\n{proc.communicate()[0]}")


def _interrupt(proc: subprocess.Popen[str], within: float) -> tuple[int, str, float]:
    started = time.monotonic()
    proc.send_signal(signal.SIGINT)
    try:
        out, _ = proc.communicate(timeout=within)
    except subprocess.TimeoutExpired:
        proc.kill()
        out = proc.communicate()[0]
        raise AssertionError(f"still running {within}s after SIGINT:\n{out}") from None
    return proc.returncode, out, time.monotonic() - started


def test_serve_starts_keeps_the_token_private_and_stops_on_sigint(
    tmp_path: Path, sqlite_head_url: str
) -> None:
    home, port = tmp_path / "home", _free_port()
    env = {  # the dev model named: the default one would be installed
        "APPRENTICE_HOME": str(home),
        "APPRENTICE_DATABASE_URL": sqlite_head_url,
        "APPRENTICE_MODEL_BACKEND": "openai",  # no model is loaded: /healthz is what we test
        "APPRENTICE_MODEL_URL": "http://127.0.0.1:9/v1",
    }
    proc = _start(["serve", "--port", str(port)], env)
    assert _wait_healthy(proc, port, 60)["status"] == "ok"
    token_file = home / "token"
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    token = token_file.read_text().strip()
    headers = {"Authorization": f"Bearer {token}"}
    r = httpx.get(f"http://127.0.0.1:{port}/v1/sessions", headers=headers)
    assert r.status_code == 200

    async def hold_a_websocket_and_interrupt() -> tuple[int, str, float]:
        client = await ProtocolClient.connect(f"ws://127.0.0.1:{port}/v1/ws", token)
        await client.create_session()
        result = await asyncio.to_thread(_interrupt, proc, 20)
        return result

    code, out, elapsed = asyncio.run(hold_a_websocket_and_interrupt())
    assert code == 0, out
    assert elapsed < 15
    assert str(token_file) in out and token not in out
    assert f"http://127.0.0.1:{port}" in out


@pytest.mark.slow
def test_up_prepares_the_database_serves_the_dev_model_and_stops(
    tmp_path: Path, dev_model_dir: Path
) -> None:
    home, port = tmp_path / "home", _free_port()
    (home / "models").mkdir(parents=True)
    (home / "models" / "dev").symlink_to(dev_model_dir)  # built once per run by the fixture
    env = {  # the dev model named: the default one would be installed
        "APPRENTICE_HOME": str(home),
        "APPRENTICE_PORT": str(port),
        "APPRENTICE_MODEL_NAME": str(home / "models" / "dev"),
    }
    proc = _start(["up"], env)
    health = _wait_healthy(proc, port, 180)
    assert health["status"] == "ok"
    engine = make_engine(f"sqlite:///{home / 'apprentice.db'}")  # made and migrated by `up`
    with engine.connect() as conn:
        tables = {row[0] for row in conn.exec_driver_sql(
            "SELECT name FROM sqlite_master WHERE type='table'")}  # fmt: skip
    engine.dispose()
    assert {"sessions", "session_events", "suggestions", "outcomes"} <= tables
    code, out, elapsed = _interrupt(proc, 30)
    assert code == 0, out
    assert elapsed < 20
    assert f"the token is in {home / 'token'}" in out


def test_chat_reviews_a_diff_in_the_terminal(api_settings, serve, tmp_path: Path) -> None:
    def act(tool: str, **args: str) -> str:
        return json.dumps({"thought": "t", "tool": tool, "args": args})

    model = ScriptedModel([
        act("read_file", path="a.py"),
        act("edit", path="a.py", search="x = 1", replace="x = 2"),
        act("finish", message="x is now 2"),
    ])  # fmt: skip
    server = serve(api_settings, backend=model)
    project = tmp_path / "project"
    project.mkdir()
    (project / "a.py").write_text("x = 1\n")
    env = {**os.environ, "APPRENTICE_HOME": str(tmp_path / "chat-home"),
           "APPRENTICE_HOST": "127.0.0.1", "APPRENTICE_PORT": str(server.port),
           "APPRENTICE_TOKEN": TOKEN, "COLUMNS": "120"}  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "apprentice.cli", "chat", "set x to 2", "--workspace",
         str(project)],
        cwd=REPO, env=env, input="a\n\n", capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert (project / "a.py").read_text() == "x = 2\n"
    assert "proposed edit of a.py" in done.stdout and "+x = 2" in done.stdout
    assert "finished" in done.stdout and "x is now 2" in done.stdout
