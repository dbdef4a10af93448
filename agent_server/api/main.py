"""The agent server's ASGI app: `create_app(settings)`; `apprentice serve` runs it in uvicorn.

Try it: `apprentice serve`, then `curl localhost:8765/healthz`. Tests pass a scripted
backend: `create_app(settings, backend=ScriptedModel([...]))`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from agent_server.api.auth import AuthConfig, install_access_log_filter
from agent_server.api.config import ApiConfig
from agent_server.api.dashboard import mount_dashboard
from agent_server.api.metrics import HttpMetricsMiddleware, ServerMetrics
from agent_server.api.reaper import start_reaper, stop_reaper
from agent_server.api.routers import (
    admin,
    admin_session,
    admin_tasks,
    admin_views,
    health,
    metrics,
    sessions,
    ws,
)
from agent_server.api.services import start_services
from agent_server.models.base import ModelBackend
from agent_server.models.deployments import start_follower
from ground import __version__
from ground.settings import Settings


def create_app(
    settings: Settings, *, backend: ModelBackend | None = None, config: ApiConfig | None = None
) -> FastAPI:
    config = config or ApiConfig.from_settings(settings)
    auth = AuthConfig.from_settings(settings)  # makes the token files now, before serving
    install_access_log_filter()
    server_metrics = ServerMetrics()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.services = start_services(settings, config, auth, backend, server_metrics)
        services = app.state.services  # serve what the deployments table names (learner)
        app.state.follower = start_follower(
            services.backend, services.db, settings.model_backend,
            adapters_dir=settings.adapters_dir,
        )  # fmt: skip
        # Fails learner runs whose worker died mid-step (api/reaper.py).
        reaper = start_reaper(settings, services.db, every_s=config.reap_every_s,
                              dead_worker_s=config.dead_worker_s)  # fmt: skip
        try:
            yield
        finally:
            await stop_reaper(reaper)
            if app.state.follower is not None:
                await app.state.follower.aclose()
            await app.state.services.aclose()

    app = FastAPI(title="Apprentice agent server", version=__version__, lifespan=lifespan)
    routers = (health, sessions, ws, admin_session, admin, admin_views, admin_tasks, metrics)
    for module in routers:
        app.include_router(module.router)
    mount_dashboard(app, settings.dashboard_dir)
    app.add_middleware(HttpMetricsMiddleware, metrics=server_metrics)
    return app
