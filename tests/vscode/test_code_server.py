"""The VS Code extension end to end: real code-server, headless Chromium, real agent server.

vscode-extension/test/e2e/code-server.e2e.mjs installs the packaged extension into
code-server, opens the chat in Chromium, asks for an edit (the scripted server proposes a.py
`x = 1` -> `x = 2`), accepts it from the chat's edit card and checks the file on disk. This
test runs it against a fresh PostgreSQL database and then reads the database: the accept the
person clicked in the browser must be stored as an `accepted` outcome of that suggestion.

Needs: scripts/code-server.sh (code-server in .cache/code-server), scripts/extension.sh (the
.vsix and node_modules with playwright-core), scripts/system-deps.sh (chromium).
Run: .venv/bin/python -m pytest tests/vscode/test_code_server.py -q -s
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from feedback.db import make_engine
from feedback.models import Outcome, Suggestion

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
EXTENSION = REPO / "vscode-extension"
E2E_SCRIPT = EXTENSION / "test" / "e2e" / "code-server.e2e.mjs"
CODE_SERVER = REPO / ".cache" / "code-server" / "node_modules" / ".bin" / "code-server"
VSIX = EXTENSION / "dist" / "apprentice.vsix"
E2E_TIMEOUT_S = 300


def require_prerequisites() -> None:
    if not CODE_SERVER.exists():
        pytest.fail(f"code-server is missing ({CODE_SERVER}): run scripts/code-server.sh")
    if not VSIX.exists() or not (EXTENSION / "node_modules" / "playwright-core").exists():
        pytest.fail(f"the extension is not built ({VSIX}, node_modules): run scripts/extension.sh")
    if not shutil.which("chromium"):
        pytest.fail("chromium is missing: run scripts/system-deps.sh")


def test_accept_an_edit_in_code_server_is_recorded(pg_head_url: str, tmp_path: Path) -> None:
    require_prerequisites()
    artifacts = REPO / ".artifacts" / "vscode-e2e"
    env = os.environ | {
        "APPRENTICE_PYTHON": sys.executable,
        "APPRENTICE_TEST_DATABASE_URL": pg_head_url,
        "APPRENTICE_E2E_VSIX": str(VSIX),
        "APPRENTICE_E2E_ARTIFACTS": str(artifacts),
        # The script's own deadline ends it (and cleans up) before ours kills it.
        "APPRENTICE_E2E_TIMEOUT_S": str(E2E_TIMEOUT_S - 60),
    }
    done = subprocess.run(
        ["node", str(E2E_SCRIPT)], cwd=REPO, env=env, capture_output=True, text=True,
        timeout=E2E_TIMEOUT_S,
    )  # fmt: skip
    print(done.stderr[-20000:], file=sys.stderr)
    assert done.returncode == 0, (
        f"the e2e script failed (rc {done.returncode}); artifacts in {artifacts}:\n"
        f"{done.stderr[-8000:]}"
    )
    assert (artifacts / "chat-with-diff.png").stat().st_size > 10_000, "the screenshot is empty"

    lines = [line for line in done.stdout.splitlines() if line.strip()]
    assert lines, f"the e2e script printed no result on stdout:\n{done.stdout}"
    result = json.loads(lines[-1])
    suggestion_id = result["suggestion_id"]
    assert "Apprentice" in result["status_bar"]

    engine = make_engine(pg_head_url)
    try:
        with Session(engine) as db:
            suggestion = db.get(Suggestion, suggestion_id)
            assert suggestion is not None, f"no suggestion {suggestion_id} in the database"
            assert suggestion.kind == "edit"
            assert suggestion.file_path == "a.py"
            outcomes = db.scalars(
                select(Outcome).where(Outcome.suggestion_id == suggestion_id).order_by(Outcome.id)
            ).all()
    finally:
        engine.dispose()
    kinds = [outcome.kind for outcome in outcomes]
    assert "accepted" in kinds, f"suggestion {suggestion_id} has outcomes {kinds}, no accepted"
    assert "rejected" not in kinds, kinds
