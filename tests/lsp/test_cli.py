"""`apprentice lsp` itself: over TCP, refusing bad flags, and on the real dev model.

- `--tcp HOST:PORT`: a pygls client connects over TCP, initializes, completes, shuts down;
  the process exits 0.
- Bad `--tcp` / `--server` values: exit status 2 and a message that says how to fix it.
- The real embedded backend on the dev model (no scripted anything): inline completions
  are stored as suggestion rows with token ids and logprobs, shown/accepted outcomes
  follow, and apprentice.status names the model. What the tiny model writes is not judged.
Run: .venv/bin/python -m pytest tests/lsp/test_cli.py -q
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from lsprotocol import types
from pygls.lsp.client import LanguageClient
from pygls.uris import from_fs_path
from sqlalchemy import select

from feedback.db import make_engine, make_sessionmaker
from feedback.models import Suggestion
from tests.fixtures.settings import run_cli
from tests.lsp.client import PYTHON, REPO, SCRIPTED, lsp_session, server_env
from tests.lsp.scripted_backend import write_script
from tests.lsp.test_server import BUGGY, inline_params, outcomes, run_command

APPRENTICE = str(Path(sys.executable).with_name("apprentice"))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "calc.py").write_text(BUGGY)
    return folder


async def test_tcp_transport(root: Path, tmp_path: Path, sqlite_head_url: str):
    port = free_port()
    script = write_script(tmp_path / "script.json", completion="a + b")
    env = server_env(tmp_path / "home", sqlite_head_url, APPRENTICE_LSP_TEST_BACKEND=SCRIPTED,
                     APPRENTICE_LSP_TEST_SCRIPT=str(script))  # fmt: skip
    log = (tmp_path / "server.log").open("wb")
    server = subprocess.Popen([PYTHON, "-m", "lsp", "--tcp", f"127.0.0.1:{port}"], env=env,
                              cwd=REPO, stderr=log)  # fmt: skip
    try:
        # The server takes one client and ends with it: no probing, connect when it listens.
        client = LanguageClient("tcp-test", "1")
        deadline = time.monotonic() + 60
        while True:
            try:
                await client.start_tcp("127.0.0.1", port)
                break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, "no tcp server"
                await asyncio.sleep(0.1)
        caps = types.ClientCapabilities()
        await client.initialize_async(
            types.InitializeParams(caps, root_uri=from_fs_path(str(root)))
        )
        client.initialized(types.InitializedParams())
        uri = from_fs_path(str(root / "calc.py")) or ""
        item = types.TextDocumentItem(uri, "python", 1, BUGGY)
        client.text_document_did_open(types.DidOpenTextDocumentParams(item))
        got = await asyncio.wait_for(
            client.text_document_inline_completion_async(inline_params(uri, 1, 11)), 60
        )
        status = await client.workspace_execute_command_async(
            types.ExecuteCommandParams("apprentice.status")
        )
        await client.shutdown_async(None)
        client.exit(None)
        assert server.wait(timeout=30) == 0
        await client.stop()
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        log.close()
    assert got is not None and [i.insert_text for i in got.items] == ["a + b"]
    assert status["mode"] == "local"


def test_bad_flags_exit_2():
    done = run_cli("lsp", "--tcp", "8766", timeout=60)
    assert done.returncode == 2 and "HOST:PORT" in done.stderr
    done = run_cli("lsp", "--server", "http://127.0.0.1:8765", timeout=60)
    assert done.returncode == 2 and "WebSocket URL" in done.stderr


@pytest.mark.slow
async def test_apprentice_lsp_on_the_dev_model(
    root: Path, tmp_path: Path, db_url: str, dev_model_dir: Path
):
    env = server_env(tmp_path / "home", db_url, APPRENTICE_MODEL_NAME=str(dev_model_dir))
    async with lsp_session([APPRENTICE, "lsp"], env, root) as (client, editor):
        status = await run_command(client, "apprentice.status")
        uri = editor.open("calc.py", BUGGY)
        items = []
        for line, character in [(1, 11), (0, 14), (4, 0)]:
            got = await client.text_document_inline_completion_async(
                inline_params(uri, line, character)
            )
            assert got is not None
            if got.items and not items:  # accept the first offer at once, as a person would
                command = got.items[0].command
                assert command is not None
                await run_command(client, "apprentice.accept", *command.arguments)
            items += got.items
    assert status["model"] == str(dev_model_dir) and status["mode"] == "local"
    engine = make_engine(db_url)
    try:
        with make_sessionmaker(engine)() as db:
            rows = list(db.scalars(select(Suggestion)))
    finally:
        engine.dispose()
    assert len(rows) == 3  # one per request, each stored before the answer
    for row in rows:
        assert row.kind == "completion" and row.model == str(dev_model_dir)
        assert len(row.completion_token_ids) == len(row.completion_logprobs) > 0
        assert row.file_path == "calc.py" and row.latency_s is not None
    stored = outcomes(db_url)
    shown = [sid for sid, kinds in stored.items() if kinds and kinds[0][0] == "shown"]
    assert len(shown) == len(items)
    if items:
        first = items[0].command.arguments[0]["suggestionId"]
        assert [k for k, _, _ in stored[first]] == ["shown", "accepted"]
