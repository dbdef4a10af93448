"""`GET /metrics`: a scripted session against a real server, scraped and read by Prometheus'
own parser (`prometheus_client.parser`); every counter moves by exactly what the session did.
Also: who may scrape, and that the Grafana dashboard queries only metrics the server exports.

Run: .venv/bin/python -m pytest tests/api/test_metrics.py -q
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from pydantic import SecretStr

from agent_server.agent.scripted import ScriptedModel
from agent_server.agent.workspace import LocalWorkspace
from agent_server.models.deployments import deployment_backend
from agent_server.protocol import messages as p
from agent_server.protocol.client import Decision, ProtocolClient
from feedback.db import transaction
from feedback.queries import create_run, finish_run, update_run_step
from tests.api.server import TOKEN

pytestmark = pytest.mark.postgres

ADMIN = "admin-token-0123456789abcdef"
METRICS = "metrics-token-0123456789abcdef"
ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "dashboards" / "apprentice.json"


def scrape(server, token: str = METRICS) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of the exposition as {(sample name, sorted labels): value}."""
    response = httpx.get(f"{server.http_url}/metrics", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    samples = {}
    for family in text_string_to_metric_families(response.text):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples


def value(samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def moved(before, after, name: str, **labels: str) -> float:
    return value(after, name, **labels) - value(before, name, **labels)


def uncached(server) -> None:
    """Read the database at every scrape (the server caches its figures for a few seconds)."""
    backend = deployment_backend(server.settings.model_backend)
    server.services.metrics.add_database(server.services.db, backend, cache_s=0)


@pytest.fixture
def settings(api_settings):
    return api_settings.model_copy(
        update={"admin_token": SecretStr(ADMIN), "metrics_token": SecretStr(METRICS)}
    )


async def test_counters_move_by_exactly_what_a_session_did(settings, serve, tmp_path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    (root / "a.py").write_text("x = 1\n")
    args = {"path": "a.py", "search": "x = 1", "replace": "x = 2"}
    edit = json.dumps({"thought": "edit", "tool": "edit", "args": args})
    done = json.dumps({"thought": "done", "tool": "finish", "args": {"message": "ok"}})
    server = serve(settings, backend=ScriptedModel(["    return a + b", "pass", edit, done]))
    uncached(server)
    before = scrape(server)
    assert value(before, "apprentice_feedback_db_up") == 1
    assert value(before, "apprentice_serving_adapter_version") == 0  # the base model

    client = await ProtocolClient.connect(server.ws_url, TOKEN)
    ids = []
    for n in range(2):
        await client.send(p.CompletionRequest(id=f"c{n}", path="m.py", language="python",
                                              prefix="def add(a, b):\n", suffix=""))  # fmt: skip
        ids.append((await client.expect(p.CompletionSuggestion)).suggestion_id)
    for n, (sid, kind) in enumerate([(ids[0], "shown"), (ids[0], "accepted"), (ids[1], "shown")]):
        outcome = p.EditOutcome(id=f"o{n}", suggestion_id=sid, outcome=kind,
                                client_event_id=f"evt-{n}")  # fmt: skip
        await client.send(outcome)
        await client.expect(p.OutcomeAck)
    await client.send(outcome.model_copy(update={"id": "again"}))  # a resend: no new row
    assert (await client.expect(p.OutcomeAck)).duplicate
    info = await client.create_session(title="metrics")
    log = await client.run_turn(info.session_id, "set x to 2", workspace=LocalWorkspace(root),
                                review=lambda _: Decision("rejected"))  # fmt: skip
    assert log.done.status == "finished"
    await client.send("not json")  # an unreadable frame is counted as such
    await client.expect(p.Error)
    httpx.get(f"{server.http_url}/v1/sessions", headers={"Authorization": f"Bearer {TOKEN}"})
    httpx.get(f"{server.http_url}/v1/sessions", headers={"Authorization": "Bearer wrong-token"})
    live = value(scrape(server), "apprentice_live_sessions")
    await client.close()
    after = scrape(server)

    assert live == 1
    assert moved(before, after, "apprentice_completions_served_total", adapter="base") == 2
    assert moved(before, after, "apprentice_edits_proposed_total") == 1
    for kind, n in [("shown", 2), ("accepted", 1)]:
        labels = dict(kind=kind, suggestion="completion", adapter="base")
        assert moved(before, after, "apprentice_outcomes_recorded_total", **labels) == n
        assert moved(before, after, "apprentice_feedback_outcomes", **labels) == n
    labels = dict(kind="rejected", suggestion="edit", adapter="base")
    assert moved(before, after, "apprentice_outcomes_recorded_total", **labels) == 1
    assert moved(before, after, "apprentice_ws_messages_received_total", type="edit.outcome") == 5
    assert moved(before, after, "apprentice_ws_messages_received_total", type="invalid") == 1
    assert moved(before, after, "apprentice_ws_messages_received_total",
                 type="completion.request") == 2  # fmt: skip
    assert moved(before, after, "apprentice_ws_message_seconds_count",
                 type="completion.request") == 2  # fmt: skip
    assert (
        moved(before, after, "apprentice_ws_messages_sent_total", type="outcome.ack") == 5
    )  # one a duplicate
    assert moved(before, after, "apprentice_ws_connections_total") == 1
    assert value(after, "apprentice_ws_connections_open") == 0
    assert value(after, "apprentice_live_sessions") == 0
    for status, n in [("200", 1), ("401", 1)]:
        labels = dict(method="GET", route="/v1/sessions", status=status)
        assert moved(before, after, "apprentice_http_requests_total", **labels) == n
    # The first scrape was answered before it could count itself; the second one was.
    assert value(after, "apprentice_http_requests_total", method="GET", route="/metrics",
                 status="200") == 2  # fmt: skip


async def test_learner_figures_come_from_the_database(settings, serve) -> None:
    server = serve(settings, backend=ScriptedModel([]))
    db = server.services.db
    with transaction(db) as s:
        run = create_run(s, trigger="test")
        update_run_step(s, run_id=run.id, name="train", status="running")
        update_run_step(s, run_id=run.id, name="train", status="succeeded",
                        metrics={"tokens_per_s": 1234.5, "step_peak_rss_gb": 3.25})  # fmt: skip
        finish_run(s, run_id=run.id, status="succeeded")
        create_run(s, trigger="test")
    uncached(server)
    samples = scrape(server, ADMIN)  # the admin token may scrape too
    assert value(samples, "apprentice_learner_runs", status="succeeded") == 1
    assert value(samples, "apprentice_learner_runs", status="queued") == 1
    assert value(samples, "apprentice_learner_train_tokens_per_second") == 1234.5
    assert value(samples, "apprentice_learner_step_seconds", step="train") >= 0
    assert ("apprentice_learner_step_seconds", (("step", "train"),)) in samples
    assert value(samples, "apprentice_learner_step_peak_rss_gigabytes", step="train") == 3.25


def test_only_the_metrics_and_admin_tokens_may_scrape(settings, serve) -> None:
    server = serve(settings, backend=ScriptedModel([]))
    for headers in [{}, {"Authorization": f"Bearer {TOKEN}"}, {"Authorization": "Bearer x" * 3}]:
        response = httpx.get(f"{server.http_url}/metrics", headers=headers)
        assert response.status_code == 401 and "metrics token" in response.json()["detail"]
        assert "apprentice_" not in response.text


def test_the_grafana_dashboard_queries_only_exported_metrics(settings, serve) -> None:
    server = serve(settings, backend=ScriptedModel([]))
    response = httpx.get(
        f"{server.http_url}/metrics", headers={"Authorization": f"Bearer {METRICS}"}
    )
    exported = set()
    for family in text_string_to_metric_families(response.text):  # families with no samples too
        # The sample names PromQL queries: a counter's _total, a histogram's _bucket/_sum/_count.
        suffixes = {"counter": ["_total"], "histogram": ["_bucket", "_sum", "_count"]}
        exported |= {family.name + s for s in suffixes.get(family.type, [""])}
    dashboard = json.loads(DASHBOARD.read_text())
    queried = set()
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            queried |= set(re.findall(r"\bapprentice_[a-z_]+", target["expr"]))
    unknown = sorted(queried - exported)
    assert not unknown, f"the dashboard queries metrics the server does not export: {unknown}"
    assert len(queried) >= 12  # the dashboard covers the server, the feedback and the learner
