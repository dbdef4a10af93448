"""Fixtures for tests/api: settings on a fresh PostgreSQL database, and a server factory."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ground.settings import Settings
from tests.api.server import TOKEN, RunningServer, start_server


@pytest.fixture
def api_settings(tmp_path: Path, pg_head_url: str) -> Settings:
    """Settings with a known token on a fresh migrated PostgreSQL database."""
    return Settings(home=tmp_path / "home", database_url=pg_head_url, token=TOKEN)


@pytest.fixture
def serve() -> Iterator[Callable[..., RunningServer]]:
    """`serve(settings, backend=..., config=...)` starts a real server; all stop at teardown."""
    running: list[RunningServer] = []

    def start(settings: Settings, **kwargs: Any) -> RunningServer:
        server = start_server(settings, **kwargs)
        running.append(server)
        return server

    yield start
    for server in running:
        if server.thread.is_alive():
            server.stop()
