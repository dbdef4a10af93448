"""The VS Code extension's Node tests, run from pytest: the unit tests (`npm test`), the
integration test of its core against the real agent server on a scripted model and a fresh
PostgreSQL database (`npm run test:integration`, vscode-extension/test/integration/
session.test.ts), and the core against the real `apprentice serve` on the real dev model and
PostgreSQL (`npm run test:real`, vscode-extension/test/integration/realServer.real.ts), and
its inline completion once more on the real pretrained model (SmolLM2-135M-Instruct).

All assume scripts/extension.sh has run (node_modules installed).
Run: .venv/bin/python -m pytest tests/vscode/test_extension.py -q
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXTENSION = REPO / "vscode-extension"
NPM_TIMEOUT_S = 300


def run_npm(script: list[str], env: dict[str, str] | None = None) -> None:
    if not (EXTENSION / "node_modules" / ".bin" / "esbuild").exists():
        pytest.fail(f"{EXTENSION / 'node_modules'} is missing: run scripts/extension.sh first")
    npm = shutil.which("npm")
    if npm is None:
        pytest.fail("npm is not on PATH; install Node.js 20+ (scripts/extension.sh needs it too)")
    done = subprocess.run(
        [npm, *script],
        cwd=EXTENSION,
        env=os.environ | (env or {}),
        capture_output=True,
        text=True,
        timeout=NPM_TIMEOUT_S,
    )
    if done.returncode != 0:
        pytest.fail(
            f"npm {' '.join(script)} failed (rc {done.returncode}):\n"
            f"--- stdout ---\n{done.stdout[-20000:]}\n--- stderr ---\n{done.stderr[-10000:]}"
        )
    assert "# fail 0" in done.stdout, done.stdout[-5000:]
    assert "# tests 0\n" not in done.stdout, f"npm {' '.join(script)} ran no tests"


def test_unit_tests_pass() -> None:
    run_npm(["test"])


@pytest.mark.postgres
def test_integration_with_the_real_server_on_postgres(pg_head_url: str) -> None:
    run_npm(
        ["run", "test:integration"],
        {"APPRENTICE_PYTHON": sys.executable, "APPRENTICE_TEST_DATABASE_URL": pg_head_url},
    )


@pytest.mark.postgres
@pytest.mark.slow
def test_core_against_apprentice_serve_on_the_dev_model(
    pg_head_url: str, dev_model_dir: Path
) -> None:
    # The `apprentice` script of this interpreter's environment (the one under test).
    cli = Path(sys.executable).parent / "apprentice"
    if not cli.exists():
        pytest.fail(
            f"{cli} is missing: install the project into this environment (pip install -e .)"
        )
    run_npm(
        ["run", "test:real"],
        {
            "APPRENTICE_PYTHON": sys.executable,
            "APPRENTICE_CLI": str(cli),
            "APPRENTICE_TEST_DATABASE_URL": pg_head_url,
            "APPRENTICE_TEST_MODEL": str(dev_model_dir),
        },
    )


@pytest.mark.slow
def test_core_inline_completion_on_the_real_model(tmp_path: Path, real_model_dir: Path) -> None:
    """`apprentice serve` on the real pretrained model (SQLite in a fresh home): the extension's
    core gets a completion that is code (non-empty, no fence), stored with ids and logprobs."""
    cli = Path(sys.executable).parent / "apprentice"
    run_npm(
        ["run", "test:real"],
        {
            "APPRENTICE_PYTHON": sys.executable,
            "APPRENTICE_CLI": str(cli),
            "APPRENTICE_TEST_MODEL": str(real_model_dir),
            "APPRENTICE_TEST_ONLY": "completion",
        },
    )
