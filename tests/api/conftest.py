"""Fixtures for tests/api: settings on a fresh PostgreSQL database, and a server factory."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from ground.settings import Settings
from tests.api.server import ADMIN_TOKEN, TOKEN, RunningServer, start_server


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


@pytest.fixture
def admin_server(api_settings: Settings, serve: Callable[..., RunningServer]) -> RunningServer:
    """A real server on a fresh PostgreSQL database, admin token ADMIN_TOKEN, a scripted
    model that answers nothing (the admin API and the dashboard need none)."""
    from agent_server.agent.scripted import ScriptedModel

    settings = api_settings.model_copy(update={"admin_token": SecretStr(ADMIN_TOKEN)})
    return serve(settings, backend=ScriptedModel([]))
