"""What the dashboard reads: outcome aggregates, runs with step times, and a run's live events
(server-sent), against a real server on PostgreSQL.

Run: .venv/bin/python -m pytest tests/api/test_admin_views.py -q
"""

from __future__ import annotations

import datetime as dt
import json
import threading
import time

import httpx
import pytest

from feedback.db import transaction
from feedback.queries import create_run, finish_run, start_run, update_run_step
from tests.api.dashboard_data import seed_outcomes, seed_runs
from tests.api.server import ADMIN_TOKEN as ADMIN

pytestmark = pytest.mark.postgres

HEADERS = {"Authorization": f"Bearer {ADMIN}"}
END = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)


@pytest.fixture
def server(admin_server):
    return admin_server


def get(server, path: str, **params) -> httpx.Response:
    return httpx.get(f"{server.http_url}{path}", params=params, headers=HEADERS, timeout=30)


def test_outcome_series_counts_what_the_log_holds(server) -> None:
    seeded = seed_outcomes(server.services.db, n=2000, days=6, end=END, adapters=(None, 1, 2))
    since = (END - dt.timedelta(days=7)).isoformat()
    body = get(server, "/v1/admin/stats/outcomes", since=since, until=END.isoformat(),
               bucket_s=3600).json()  # fmt: skip
    got: dict = {}
    for row in body["rows"]:
        key = (row["adapter_version"], row["suggestion"], row["kind"])
        got[key] = got.get(key, 0) + row["n"]
        assert dt.datetime.fromisoformat(row["t"]).minute == 0  # hour buckets
    assert sum(got.values()) >= sum(seeded.values()) - 5  # a story's last steps may pass END
    assert {k for k in got} <= set(seeded) and "python" in body["languages"]
    python = get(server, "/v1/admin/stats/outcomes", since=since, until=END.isoformat(),
                 language="python").json()  # fmt: skip
    assert 0 < sum(r["n"] for r in python["rows"]) < sum(got.values())


@pytest.mark.parametrize(
    "params",
    [
        {"since": "2026-11-02T00:00:00Z", "until": "2026-11-01T00:00:00Z"},
        {"since": "2020-01-01T00:00:00Z", "bucket_s": 60},
        {"language": "cobol"},
        {"bucket_s": 1},
    ],
)
def test_bad_queries_are_refused_with_a_reason(server, params) -> None:
    response = get(server, "/v1/admin/stats/outcomes", **params)
    assert response.status_code == 422 and response.json()["detail"]


def test_runs_list_their_kind_and_step_times(server) -> None:
    seed_runs(server.services.db, n=3)
    runs = get(server, "/v1/admin/runs").json()
    assert len(runs) == 3 and runs[0]["kind"] == "feedback"
    names = [s["name"] for s in runs[0]["step_times"]]
    assert names == ["collect", "train", "evaluate", "publish", "deploy"]
    assert all(s["seconds"] >= 0 for s in runs[0]["step_times"])
    assert runs[0]["dataset"] == {"train": 40, "heldout": 10}


def test_a_run_in_progress_streams_each_change_until_it_ends(server) -> None:
    db = server.services.db
    with transaction(db) as s:
        run_id = create_run(s, trigger="test").id

    def progress() -> None:
        time.sleep(1.5)
        with transaction(db) as s:
            start_run(s, run_id=run_id)
            update_run_step(s, run_id=run_id, name="train", status="running")
        time.sleep(1.5)
        with transaction(db) as s:
            update_run_step(s, run_id=run_id, name="train", status="succeeded")
            finish_run(s, run_id=run_id, status="succeeded")

    worker = threading.Thread(target=progress)
    worker.start()
    seen = []
    url = f"{server.http_url}/v1/admin/runs/{run_id}/events"
    with httpx.stream("GET", url, headers=HEADERS, timeout=30) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():  # the server ends the stream when the run ends
            if line.startswith("data: "):
                seen.append(json.loads(line[6:]))
    worker.join()
    statuses = [r["status"] for r in seen]
    assert statuses[0] == "queued" and statuses[-1] == "succeeded" and "running" in statuses
    assert seen[-1]["steps"][0]["status"] == "succeeded"
    assert get(server, "/v1/admin/runs/999999/events").status_code == 404
