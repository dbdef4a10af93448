"""`Services`: what the app's routers share — settings, auth, database, model backend, sessions.

Built when the app starts (`start_services`, from main.py's lifespan) and closed when it
stops. The backend comes from `agent_server.models.factory.build_backend(settings)` unless
one is injected (tests and benches pass a ScriptedModel); an injected backend belongs to
the caller and is not closed here. Nothing to run.
"""

from __future__ import annotations

import dataclasses
import logging

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from agent_server.api.auth import AuthConfig
from agent_server.api.config import ApiConfig
from agent_server.api.limits import TokenLimits
from agent_server.api.metrics import ServerMetrics
from agent_server.api.sessions import SessionManager
from agent_server.models.base import ModelBackend
from agent_server.models.deployments import deployment_backend
from agent_server.session.store import Store
from feedback.db import make_engine, make_sessionmaker
from ground.settings import Settings

log = logging.getLogger(__name__)


@dataclasses.dataclass
class Services:
    settings: Settings
    config: ApiConfig
    auth: AuthConfig
    backend: ModelBackend
    engine: Engine
    db: sessionmaker[Session]
    store: Store
    sessions: SessionManager
    owns_backend: bool
    metrics: ServerMetrics
    limits: TokenLimits

    async def aclose(self) -> None:
        for live in list(self.sessions.live.values()):
            if live.running is not None:
                live.running.cancel()
        if self.owns_backend:
            await self.backend.aclose()
        self.engine.dispose()


def start_services(
    settings: Settings,
    config: ApiConfig,
    auth: AuthConfig,
    backend: ModelBackend | None,
    metrics: ServerMetrics | None = None,
) -> Services:
    owns = backend is None
    if backend is None:
        from agent_server.models.factory import build_backend

        backend = build_backend(settings)
    engine = make_engine(settings.database_url)
    factory = make_sessionmaker(engine)
    store = Store(factory)
    log.info("agent server: model %s, database %s", backend.model_name, engine.url)
    sessions = SessionManager(store, backend, config)
    metrics = metrics or ServerMetrics()
    metrics.watch_sessions(lambda: len(sessions.live))
    metrics.add_database(factory, deployment_backend(settings.model_backend))
    return Services(
        settings=settings,
        config=config,
        auth=auth,
        backend=backend,
        engine=engine,
        db=factory,
        store=store,
        sessions=sessions,
        owns_backend=owns,
        metrics=metrics,
        limits=TokenLimits(
            max_connections=config.max_connections_per_token,
            messages_per_s=config.messages_per_s,
            burst=config.message_burst,
        ),
    )
