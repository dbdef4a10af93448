"""The dashboard's files at /admin/: served from the build with strict security headers, a
clear 503 without one; the overview's completion figures from `GET /v1/admin/stats/completions`
(per adapter: the share of requests shown and the acceptance of those shown, with 95 % Wilson
intervals). (The pages themselves: tests/dashboard/, in headless Chromium.)

Run: .venv/bin/python -m pytest tests/api/test_dashboard.py -q
"""

from __future__ import annotations

import datetime as dt

import httpx
import pytest

from agent_server.agent.scripted import ScriptedModel
from agent_server.api.dashboard import SECURITY_HEADERS
from feedback.db import transaction
from feedback.queries.completion_stats import wilson
from feedback.queries.users import add_user
from tests.api.dashboard_data import COMPLETION_TOTALS, add_completion, seed_completion_cases
from tests.api.server import ADMIN_TOKEN

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


END = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)


def completions(server, **params) -> httpx.Response:
    return httpx.get(f"{server.http_url}/v1/admin/stats/completions", params=params, timeout=30,
                     headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})  # fmt: skip


def test_completion_figures_per_adapter_with_intervals(admin_server) -> None:
    db = admin_server.services.db
    at = END - dt.timedelta(hours=1)
    seed_completion_cases(db, at=at)
    with transaction(db) as s:
        ada = add_user(s, "ada")[0].id
    add_completion(db, ("shown", "written"), at=at, adapter_version=3, user_id=ada)
    window = {"since": (END - dt.timedelta(days=1)).isoformat(), "until": END.isoformat()}
    body = completions(admin_server, **window, bucket_s=3600, language="python").json()
    assert body["since"].startswith("2026-10-31") and body["language"] == "python"
    adapters = {a["adapter_version"]: a for a in body["adapters"]}
    assert [a["adapter_version"] for a in body["adapters"]] == [None, 1, 3]  # the base first
    for version, (requests, shown, accepted) in {**COMPLETION_TOTALS, 3: (1, 1, 0)}.items():
        a = adapters[version]
        assert (a["requests"], a["shown"], a["accepted"]) == (requests, shown, accepted)
        for name, k, n in (("shown_share", shown, requests), ("acceptance", accepted, shown)):
            r = a[name]
            assert (r["k"], r["n"], r["value"]) == (k, n, k / n)
            assert (r["low"], r["high"]) == pytest.approx(wilson(k, n))
            assert 0 <= r["low"] <= r["value"] <= r["high"] <= 1
    buckets = body["buckets"]
    assert {dt.datetime.fromisoformat(b["t"]) for b in buckets} == {at}  # one hour bucket
    assert sum(b["requests"] for b in buckets) == 12
    # All languages: policy-v2's TypeScript completion too; one person's: theirs only.
    everything = completions(admin_server, **window).json()
    assert {a["adapter_version"] for a in everything["adapters"]} == {None, 1, 2, 3}
    hers = completions(admin_server, **window, user="ada").json()["adapters"]
    assert [(a["adapter_version"], a["shown"], a["accepted"]) for a in hers] == [(3, 1, 0)]
    assert hers[0]["acceptance"]["value"] == 0.0 and hers[0]["acceptance"]["low"] == 0.0


def test_completion_figures_without_requests_and_bad_queries(admin_server) -> None:
    body = completions(admin_server).json()  # the last 30 days of an empty log
    assert body["adapters"] == [] and body["buckets"] == []
    assert dt.datetime.fromisoformat(body["until"]) - dt.datetime.fromisoformat(
        body["since"]) == dt.timedelta(days=30)  # fmt: skip
    for params in (
        {"language": "cobol"},
        {"user": "nobody"},
        {"bucket_s": 1},
        {"since": "2026-11-02T00:00:00Z", "until": "2026-11-01T00:00:00Z"},
    ):
        response = completions(admin_server, **params)
        assert response.status_code == 422 and response.json()["detail"], params
    assert httpx.get(f"{admin_server.http_url}/v1/admin/stats/completions").status_code == 401
