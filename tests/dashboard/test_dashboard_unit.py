"""The dashboard's Node unit tests (`npm test` in dashboard/: dashboard/test/unit/, the
overview's time axis and series in dashboard/src/timeline.ts) and its typecheck, run from
pytest. Assume scripts/dashboard.sh has run (node_modules installed).

Run: .venv/bin/python -m pytest tests/dashboard/test_dashboard_unit.py -q
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

DASHBOARD = Path(__file__).resolve().parents[2] / "dashboard"
NPM_TIMEOUT_S = 300


def run_npm(script: str) -> str:
    if not (DASHBOARD / "node_modules" / ".bin" / "tsc").exists():
        pytest.fail(f"{DASHBOARD / 'node_modules'} is missing: run scripts/dashboard.sh first")
    npm = shutil.which("npm")
    if npm is None:
        pytest.fail("npm is not on PATH; install Node.js 20.19+ (scripts/dashboard.sh needs it)")
    done = subprocess.run(
        [npm, "run", script], cwd=DASHBOARD, capture_output=True, text=True,
        timeout=NPM_TIMEOUT_S,
    )  # fmt: skip
    assert done.returncode == 0, (
        f"npm run {script} failed (rc {done.returncode}):\n"
        f"--- stdout ---\n{done.stdout[-20000:]}\n--- stderr ---\n{done.stderr[-10000:]}"
    )
    return done.stdout


def test_unit_tests_pass() -> None:
    out = run_npm("test")
    assert "# fail 0" in out and "# tests 0\n" not in out, out[-5000:]


def test_the_dashboard_typechecks() -> None:
    run_npm("typecheck")
