"""Process entry points behind `apprentice serve`, `apprentice up` and `apprentice chat`.

    apprentice serve [--host H] [--port P]   # the agent server in uvicorn
    apprentice up                             # + the learner's worker and schedule
    apprentice chat "fix the typo in a.py" --workspace .

Before serving, both run apprentice/prepare.py: the SQLite database migrated, the default
model installed on first start (or one line naming the fix, raised as StartupError).
uvicorn handles Ctrl-C / SIGTERM: open connections are closed, the backend and the database
are released, the process exits 0. Tests: tests/api/test_cli.py runs these as subprocesses.
"""

from __future__ import annotations

import contextlib
import socket
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import uvicorn

from agent_server.api.config import UVICORN_WS_MAX_SIZE
from apprentice.prepare import StartupError, prepare
from ground.settings import Settings

GRACEFUL_SHUTDOWN_S = 5  # open WebSockets get this long to finish before they are cut


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def uvicorn_config(app: object, settings: Settings, host: str, port: int) -> uvicorn.Config:
    return uvicorn.Config(
        app,  # type: ignore[arg-type]
        host=host,
        port=port,
        ws_max_size=UVICORN_WS_MAX_SIZE,
        # Small JSON frames, mostly on loopback: deflate cost a fifth of the server's CPU in
        # bench/ws_load.py and saved nothing worth it.
        ws_per_message_deflate=False,
        log_level=settings.log_level.lower(),
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
    )


def token_hint(settings: Settings) -> str:
    if settings.token.get_secret_value():
        return "the token is APPRENTICE_TOKEN"
    return f"the token is in {settings.token_file}"


def serve(settings: Settings, *, host: str | None = None, port: int | None = None) -> None:
    """Prepare (apprentice/prepare.py: migrate SQLite, install the default model on first start,
    or StartupError), then run the agent server in the foreground until Ctrl-C / SIGTERM."""
    prepare(settings)
    _serve(settings, host=host, port=port)


def _serve(settings: Settings, *, host: str | None, port: int | None) -> None:
    from agent_server.api.main import create_app

    host, port = host or settings.host, port or settings.port
    app = create_app(settings)
    _say(f"Apprentice agent server on http://{host}:{port} (WebSocket ws://{host}:{port}/v1/ws)")
    _say(f"{token_hint(settings)}; model: {settings.model_name} ({settings.model_backend})")
    admin = settings.admin_token_file if not settings.admin_token.get_secret_value() else None
    _say(f"admin dashboard on http://{host}:{port}/admin/ (sign in with the admin token"
         + (f" in {admin})" if admin else ", APPRENTICE_ADMIN_TOKEN)"))  # fmt: skip
    # uvicorn shuts down cleanly first, then re-raises the Ctrl-C it captured; a clean stop
    # on request is a success (exit 0), not an interrupted program (130).
    with contextlib.suppress(KeyboardInterrupt):
        uvicorn.Server(uvicorn_config(app, settings, host, port)).run()
    _say("stopped")


def up(settings: Settings) -> None:
    """Everything on embedded defaults: the agent server here; the learner's worker and
    schedule as child processes on the same broker (apprentice/processes.py)."""
    from apprentice.processes import start_learner

    prepare(settings)
    with start_learner(settings):
        _serve(settings, host=None, port=None)


@dataclass
class BackgroundServer:
    """An in-process server on a free loopback port (used by `chat` when none is running)."""

    server: uvicorn.Server
    thread: threading.Thread
    port: int

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(GRACEFUL_SHUTDOWN_S + 10)


def start_background_server(settings: Settings) -> BackgroundServer:
    from agent_server.api.main import create_app

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn_config(create_app(settings), settings, "127.0.0.1", port)
    config.log_level = "warning"
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("the in-process agent server failed to start (see above)")
        time.sleep(0.05)
    return BackgroundServer(server, thread, port)


def chat(settings: Settings, task: str, workspace: Path) -> int:
    """Terminal chat; uses the server at settings.host:port, else starts one in-process."""
    import asyncio

    import httpx

    from apprentice.chat import run_chat
    from ground.tokens import user_token

    base = f"http://{settings.host}:{settings.port}"
    background = None
    try:
        httpx.get(f"{base}/healthz", timeout=2).raise_for_status()
        url = f"ws://{settings.host}:{settings.port}/v1/ws"
    except httpx.HTTPError:
        _say("no agent server running; starting one in this process")
        try:
            prepare(settings)
        except StartupError as exc:
            _say(f"error: {exc}")
            return 1
        background = start_background_server(settings)
        url = f"ws://127.0.0.1:{background.port}/v1/ws"
    token = user_token(settings)
    try:
        return asyncio.run(run_chat(url, token, task, workspace.resolve()))
    finally:
        if background is not None:
            background.stop()
