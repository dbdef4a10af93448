"""Entry point behind `apprentice lsp` and `python -m lsp`: Settings -> config -> server.

Builds the server (the state in lsp/server.py plus the handlers of lsp/features/) and runs it:

    settings = Settings()
    run(settings, make_config(settings, tcp=None, server=None))   # in-process, stdio
    run(settings, make_config(settings, tcp="127.0.0.1:8766", server="ws://127.0.0.1:8765/v1/ws"))

Logs go to stderr (stdout carries the protocol). In-process mode builds the model backend
the settings name (agent_server/models/factory.py) when the client initializes.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable

from agent_server.models.base import ModelBackend
from ground.settings import Settings
from lsp.config import LspConfig
from lsp.features import register_all
from lsp.host import AgentHost
from lsp.server import ApprenticeServer, HostFactory

log = logging.getLogger(__name__)


def host_factory(
    settings: Settings, config: LspConfig, backend_factory: Callable[[], ModelBackend] | None
) -> HostFactory:
    if config.server_url:
        from lsp.remote import RemoteHost

        def remote(root: str) -> AgentHost:
            return RemoteHost(config, root)

        return remote

    def build() -> ModelBackend:
        if backend_factory is not None:
            return backend_factory()
        from agent_server.models.factory import build_backend

        return build_backend(settings)

    def local(root: str) -> AgentHost:
        from lsp.local import LocalHost

        return LocalHost(config, root, build)

    return local


def build_server(config: LspConfig, host_factory: HostFactory) -> ApprenticeServer:
    server = ApprenticeServer(config, host_factory)
    register_all(server)
    return server


def serve(config: LspConfig, host_factory: HostFactory) -> None:
    """Run until the client sends exit (stdio) or disconnects (tcp)."""
    server = build_server(config, host_factory)
    if config.transport == "tcp":
        log.info("apprentice lsp on tcp %s:%s (%s mode)", config.host, config.port, config.mode)
        server.start_tcp(config.host, config.port)
    else:
        server.start_io()


def make_config(settings: Settings, *, tcp: str | None, server: str | None) -> LspConfig:
    """The server's config; ValueError (saying how to fix it) for a bad --tcp or --server."""
    return LspConfig.from_settings(settings, tcp=tcp, server=server)


def run(
    settings: Settings,
    config: LspConfig,
    *,
    backend_factory: Callable[[], ModelBackend] | None = None,
) -> None:
    """Serve until the client exits (stdio) or disconnects (tcp)."""
    logging.basicConfig(
        stream=sys.stderr,
        level=settings.log_level,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # pygls logs every message at INFO; keep its chatter at WARNING unless debugging.
    pygls_level = logging.DEBUG if settings.log_level == "DEBUG" else logging.WARNING
    logging.getLogger("pygls").setLevel(pygls_level)
    if settings.database_url.startswith("sqlite"):
        settings.ensure_home()  # the default SQLite file lives there
    serve(config, host_factory(settings, config, backend_factory))
