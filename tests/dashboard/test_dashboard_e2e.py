"""The admin dashboard end to end: headless Chromium (dashboard/test/e2e.mjs, playwright-core)
against a real agent server on PostgreSQL whose runs a real learner worker made in this test.

The story: completions served by the base model get outcomes; a triggered cycle makes and
deploys policy-v1, which then serves completions that get outcomes too; a second cycle is
queued with no worker running. The browser signs in (after a wrong token and the user token
are refused with no data shown), opens that run's page, and only then is a worker started:
the page must follow the run to its end without reloading. Then the overview must list both
adapters with the share of completions shown and the acceptance of those shown (with their
intervals), chart them one series per adapter on an axis spanning the chosen range (30 days
labelled by dates, 24 hours by hours), and say the agent-edits chart has no data; the run
page must show its curves, and a rollback clicked on the adapters page must change the
deployments table, which this test reads back from PostgreSQL. Screenshots of each page
land in .artifacts/dashboard-e2e/.

Needs: scripts/dashboard.sh (dashboard/dist and node_modules with playwright-core),
scripts/system-deps.sh (chromium). Run: .venv/bin/python -m pytest tests/dashboard -q -s
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select
from transformers import AutoTokenizer

from agent_server.agent.scripted import ScriptedModel
from agent_server.protocol import messages as p
from agent_server.protocol.client import ProtocolClient
from feedback.db import make_engine, make_sessionmaker, transaction
from feedback.models import Deployment
from feedback.queries import create_run, finish_run, update_run_step
from ground.settings import Settings
from learner.synth.rollout import run_rollout
from tests.api.server import TOKEN, RunningServer, start_server
from tests.learner.conftest import FAST
from tests.learner.synth.test_rollout import CONFIG, FILES, FINISH, FIX, TASK, act
from tests.learner.synthetic_feedback import seed_feedback
from tests.learner.worker import start_worker, wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
DASHBOARD = REPO / "dashboard"
ARTIFACTS = REPO / ".artifacts" / "dashboard-e2e"
ADMIN = "admin-token-0123456789abcdef"
PAGES = ("login", "run", "overview", "overview-day", "runs", "tasks", "trajectory", "adapters")
# Each adapter's completions: seed_feedback's 40 (shown; half accepted) and traffic's 6 (shown;
# accepted, rejected in turn); the probes add requests that are never shown.
SHOWN, ACCEPTED = 40 + 6, 20 + 3
DAY_MS = 86400_000


async def traffic(server: RunningServer, n: int, probe: bool = False) -> str | None:
    """n completions, each shown and then accepted (even) or rejected (odd); the adapter that
    served. `probe`: one completion and no outcome (which adapter serves now?)."""
    client = await ProtocolClient.connect(server.ws_url, TOKEN)
    adapter = None
    try:
        for i in range(1 if probe else n):
            await client.send(p.CompletionRequest(id=f"c{i}", path=f"m{i}.py", max_tokens=4,
                                                  prefix="def add(a, b):\n    "))  # fmt: skip
            made = await client.expect(p.CompletionSuggestion)
            adapter = made.adapter
            decision = "accepted" if i % 2 == 0 else "rejected"
            for kind in () if probe else ("shown", decision):
                event = f"{made.suggestion_id}-{kind}"
                await client.send(p.EditOutcome(id=event, suggestion_id=made.suggestion_id,
                                                outcome=kind, client_event_id=event))  # fmt: skip
                await client.expect(p.OutcomeAck)
    finally:
        await client.close()
    return adapter


def finished_run(api: httpx.Client, run_id: int) -> dict[str, Any] | None:
    run = api.get(f"/v1/admin/runs/{run_id}").json()
    return run if run["status"] in ("succeeded", "failed", "skipped", "deferred") else None


async def task_run(db: Any) -> int:
    """A task cycle's records: an evaluated run and one real trajectory through the harness
    (a scripted model fixes the task's bug), stored as the learner stores its rollouts."""
    with transaction(db) as s:
        run = create_run(s, trigger="test", config={"kind": "tasks"})
        report = {"rollouts": 2, "solve_rate": 0.5}
        update_run_step(s, run_id=run.id, name="evaluate", status="failed", metrics={
            "serving_version": None, "serving": report, "candidate": {**report, "solve_rate": 0.0},
            "accepted": False, "reasons": ["solve rate fell"]})  # fmt: skip
        finish_run(s, run_id=run.id, status="failed", error="gate refused the adapter")
    model = ScriptedModel([act("read_file", path="calc.py"), FIX, FINISH])
    config = dataclasses.replace(CONFIG, run_id=run.id)
    result = await run_rollout(TASK, model, files=FILES, config=config, db=db)
    assert result.reward == 1.0, result.message
    return run.id


def browse(server: RunningServer, env: dict[str, str], on_live) -> dict[str, Any]:
    """Run the browser script; `on_live()` is called once the live run's page is open."""
    env = {**os.environ, **env, "APPRENTICE_E2E_URL": server.http_url,
           "APPRENTICE_E2E_ADMIN_TOKEN": ADMIN, "APPRENTICE_E2E_USER_TOKEN": TOKEN,
           "APPRENTICE_E2E_ARTIFACTS": str(ARTIFACTS)}  # fmt: skip
    process = subprocess.Popen(["node", "test/e2e.mjs"], cwd=DASHBOARD, env=env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip
    lines = []
    assert process.stdout is not None
    for line in process.stdout:
        lines.append(line.rstrip())
        if line.strip() == "live-page-open":
            on_live()
    process.wait(timeout=600)
    seen = json.loads(lines[-1]) if lines and lines[-1].startswith("{") else {}
    assert process.returncode == 0 and "failure" not in seen, "\n".join(lines)
    return seen


async def test_the_dashboard_shows_what_the_learner_did(
    tmp_path: Path, pg_head_url: str, dev_model_dir: Path
) -> None:
    if not (DASHBOARD / "dist" / "index.html").exists() or not shutil.which("node"):
        pytest.fail("the dashboard is not built: run scripts/dashboard.sh")
    if not (DASHBOARD / "node_modules" / "playwright-core").exists():
        pytest.fail("playwright-core is missing: run scripts/dashboard.sh")
    shutil.rmtree(ARTIFACTS, ignore_errors=True)
    settings = Settings(home=tmp_path / "home", database_url=pg_head_url, token=TOKEN,
                        admin_token=ADMIN, model_name=str(dev_model_dir))  # fmt: skip
    env = {"APPRENTICE_HOME": str(settings.home), "APPRENTICE_DATABASE_URL": pg_head_url,
           "APPRENTICE_MODEL_NAME": str(dev_model_dir)}  # fmt: skip
    engine = make_engine(pg_head_url)
    db = make_sessionmaker(engine)
    tokenizer = AutoTokenizer.from_pretrained(dev_model_dir)
    server = start_server(settings)
    workers = []
    try:
        api = httpx.Client(base_url=server.http_url, timeout=60,
                           headers={"Authorization": f"Bearer {ADMIN}"})  # fmt: skip
        seed_feedback(db, tokenizer, dev_model_dir, 40)
        assert await traffic(server, 6) is None  # the base model serves
        workers.append(start_worker(env, tmp_path / "worker-1.log"))
        first = api.post("/v1/admin/runs", json={"config": FAST}).json()["id"]
        run = wait_for(lambda: finished_run(api, first), timeout=300, what="run 1",
                       worker=workers[0])  # fmt: skip
        assert run["status"] == "succeeded", (run["error"], workers[0].log())
        deadline = time.monotonic() + 30  # the server follows the deployments table
        while await traffic(server, 0, probe=True) != "policy-v1":
            assert time.monotonic() < deadline, "policy-v1 does not serve"
            await asyncio.sleep(0.5)
        assert await traffic(server, 6) == "policy-v1"
        workers[0].stop()

        seed_feedback(db, tokenizer, dev_model_dir, 40, seed=1, adapter_version=1)
        # To be surely better than policy-v1, which learned most of it, v2 trains longer.
        longer = {**FAST, "train": {**FAST["train"], "max_steps": 30}}
        second = api.post("/v1/admin/runs", json={"config": longer}).json()["id"]
        assert api.get(f"/v1/admin/runs/{second}").json()["status"] == "queued"

        def start_second_worker() -> None:
            workers.append(start_worker(env, tmp_path / "worker-2.log"))

        # Roll back to policy-v1; when the gate refused policy-v2, v1 still serves and the
        # browser rolls back to the base model instead.
        tasks = await task_run(db)
        pages = {"APPRENTICE_E2E_LIVE_RUN": str(second), "APPRENTICE_E2E_ROLLBACK_TO": "1",
                 "APPRENTICE_E2E_TASK_RUN": str(tasks)}  # fmt: skip
        seen = browse(server, pages, start_second_worker)
        second_status = api.get(f"/v1/admin/runs/{second}").json()["status"]
    finally:
        for worker in workers:
            worker.stop()
        server.stop()
    with db() as s:
        active = s.scalars(select(Deployment).where(Deployment.status == "active")).all()
    engine.dispose()

    assert seen["signedOutData"] == 0 and seen["navHiddenWhenSignedOut"]
    assert "not the admin token" in seen["refusedMessage"]
    # The gate may also defer policy-v2 (too little held-out evidence): a run's end too.
    assert seen["liveStatuses"][0] == "queued" and seen["liveStatuses"][-1] in (
        "succeeded", "failed", "deferred")  # fmt: skip
    assert len(seen["liveStatuses"]) >= 2 and seen["liveReloads"] == 0
    assert seen["runCurves"] >= 1 and seen["gate"]
    assert seen["runSteps"] == (5 if second_status == "succeeded" else 3), seen["runSteps"]
    verdict = {"succeeded": "deployed", "deferred": "deferred"}.get(second_status, "refused")
    assert f"Gate: {verdict}." in seen["gate"], seen["gate"]
    evidence = seen["gateEvidence"]  # what the decision rests on, beside it
    assert "accepted" in evidence and "rejected" in evidence and "p=" in evidence, evidence
    assert "KL to serving" in evidence and "perplexity" in evidence, evidence
    assert {"base completion", "policy-v1 completion"} <= set(seen["overviewRows"])
    assert seen["overviewCharts"] == 2 and seen["runRows"] == 3
    check_overview(seen)
    assert seen["taskRows"] == 1 and seen["trajectoryEvents"] >= 4 and seen["trajectoryTerms"] >= 1
    assert seen["actionOk"], seen["actionMessage"]
    assert seen["deploymentsAfter"] == seen["deploymentsBefore"] + 1
    expected = 1 if second_status == "succeeded" else None
    assert seen["rolledBackTo"] == ("1" if expected == 1 else "base")
    assert [d.adapter_version for d in active] == [expected], seen  # read from PostgreSQL
    assert not seen["errors"], seen["errors"]
    for page in PAGES:
        assert (ARTIFACTS / f"{page}.png").stat().st_size > 5_000, f"{page}.png is empty"


def check_overview(seen: dict[str, Any]) -> None:
    """The overview's completion figures and charts, as the browser saw them."""
    rates = {row[0]: row[1:] for row in seen["completionRates"]}
    assert set(rates) == {"base", "policy-v1"}, seen["completionRates"]
    interval = re.compile(r"\d+\.\d% \(\d+\.\d–\d+\.\d%\)")
    for name, (requests, shown, share, accepted, acceptance) in rates.items():
        assert (int(shown), int(accepted)) == (SHOWN, ACCEPTED), (name, rates[name])
        assert int(requests) >= SHOWN and interval.fullmatch(share), (name, rates[name])
        assert acceptance.startswith("50.0% (") and interval.fullmatch(acceptance), acceptance
    assert seen["rangeText"].startswith("30 days: "), seen["rangeText"]
    charts = seen["charts"]
    assert set(charts) == {"chart-completions", "chart-shown", "chart-edits-empty"}, charts
    assert "No agent edits" in charts["chart-edits-empty"]["empty"]
    for name in ("chart-completions", "chart-shown"):
        chart = charts[name]
        assert chart["series"] == "base|policy-v1", chart  # a series (and legend) each
        assert int(chart["until"]) - int(chart["since"]) == 30 * DAY_MS  # the range, exactly
        ticks = chart["ticks"].split("|")
        assert 3 <= len(ticks) <= 10 and len(set(ticks)) == len(ticks), ticks
        assert all(re.fullmatch(r"[A-Z][a-z]{2} \d{1,2}", t) for t in ticks), ticks  # dates
    day = seen["dayCharts"]["chart-completions"]
    assert int(day["until"]) - int(day["since"]) == DAY_MS and day["series"] == "base|policy-v1"
    ticks = day["ticks"].split("|")
    assert all(re.fullmatch(r"\d\d:00|[A-Z][a-z]{2} \d{1,2}", t) for t in ticks), ticks
    assert sum(":" in t for t in ticks) >= len(ticks) - 1, ticks  # hours (and a midnight)
