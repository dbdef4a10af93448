"""The dashboard's files at /admin/: served from the build with strict security headers, a
clear 503 without one. (The pages themselves: tests/dashboard/, in headless Chromium.)

Run: .venv/bin/python -m pytest tests/api/test_dashboard.py -q
"""

from __future__ import annotations

import httpx
import pytest

from agent_server.agent.scripted import ScriptedModel
from agent_server.api.dashboard import SECURITY_HEADERS

pytestmark = pytest.mark.postgres


def test_the_build_is_served_with_security_headers(api_settings, serve, tmp_path) -> None:
    build = tmp_path / "dist"
    (build / "assets").mkdir(parents=True)
    (build / "index.html").write_text("<!doctype html><p>dashboard</p>")
    (build / "assets" / "app.js").write_text("console.log(1)")
    settings = api_settings.model_copy(update={"dashboard_dir": build})
    server = serve(settings, backend=ScriptedModel([]))
    page = httpx.get(f"{server.http_url}/admin/")
    assert page.status_code == 200 and "dashboard" in page.text
    for name, value in SECURITY_HEADERS.items():
        assert page.headers[name] == value
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    script = httpx.get(f"{server.http_url}/admin/assets/app.js")
    assert script.status_code == 200 and "javascript" in script.headers["content-type"]
    assert httpx.get(f"{server.http_url}/admin/../token").status_code == 404
    assert "content-security-policy" not in httpx.get(f"{server.http_url}/healthz").headers
    redirect = httpx.get(f"{server.http_url}/admin")
    assert redirect.status_code in (307, 308) and redirect.headers["location"].endswith("/admin/")


def test_without_a_build_admin_says_how_to_make_one(api_settings, serve, tmp_path) -> None:
    settings = api_settings.model_copy(update={"dashboard_dir": tmp_path / "nothing"})
    server = serve(settings, backend=ScriptedModel([]))
    page = httpx.get(f"{server.http_url}/admin/")
    assert page.status_code == 503 and "scripts/dashboard.sh" in page.text
    assert page.headers["x-frame-options"] == "DENY"
