"""A real editor as the client: headless Neovim (Debian's `neovim`, built-in LSP client).

Neovim starts the server, asks for code actions on a selection, picks "Edit with
Apprentice" through vim.ui.select, resolves and applies it itself, runs the action's
command, and writes the buffer (tests/lsp/nvim_code_action.lua). Two servers:
- `python -m lsp` with the scripted model: the edit is known, so the buffer and the file
  on disk must hold it and the outcome rows must say shown + accepted;
- `apprentice lsp` itself on the real dev model (embedded backend): whatever the tiny
  model proposes, the request must end in an applied edit or a message, never a hang,
  and apprentice.status must name the dev model.
Run: .venv/bin/python -m pytest tests/lsp/test_neovim.py -q  (needs `nvim`:
scripts/system-deps.sh installs it)
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.lsp.client import PYTHON, SCRIPTED, server_env
from tests.lsp.scripted_backend import write_script
from tests.lsp.test_server import BUGGY, FIX, FIXED, outcomes

LUA = Path(__file__).with_name("nvim_code_action.lua")
APPRENTICE = str(Path(sys.executable).with_name("apprentice"))
SELECTION = [2, 0, 2, 15]  # line 2 ("    return a - b"), columns 0..15 inclusive


def run_nvim(command: list[str], root: Path, env: dict[str, str], tmp: Path) -> dict:
    nvim = shutil.which("nvim")
    assert nvim, "nvim is missing: run scripts/system-deps.sh (installs Debian's neovim)"
    report = tmp / "nvim-report.json"
    env = env | {
        "APPRENTICE_NVIM_CMD": json.dumps(command), "APPRENTICE_NVIM_ROOT": str(root),
        "APPRENTICE_NVIM_FILE": "calc.py", "APPRENTICE_NVIM_RANGE": json.dumps(SELECTION),
        "APPRENTICE_NVIM_ACTION": "Edit with Apprentice", "APPRENTICE_NVIM_OUT": str(report),
        "HOME": str(tmp), "XDG_CONFIG_HOME": str(tmp / "xdg"), "XDG_DATA_HOME": str(tmp / "xdg"),
        "XDG_STATE_HOME": str(tmp / "xdg"), "XDG_CACHE_HOME": str(tmp / "xdg"),
    }  # fmt: skip
    done = subprocess.run(
        [nvim, "--headless", "-u", "NONE", "-i", "NONE", "-n", "-S", str(LUA)],
        cwd=root, env=env, capture_output=True, text=True, timeout=360,
    )  # fmt: skip
    assert report.exists(), f"nvim wrote no report (rc {done.returncode}):\n{done.stderr[-4000:]}"
    return json.loads(report.read_text())


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "calc.py").write_text(BUGGY)
    return folder


def test_neovim_applies_a_code_action(root: Path, tmp_path: Path, sqlite_head_url: str):
    script = write_script(tmp_path / "script.json", agent=[FIX])
    env = server_env(tmp_path / "home", sqlite_head_url, APPRENTICE_LSP_TEST_BACKEND=SCRIPTED,
                     APPRENTICE_LSP_TEST_SCRIPT=str(script))  # fmt: skip
    report = run_nvim([PYTHON, "-m", "lsp"], root, env, tmp_path)
    assert report["outcome"] == "applied", report
    assert report["offered"] == ["Edit with Apprentice"]
    assert report["text"] == FIXED  # the buffer holds the edit...
    assert (root / "calc.py").read_text() == FIXED  # ...and :write saved it
    ids = report["command_result"]["recorded"]
    assert ids == ["accepted"], report
    stored = outcomes(sqlite_head_url)
    assert len(stored) == 1
    assert [kind for kind, _, _ in next(iter(stored.values()))] == ["shown", "accepted"]
    assert report["status"]["model"] == "scripted-test-model"


@pytest.mark.slow
def test_neovim_on_apprentice_lsp_with_the_dev_model(
    root: Path, tmp_path: Path, sqlite_url: str, dev_model_dir: Path
):
    env = server_env(tmp_path / "home", sqlite_url, APPRENTICE_MODEL_NAME=str(dev_model_dir))
    env["PATH"] = f"{Path(APPRENTICE).parent}{os.pathsep}{env.get('PATH', '')}"
    report = run_nvim([APPRENTICE, "lsp"], root, env, tmp_path)
    print("dev model code action:", report["outcome"], report["notifications"])  # for -rP
    assert report["offered"] == ["Edit with Apprentice"], report
    # A tiny model may or may not manage an edit; either way Neovim got a real answer.
    assert report["outcome"] in ("applied", "message"), report
    if report["outcome"] == "message":
        assert any("Apprentice" in n or "-32803" in n for n in report["notifications"]), report
        assert (root / "calc.py").read_text() == BUGGY
    else:
        assert report["status"]["model"] == str(dev_model_dir)
        assert (root / "calc.py").read_text() == report["text"]
    assert outcomes(sqlite_url) is not None  # migrated on start by `apprentice lsp`
