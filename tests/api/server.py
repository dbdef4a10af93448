"""Run the real app in uvicorn on a loopback port, in a background thread, for tests.

A real server and real sockets: clients connect with the `websockets` library exactly as an
editor would. The thread has its own event loop, so the test's loop is the client's only.
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import uvicorn

from agent_server.api.config import UVICORN_WS_MAX_SIZE, ApiConfig
from agent_server.api.main import create_app
from ground.settings import Settings

TOKEN = "test-token-0123456789abcdef"
ADMIN_TOKEN = "admin-token-0123456789abcdef"


@dataclass
class RunningServer:
    settings: Settings
    server: uvicorn.Server
    thread: threading.Thread
    port: int
    app: Any = field(repr=False)

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/v1/ws"

    @property
    def services(self) -> Any:
        return self.app.state.services

    def stop(self, timeout: float = 15) -> None:
        self.server.should_exit = True
        self.thread.join(timeout)
        if self.thread.is_alive():
            raise RuntimeError("the test server did not stop in time")


def start_server(
    settings: Settings, *, backend: Any = None, config: ApiConfig | None = None
) -> RunningServer:
    app = create_app(settings, backend=backend, config=config)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    uv_config = uvicorn.Config(
        app,
        log_level="warning",
        ws_max_size=UVICORN_WS_MAX_SIZE,
        lifespan="on",
        ws_per_message_deflate=False,
    )
    server = uvicorn.Server(uv_config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    return RunningServer(settings, server, thread, port, app)
