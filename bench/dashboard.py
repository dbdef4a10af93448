"""The dashboard's first paint with a large feedback log: `bench/dashboard.py [--outcomes N]
[--runs N] [--repeats N]` prints JSON.

Seeds a fresh PostgreSQL database with `--outcomes` outcomes (default 100,000, spread over 30
days and three adapters) and `--runs` finished learner runs (default 200), starts a real agent
server on it, signs in to /admin/ in headless Chromium (dashboard/test/paint.mjs) and times
each page from navigation start to its content drawn, `--repeats` times; also the admin API
requests the overview makes. The baseline, in the same run: the same pages on an empty
database. Goal (issue 14): the overview under 1 s with 100,000 outcomes and 200 runs.
Needs scripts/dashboard.sh (the build and playwright-core) and chromium.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from pydantic import SecretStr
from sqlalchemy import text

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from agent_server.agent.scripted import ScriptedModel  # noqa: E402
from feedback.db import make_engine, make_sessionmaker  # noqa: E402
from feedback.migrate import upgrade  # noqa: E402
from ground.settings import Settings  # noqa: E402
from tests.api.dashboard_data import seed_outcomes, seed_runs  # noqa: E402
from tests.api.server import TOKEN, start_server  # noqa: E402
from tests.fixtures.databases import fresh_pg_database  # noqa: E402

ADMIN = "bench-admin-0123456789abcdef"


def api_timings(url: str, repeats: int) -> dict[str, float]:
    """Median ms of each request the overview makes (30 days, day buckets)."""
    until = dt.datetime.now(dt.UTC)
    since = until - dt.timedelta(days=30)
    window = {"since": since.isoformat(), "until": until.isoformat(), "bucket_s": 86400}
    requests = {
        "stats_outcomes": ("/v1/admin/stats/outcomes", window),
        "deployments": ("/v1/admin/deployments", {"limit": 500}),
        "runs": ("/v1/admin/runs", {"limit": 200}),
    }
    out = {}
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {ADMIN}"}) as client:
        for name, (path, params) in requests.items():
            samples = []
            for _ in range(repeats + 1):
                started = time.perf_counter()
                client.get(path, params=params).raise_for_status()
                samples.append((time.perf_counter() - started) * 1000)
            out[name] = round(statistics.median(samples[1:]), 1)
    return out


def measure(database_url: str, repeats: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as home:
        settings = Settings(home=Path(home), database_url=database_url, token=TOKEN,
                            admin_token=SecretStr(ADMIN))  # fmt: skip
        server = start_server(settings, backend=ScriptedModel([]))
        try:
            env = {**os.environ, "APPRENTICE_E2E_URL": server.http_url,
                   "APPRENTICE_E2E_ADMIN_TOKEN": ADMIN,
                   "APPRENTICE_PAINT_REPEATS": str(repeats)}  # fmt: skip
            done = subprocess.run(["node", "test/paint.mjs"], cwd=REPO / "dashboard", env=env,
                                  capture_output=True, text=True, timeout=600)  # fmt: skip
            if done.returncode != 0:
                raise SystemExit(f"paint.mjs failed:\n{done.stdout}\n{done.stderr}")
            paints = json.loads(done.stdout.strip().splitlines()[-1])
            return {
                "first_paint_ms": {k: statistics.median(v) for k, v in paints.items()},
                "first_paint_samples_ms": paints,
                "api_ms": api_timings(server.http_url, repeats),
            }
        finally:
            server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--outcomes", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    if not (REPO / "dashboard" / "dist" / "index.html").exists():
        raise SystemExit("the dashboard is not built: run scripts/dashboard.sh")
    result: dict[str, object] = {"outcomes": args.outcomes, "runs": args.runs}
    with fresh_pg_database() as empty:
        upgrade(empty)
        result["baseline_empty"] = measure(empty, args.repeats)
    with fresh_pg_database() as url:
        upgrade(url)
        engine = make_engine(url)
        started = time.perf_counter()
        seeded = seed_outcomes(make_sessionmaker(engine), n=args.outcomes, days=30)
        seed_runs(make_sessionmaker(engine), n=args.runs)
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text("ANALYZE"))  # what autovacuum does for a log that grew over time
        engine.dispose()
        result["seed_s"] = round(time.perf_counter() - started, 1)
        result["seeded_outcomes"] = sum(seeded.values())
        result["loaded"] = measure(url, args.repeats)
    overview = result["loaded"]["first_paint_ms"]["overview"]  # type: ignore[index]
    empty_overview = result["baseline_empty"]["first_paint_ms"]["overview"]  # type: ignore[index]
    result["overview_vs_empty"] = round(overview / max(empty_overview, 1), 2)
    result["goal_overview_under_1s"] = overview < 1000
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
