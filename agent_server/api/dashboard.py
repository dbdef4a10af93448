"""The admin dashboard's files at `/admin/`: the build of dashboard/ (Vite + TypeScript +
Chart.js, made by scripts/dashboard.sh), served as static files by this server.

The files hold no data: the page signs in with the admin token (routers/admin_session.py) and
reads the documented JSON admin API. Every /admin response carries a strict Content Security
Policy (scripts, styles, connections: this origin only; no framing). Without a build, /admin/
answers 503 with how to make one. Tests: tests/api/test_dashboard.py (files, headers) and
tests/dashboard/ (the pages in headless Chromium).
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import HTMLResponse
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

PREFIX = "/admin"
SECURITY_HEADERS = {
    "content-security-policy": "default-src 'self'; img-src 'self' data:; object-src 'none'; "
    "base-uri 'none'; frame-ancestors 'none'; form-action 'self'",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
    "x-content-type-options": "nosniff",
}
NOT_BUILT = """<!doctype html><title>Apprentice admin</title>
<h1>The dashboard is not built</h1>
<p>Build it with <code>scripts/dashboard.sh</code> (needs Node.js 20+), or point
<code>APPRENTICE_DASHBOARD_DIR</code> at a build. The JSON admin API works meanwhile:
<a href="/docs">/docs</a>.</p>"""


def default_dashboard_dir() -> Path:
    return Path(__file__).resolve().parents[2] / "dashboard" / "dist"


def mount_dashboard(app: FastAPI, directory: Path | None) -> None:
    built = directory or default_dashboard_dir()
    if (built / "index.html").is_file():
        app.mount(PREFIX, StaticFiles(directory=built, html=True), name="dashboard")
    else:

        @app.get(PREFIX + "/{path:path}", include_in_schema=False)
        def not_built(path: str) -> HTMLResponse:
            return HTMLResponse(NOT_BUILT, status_code=503)

    app.add_middleware(DashboardHeaders)


class DashboardHeaders:
    """Adds SECURITY_HEADERS to every response under /admin."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or not (path == PREFIX or path.startswith(PREFIX + "/")):
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += [(k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, with_headers)
