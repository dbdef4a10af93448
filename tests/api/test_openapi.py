"""The HTTP API's OpenAPI schema is complete: every route the app serves (but the WebSocket
and the dashboard's static files) is in /openapi.json with a described success response, so
the dashboard needs nothing the schema does not document. Secrets stay out of logs.

Run: .venv/bin/python -m pytest tests/api/test_openapi.py -q
"""

from __future__ import annotations

import logging

import httpx
import pytest
from fastapi.routing import APIRoute

from tests.api.server import ADMIN_TOKEN as ADMIN
from tests.api.server import TOKEN

pytestmark = pytest.mark.postgres


@pytest.fixture
def server(admin_server):
    return admin_server


def api_routes(routes) -> list[APIRoute]:
    """Every APIRoute, also inside the routers FastAPI includes lazily."""
    found = []
    for route in routes:
        if isinstance(route, APIRoute):
            found.append(route)
        elif hasattr(route, "original_router"):
            found += api_routes(route.original_router.routes)
    return found


def test_every_route_is_documented_with_its_response(server) -> None:
    schema = httpx.get(f"{server.http_url}/openapi.json").json()
    routes = [r for r in api_routes(server.app.routes) if r.include_in_schema]
    assert len(routes) >= 15
    for route in routes:
        assert route.path in schema["paths"], f"{route.path} is not in the OpenAPI schema"
        for method in route.methods - {"HEAD"}:
            operation = schema["paths"][route.path][method.lower()]
            ok = [code for code in operation["responses"] if code.startswith("2")]
            assert ok, f"{method} {route.path} documents no success response"
            if ok[0] != "204":
                content = operation["responses"][ok[0]].get("content") or {}
                assert content, f"{method} {route.path}: its response has no content type"
    admin = [p for p in schema["paths"] if p.startswith("/v1/admin")]
    for path in ("/v1/admin/session", "/v1/admin/stats/outcomes", "/v1/admin/runs/{run_id}/events",
                 "/v1/admin/tasks/solve-rates", "/v1/admin/rollouts/{rollout_id}"):  # fmt: skip
        assert path in admin


def test_tokens_never_reach_the_logs(server, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    client = httpx.Client(base_url=server.http_url)
    for token in (ADMIN, TOKEN, "wrong-token-0123456789abcdef"):
        client.post("/v1/admin/session", json={"token": token})
    client.get("/v1/admin/runs")
    httpx.get(f"{server.http_url}/metrics", headers={"Authorization": f"Bearer {ADMIN}"})
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "sign-in refused" in text  # the refusals are logged ...
    for secret in (ADMIN, TOKEN, "wrong-token-0123456789abcdef"):
        assert secret not in text  # ... without what was typed
