"""The VS Code extension end to end: real code-server, headless Chromium, real agent server.

vscode-extension/test/e2e/code-server.e2e.mjs installs the packaged extension into
code-server and drives one chat in Chromium through two turns (tests/vscode/e2e_script.json):
an edit of a.py accepted from its card; then an edit of b.py with two hunks, hunk 1 accepted by
its CodeLens and hunk 2 rejected on the card, and an edit of c.py rejected with a typed reason.
It checks the files on disk. Then an inline completion in d.py: triggered, shown as ghost text,
dismissed with Escape, and other text typed in its place (the e2e settings make
apprentice.outcomeSettleSeconds 2 s); once more triggered where the scripted model has nothing
to say (an empty suggestion). This test runs it against a fresh PostgreSQL database and then
reads the database: each decision the person clicked in the browser must be stored as that
suggestion's outcome (`accepted`; `partially_accepted` with accepted_part [0]; `rejected`
with the reason, and no `written` since c.py was left as it was); the completion's outcomes
must be `shown`, `rejected`, then `written` with the typed text as final_text; an empty
suggestion has no outcome at all (nothing was shown).

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
from feedback.vocab import DECISION_KINDS

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


def outcomes_of(
    db: Session, suggestion_id: str, file_path: str, kind: str = "edit"
) -> list[Outcome]:
    suggestion = db.get(Suggestion, suggestion_id)
    assert suggestion is not None, f"no suggestion {suggestion_id} ({file_path}) in the database"
    assert (suggestion.kind, suggestion.file_path) == (kind, file_path)
    return list(
        db.scalars(
            select(Outcome).where(Outcome.suggestion_id == suggestion_id).order_by(Outcome.id)
        ).all()
    )


def only_decision(outcomes: list[Outcome], suggestion_id: str) -> Outcome:
    """The one decision among a suggestion's outcomes (follow-ups like `persisted` aside)."""
    decisions = [o for o in outcomes if o.kind in DECISION_KINDS]
    kinds = [o.kind for o in outcomes]
    assert len(decisions) == 1, f"suggestion {suggestion_id} has outcomes {kinds}, not one decision"
    return decisions[0]


def test_edit_decisions_in_code_server_are_recorded(pg_head_url: str, tmp_path: Path) -> None:
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
    screenshots = ("chat-with-diff.png", "hunk-1-accepted.png", "partial-decision.png",
                   "completion-shown.png")  # fmt: skip
    for screenshot in screenshots:
        assert (artifacts / screenshot).stat().st_size > 10_000, f"{screenshot} is empty"

    lines = [line for line in done.stdout.splitlines() if line.strip()]
    assert lines, f"the e2e script printed no result on stdout:\n{done.stdout}"
    result = json.loads(lines[-1])
    accepted_id = result["suggestion_id"]
    partial_id = result["partial"]["suggestion_id"]
    rejected_id = result["rejected"]["suggestion_id"]
    typed_reason = result["rejected"]["reason"]
    completion_id = result["completion"]["suggestion_id"]
    empty_ids = result["completion"]["empty_ids"]
    assert len({accepted_id, partial_id, rejected_id, completion_id}) == 4, result
    assert empty_ids, f"no empty suggestion was stored: {result['completion']}"
    assert "Apprentice" in result["status_bar"]

    engine = make_engine(pg_head_url)
    try:
        with Session(engine) as db:
            accepted = only_decision(outcomes_of(db, accepted_id, "a.py"), accepted_id)
            partial = only_decision(outcomes_of(db, partial_id, "b.py"), partial_id)
            rejected_outcomes = outcomes_of(db, rejected_id, "c.py")
            rejected = only_decision(rejected_outcomes, rejected_id)
            completion = db.get(Suggestion, completion_id)
            completion_outcomes = outcomes_of(db, completion_id, "d.py", kind="completion")
            empty = db.scalars(select(Suggestion).where(Suggestion.id.in_(empty_ids))).all()
            empty_proposed = {(e.kind, e.proposed) for e in empty}
            empty_outcomes = db.scalars(
                select(Outcome).where(Outcome.suggestion_id.in_(empty_ids))
            ).all()
    finally:
        engine.dispose()
    assert accepted.kind == "accepted"
    assert partial.kind == "partially_accepted"
    assert partial.accepted_part == [0], f"hunks stored as accepted: {partial.accepted_part}"
    assert rejected.kind == "rejected"
    assert typed_reason and rejected.reason == typed_reason
    # c.py was left as it was after the rejection: nothing was written instead.
    assert "written" not in [o.kind for o in rejected_outcomes]

    # The completion the person dismissed and wrote over (inlineCompletion.mjs).
    assert completion is not None and completion.proposed == "0"
    kinds = [o.kind for o in completion_outcomes]
    assert kinds == ["shown", "rejected", "written"], kinds
    assert completion_outcomes[1].reason == "dismissed"
    written = completion_outcomes[2]
    assert written.final_text == "a + b" == result["completion"]["written"]
    # An empty suggestion showed nothing, so nothing was reported about it.
    assert len(empty) == len(empty_ids) and empty_proposed == {("completion", "")}, empty_proposed
    assert not empty_outcomes, [(o.suggestion_id, o.kind) for o in empty_outcomes]
